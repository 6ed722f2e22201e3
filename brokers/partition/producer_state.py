"""Idempotent-producer state of one partition: who wrote which sequences at which offsets.

Pure bookkeeping, no I/O.  The inputs are the idempotence fields of frame headers
(``producer_id``, ``producer_epoch``, ``base_sequence``, record count) and the offsets the
log assigned.  ``check`` classifies an incoming frame run; ``record`` notes an appended one.

Rules (Kafka's, plus the replay case the Spark writer needs):

    producer_id < 0                      -> APPEND (not idempotent)
    unknown producer, sequence 0         -> APPEND
    epoch < known epoch                  -> FencedEpochError
    epoch > known epoch, sequence 0      -> APPEND (the new epoch replaces the old one's batches)
    same epoch, sequence == last + 1     -> APPEND
    same epoch, whole range <= last      -> DUPLICATE with the original offset of its first
                                            record (found in the epoch's batches even when
                                            the replay cut records into different frames);
                                            DuplicateSequenceError if those batches were
                                            evicted (``max_batches``)
    same epoch, range straddles last     -> OutOfOrderSequenceError
    a sequence beyond last + 1 (or > 0 for an unknown producer or a new epoch)
                                         -> GAP: an earlier frame may still be on its way
                                            (pipelined calls can arrive out of order); the
                                            caller waits for it, then gives up with
                                            OutOfOrderSequenceError

Sequences do not wrap (2**31 records per producer epoch and partition).  ``expire`` drops
producers idle for longer than ``producer.id.expiration.ms``.

A partition entry's frames are judged as one run (``ProducerRun.of``): they must share one
producer id and epoch and have contiguous sequences.

Thread-safety: none; the partition's lock guards it.
"""
from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

from spark_log.errors import DuplicateSequenceError, FencedEpochError, InvalidRequestError, OutOfOrderSequenceError
from spark_log.frame import FrameHeader

__all__ = ["Verdict", "Check", "ProducerRun", "ProducerStateTable", "DEFAULT_MAX_BATCHES",
           "PRODUCER_ID_EXPIRATION_MS"]

DEFAULT_MAX_BATCHES = 1000
PRODUCER_ID_EXPIRATION_MS = 7 * 24 * 3600 * 1000  # Kafka's producer.id.expiration.ms default


class ProducerRun(NamedTuple):
    """The idempotence fields of one partition entry: ``record_count`` records from
    ``first_sequence`` (``producer_id`` < 0: not idempotent)."""

    producer_id: int
    producer_epoch: int
    first_sequence: int
    record_count: int

    @classmethod
    def of(cls, headers: Sequence[FrameHeader]) -> "ProducerRun":
        """The run of an entry's frames (at least one).  Raises ``InvalidRequestError`` when
        they do not share producer id and epoch, ``OutOfOrderSequenceError`` when an
        idempotent producer's sequences are not contiguous."""
        first = headers[0]
        pid, epoch = first.producer_id, first.producer_epoch
        count = 0
        for header in headers:
            if header.producer_id != pid or header.producer_epoch != epoch:
                raise InvalidRequestError("frames of one partition entry must share producer id and epoch")
            if pid >= 0 and header.base_sequence != first.base_sequence + count:
                raise OutOfOrderSequenceError("frames of one partition entry must have contiguous sequences")
            count += header.record_count
        return cls(pid, epoch, first.base_sequence, count)


