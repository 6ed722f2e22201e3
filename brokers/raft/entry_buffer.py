"""``EntryBuffer``: the in-memory entry bookkeeping both ``RaftLog`` implementations share.

It holds the entries from ``start_offset`` (the latest snapshot's end) to ``end_offset``,
the latest snapshot and the flushed end, answers the read-side calls of ``RaftLog``
(offsets, ``last_epoch``, ``read``, ``epoch_at``, ``end_offset_for_epoch``) and checks
appends before they happen (``_leader_entries``, ``_check_follower_entries``), so that a
refused append changes nothing.  Subclasses decide durability: ``MemoryRaftLog`` keeps
entries only here, ``MetadataLog`` also writes them to a ``PartitionLog``.

Thread-safety: none; the owner serialises calls.
"""
from __future__ import annotations

from typing import Sequence

from brokers.log import epoch_lookup

from .messages import Entry, Snapshot, SnapshotId

__all__ = ["EntryBuffer", "end_offset_for_epoch"]


def end_offset_for_epoch(epoch_starts: Sequence[tuple[int, int]], end_offset: int,
                         start_offset: int, snapshot_epoch: int, epoch: int) -> SnapshotId:
    """Raft's answer to "where does ``epoch`` end" (KIP-595 Fetch validation, DivergingEpoch).

    ``epoch_starts`` is sorted and holds ``(epoch, first offset)`` of each epoch that still
    has entries; entries run from ``start_offset`` (the latest snapshot's end, whose epoch
    is ``snapshot_epoch``, 0 without one) to ``end_offset``.  The lookup itself is
    ``brokers.log.epoch_lookup.end_offset_for_epoch``; the two answers Raft needs that the
    storage log's OffsetsForLeaderEpoch does not give are mapped here:

    - ``epoch`` above the latest epoch held (the lookup's "unknown"): ``(end_offset, latest
      epoch)``, as KRaft's ``KafkaMetadataLog.endOffsetForEpoch`` answers with the log end
      and its last fetched epoch, so a follower ahead in epochs truncates to the leader's end;
    - ``epoch`` below every epoch held, or no entries at all: the snapshot boundary,
      ``(start_offset, snapshot_epoch)`` when the snapshot's epoch is ``<= epoch``, else
      ``(start_offset, 0)``: epoch 0 means "older than anything outside the snapshot" and
      makes a follower fetch the snapshot (KIP-630).
    """
    if epoch_starts and epoch >= epoch_starts[0][0]:
        found, end = epoch_lookup.end_offset_for_epoch(epoch_starts, epoch, end_offset)
        if found == epoch_lookup.UNDEFINED_EPOCH:  # above the latest epoch: KRaft's log end
            return SnapshotId(end_offset, epoch_starts[-1][0])
        return SnapshotId(end, found)
    # Below every epoch still held as entries: the boundary is the snapshot's end.
    return SnapshotId(start_offset, snapshot_epoch if 0 < snapshot_epoch <= epoch else 0)


class EntryBuffer:
    def __init__(self, *, start: int = 0, snapshot: Snapshot | None = None) -> None:
        self._entries: list[Entry] = []
        self._start = start
        self._flushed = start
        self._snapshot = snapshot

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed

    @property
    def last_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        return self._snapshot.snapshot_id.epoch if self._snapshot else 0

    def _leader_entries(self, payloads: Sequence[bytes], epoch: int, control: bool) -> list[Entry]:
        """The entries a leader append adds at ``end_offset``, after checking it."""
        if not payloads:
            raise ValueError("nothing to append")
        if epoch < self.last_epoch:
            raise ValueError(f"epoch {epoch} is older than the log's last epoch {self.last_epoch}")
        first = self.end_offset
        return [Entry(first + i, epoch, bytes(p), control) for i, p in enumerate(payloads)]

    def _check_follower_entries(self, entries: Sequence[Entry]) -> None:
        """Entries must follow on at ``end_offset`` with no gap and no falling epoch."""
        expected, last_epoch = self.end_offset, self.last_epoch
        for entry in entries:
            if entry.offset != expected:
                raise ValueError(f"entry offset {entry.offset} != expected {expected}")
            if entry.epoch < last_epoch:
                raise ValueError(f"entry epoch {entry.epoch} < last epoch {last_epoch}")
            expected, last_epoch = expected + 1, entry.epoch

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        if not self._start <= offset <= self.end_offset:
            raise ValueError(f"offset {offset} outside [{self._start}, {self.end_offset}]")
        first = offset - self._start
        return self._entries[first:first + max_entries]

    def epoch_at(self, offset: int) -> int:
        if offset == self._start - 1 and self._snapshot is not None:
            return self._snapshot.snapshot_id.epoch
        if offset == -1:
            return 0
        return self._entries[offset - self._start].epoch

    def _epoch_starts(self) -> list[tuple[int, int]]:
        """``(epoch, first offset)`` of each epoch that still has entries (subclasses may cache)."""
        starts: list[tuple[int, int]] = []
        for entry in self._entries:
            if not starts or starts[-1][0] != entry.epoch:
                starts.append((entry.epoch, entry.offset))
        return starts

    def end_offset_for_epoch(self, epoch: int) -> SnapshotId:
        snap_epoch = self._snapshot.snapshot_id.epoch if self._snapshot else 0
        return end_offset_for_epoch(self._epoch_starts(), self.end_offset, self._start, snap_epoch, epoch)

    def _check_snapshot_end(self, snapshot: Snapshot) -> int:
        end = snapshot.snapshot_id.end_offset
        if not self._start <= end <= self.end_offset:
            raise ValueError(f"snapshot end {end} outside [{self._start}, {self.end_offset}]")
        return end

    def latest_snapshot(self) -> Snapshot | None:
        return self._snapshot
