"""Where does a leader epoch end: the one answer the storage log, divergence and Raft share (pure).

Input is a leader-epoch list ``[(epoch, start_offset), ...]``: the first offset each epoch
wrote, epochs and start offsets both strictly increasing (``EpochCache.entries()``, or
the epoch boundaries of the Raft entry buffer).  The questions:

- ``end_offset_for_epoch(entries, epoch, log_end_offset)``: Kafka's OffsetsForLeaderEpoch
  (``LeaderEpochFileCache.endOffsetFor``)::

      epoch undefined (-1), or no entries       -> (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
      epoch is the latest                       -> (epoch, log_end_offset)
      epoch above the latest (unknown here)     -> (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
      epoch below every known epoch             -> (epoch, start of the first epoch)
      otherwise                                 -> (largest epoch <= epoch,
                                                    start of the first epoch above it)

  "Unknown" has one value, ``(UNDEFINED_EPOCH, UNDEFINED_OFFSET)``; a caller that needs
  another answer for it (Raft answers with its own end and last epoch, as KRaft's
  ``KafkaMetadataLog.endOffsetForEpoch`` does) maps it explicitly.
- ``epoch_for_offset(entries, offset)``: the epoch that wrote ``offset`` (None before the
  first entry).
- ``epoch_of_last_record(entries, log_end_offset)``: the epoch of the record just below
  ``log_end_offset`` (``UNDEFINED_EPOCH`` for an empty log): a follower's
  ``last_fetched_epoch``.

No I/O and no state: table-tested in ``tests/unit/brokers/log/test_epoch_lookup.py``.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Sequence

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_OFFSET", "end_offset_for_epoch", "epoch_for_offset", "epoch_of_last_record"]

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

EpochEntries = Sequence[tuple[int, int]]


def end_offset_for_epoch(entries: EpochEntries, epoch: int, log_end_offset: int) -> tuple[int, int]:
    """``(largest known epoch <= epoch, where it ends)`` (see the module docstring)."""
    if epoch == UNDEFINED_EPOCH or not entries:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    latest = entries[-1][0]
    if epoch == latest:
        return epoch, log_end_offset
    higher = bisect_right(entries, epoch, key=lambda entry: entry[0])
    if higher == len(entries):
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if higher == 0:
        return epoch, entries[0][1]
    return entries[higher - 1][0], entries[higher][1]


def epoch_for_offset(entries: EpochEntries, offset: int) -> int | None:
    """The epoch whose range holds ``offset`` (None when ``offset`` is before the first entry)."""
    index = bisect_right(entries, offset, key=lambda entry: entry[1])
    return None if index == 0 else entries[index - 1][0]


def epoch_of_last_record(entries: EpochEntries, log_end_offset: int) -> int:
    """The epoch of the last record below ``log_end_offset``; ``UNDEFINED_EPOCH`` if there is none."""
    for epoch, start in reversed(entries):
        if start < log_end_offset:
            return epoch
    return UNDEFINED_EPOCH