class Verdict(enum.Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"
    GAP = "gap"


@dataclass(frozen=True, slots=True)
class Check:
    verdict: Verdict
    first_offset: int = -1  # DUPLICATE: original offset of the first record
    last_offset: int = -1  # DUPLICATE: original offset of the last record


@dataclass(slots=True)
class _Producer:
    epoch: int
    last_seq: int = -1
    last_timestamp: int = -1
    # batches of the current epoch, by first sequence: (first_seq, last_seq, first_offset)
    starts: list[int] = field(default_factory=list)
    batches: list[tuple[int, int, int]] = field(default_factory=list)


class ProducerStateTable:
    """Per producer id: epoch, last sequence, and the current epoch's appended batches."""

    def __init__(self, *, max_batches: int = DEFAULT_MAX_BATCHES) -> None:
        self._max_batches = max_batches
        self._producers: dict[int, _Producer] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def last_sequence(self, producer_id: int) -> tuple[int, int] | None:
        """``(epoch, last sequence)`` of a known producer."""
        entry = self._producers.get(producer_id)
        return None if entry is None else (entry.epoch, entry.last_seq)

    def check(self, producer_id: int, epoch: int, first_seq: int, count: int) -> Check:
        """Classify a run of ``count`` records starting at ``first_seq`` (see the module rules)."""
        if producer_id < 0:
            return Check(Verdict.APPEND)
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            return Check(Verdict.APPEND if first_seq == 0 else Verdict.GAP)
        if epoch < entry.epoch:
            raise FencedEpochError(
                f"producer {producer_id} epoch {epoch} is fenced: epoch {entry.epoch} has written to this partition"
            )
        expected = entry.last_seq + 1
        if first_seq == expected:
            return Check(Verdict.APPEND)
        if first_seq > expected:
            return Check(Verdict.GAP)
        last_seq = first_seq + count - 1
        if last_seq > entry.last_seq:
            raise OutOfOrderSequenceError(
                f"producer {producer_id} epoch {epoch}: sequences {first_seq}..{last_seq} straddle the last "
                f"appended sequence {entry.last_seq}"
            )
        first = self._offset_of(entry, first_seq)
        last = self._offset_of(entry, last_seq)
        if first is None or last is None:
            raise DuplicateSequenceError(
                f"producer {producer_id} epoch {epoch}: sequences {first_seq}..{last_seq} were appended long ago"
            )
        return Check(Verdict.DUPLICATE, first, last)

    @staticmethod
    def _offset_of(entry: _Producer, seq: int) -> int | None:
        index = bisect.bisect_right(entry.starts, seq) - 1
        if index < 0:
            return None
        first_seq, last_seq, first_offset = entry.batches[index]
        if seq > last_seq:
            return None
        return first_offset + (seq - first_seq)

    def record(self, producer_id: int, epoch: int, first_seq: int, count: int, first_offset: int,
               timestamp_ms: int = -1) -> None:
        """Note an appended run (also used to rebuild the table from the log, in log order)."""
        if producer_id < 0 or first_seq < 0:
            return
        entry = self._producers.get(producer_id)
        if entry is None or epoch != entry.epoch:
            if entry is not None and epoch < entry.epoch:
                return  # an older epoch's frame found while rebuilding: already superseded
            entry = self._producers[producer_id] = _Producer(epoch=epoch)
        last_seq = first_seq + count - 1
        entry.last_seq = max(entry.last_seq, last_seq)
        entry.last_timestamp = max(entry.last_timestamp, timestamp_ms)
        if entry.starts and first_seq <= entry.starts[-1]:
            return  # a rebuild saw it already
        entry.starts.append(first_seq)
        entry.batches.append((first_seq, last_seq, first_offset))
        if len(entry.batches) > self._max_batches:
            drop = len(entry.batches) - self._max_batches
            del entry.starts[:drop]
            del entry.batches[:drop]

    def bump(self, producer_id: int, epoch: int) -> None:
        """A transaction marker in ``epoch``: the producer continues in that epoch from
        sequence 0 (its older epochs are fenced); an older epoch than known changes nothing."""
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            timestamp = -1 if entry is None else entry.last_timestamp
            self._producers[producer_id] = _Producer(epoch=epoch, last_timestamp=timestamp)

    def expire(self, now_ms: int, max_idle_ms: int, keep: "dict[int, int] | None" = None) -> int:
        """Forget producers whose last write is older than ``max_idle_ms`` (except those in
        ``keep``); returns how many."""
        keep = keep or {}
        stale = [pid for pid, e in self._producers.items()
                 if 0 <= e.last_timestamp < now_ms - max_idle_ms and pid not in keep]
        for pid in stale:
            del self._producers[pid]
        return len(stale)

    def clear(self) -> None:
        self._producers.clear()
