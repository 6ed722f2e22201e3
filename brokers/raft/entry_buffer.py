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

import bisect
from typing import Sequence

from .messages import Entry, Snapshot, SnapshotId

__all__ = ["EntryBuffer", "end_offset_for_epoch"]


def end_offset_for_epoch(epoch_starts: Sequence[tuple[int, int]], end_offset: int,
                         start_offset: int, snapshot_epoch: int, epoch: int) -> SnapshotId:
    """Shared OffsetsForLeaderEpoch over a list of ``(epoch, start offset)`` boundaries.

    ``epoch_starts`` is sorted and holds the first offset of each epoch that still has
    entries.  The snapshot's epoch ends at ``start_offset``.  An epoch older than all of
    them answers ``(0, start_offset)``.
    """
    index = bisect.bisect_right(epoch_starts, (epoch, float("inf"))) - 1
    if index < 0:
        if snapshot_epoch and snapshot_epoch <= epoch:
            return SnapshotId(start_offset, snapshot_epoch)
        return SnapshotId(start_offset, 0)
    found = epoch_starts[index][0]
    end = epoch_starts[index + 1][1] if index + 1 < len(epoch_starts) else end_offset
    return SnapshotId(end, found)


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
