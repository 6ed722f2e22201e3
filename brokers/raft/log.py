"""The narrow log the Raft core needs, and an in-memory implementation that can crash.

``RaftLog`` is the whole contract between the core and storage (Kafka's
``ReplicatedLog``/``RaftLog``, etcd's ``Storage``); ``RaftLogReader`` is its read side,
all the role logic may touch.  Appends are *written* when called but *buffered*: they
are visible to ``read`` at once and survive a crash only after ``flush`` (KRaft's
model: the log writes on append, the shell only flushes; see ``core.py`` for the Ready
contract built on it).  Truncations and snapshots are durable when the call returns.
Offsets below ``start_offset`` live only in the latest snapshot.

Implementations: ``MemoryRaftLog`` (tests, simulation; ``crash()`` drops what was not
flushed) and ``brokers.raft.metadata_log.MetadataLog`` (the metadata log on the segmented
``PartitionLog``).
Thread-safety: none; the owner serialises calls.
"""
from __future__ import annotations

from typing import Protocol, Sequence

from .entry_buffer import EntryBuffer
from .messages import Entry, Snapshot, SnapshotId

__all__ = ["RaftLogReader", "RaftLog", "MemoryRaftLog"]


class RaftLogReader(Protocol):
    """The read side of ``RaftLog``: what the role logic sees."""

    @property
    def start_offset(self) -> int:
        """First offset still held as an entry (the latest snapshot's end offset, or 0)."""

    @property
    def end_offset(self) -> int:
        """Offset the next append gets (exclusive end of the log, flushed or not)."""

    @property
    def flushed_end_offset(self) -> int:
        """Every entry below this offset survives a crash."""

    @property
    def last_epoch(self) -> int:
        """Epoch of the last entry, else of the latest snapshot, else 0."""

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` entries from ``offset`` (``start_offset <= offset <= end_offset``)."""

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at ``offset``; ``offset == start_offset - 1`` gives the snapshot's."""

    def end_offset_for_epoch(self, epoch: int) -> SnapshotId:
        """KIP-595 OffsetsForLeaderEpoch: the largest epoch ``<= epoch`` present and its end
        offset (``brokers.log.epoch_lookup``); above the latest epoch: ``(end_offset,
        last_epoch)``; below every held epoch: the snapshot boundary
        (``entry_buffer.end_offset_for_epoch`` spells out both)."""

    def latest_snapshot(self) -> Snapshot | None: ...


class RaftLog(RaftLogReader, Protocol):
    """The whole log contract: the read side plus appends, truncation, snapshots, flush."""

    def append_as_leader(self, payloads: Sequence[bytes], epoch: int, *, control: bool = False) -> int:
        """Append entries stamped with ``epoch`` at ``end_offset``; returns the last offset.
        Written but not durable until ``flush``."""

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        """Append entries that already carry offsets; the first must be ``end_offset``.
        Written but not durable until ``flush``."""

    def truncate_to(self, offset: int) -> None:
        """Durably drop every entry ``>= offset`` (``offset >= start_offset``)."""

    def create_snapshot(self, snapshot: Snapshot) -> None:
        """Durably store ``snapshot`` and drop entries below its end offset."""

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """Durably replace the whole log by ``snapshot`` (a follower too far behind)."""

    def flush(self) -> None:
        """Make every appended entry durable: afterwards ``flushed_end_offset == end_offset``."""


class MemoryRaftLog(EntryBuffer):
    """``RaftLog`` in memory.  ``crash()`` keeps only flushed entries, as a power cut would.

    Thread-safety: none.
    """

    def __init__(self) -> None:
        super().__init__()

    # --- RaftLog (the read side is EntryBuffer's) ---------------------------------
    def append_as_leader(self, payloads: Sequence[bytes], epoch: int, *, control: bool = False) -> int:
        self._entries.extend(self._leader_entries(payloads, epoch, control))
        return self.end_offset - 1

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        self._check_follower_entries(entries)
        self._entries.extend(entries)

    def truncate_to(self, offset: int) -> None:
        if offset < self._start:
            raise ValueError(f"cannot truncate to {offset} below the log start {self._start}")
        del self._entries[offset - self._start:]
        self._flushed = min(self._flushed, offset)

    def create_snapshot(self, snapshot: Snapshot) -> None:
        end = self._check_snapshot_end(snapshot)
        del self._entries[: end - self._start]
        self._start = end
        self._flushed = max(self._flushed, end)
        self._snapshot = snapshot

    def install_snapshot(self, snapshot: Snapshot) -> None:
        self._entries.clear()
        self._start = self._flushed = snapshot.snapshot_id.end_offset
        self._snapshot = snapshot

    def flush(self) -> None:
        self._flushed = self.end_offset

    # --- simulation hooks ----------------------------------------------------------
    def crash(self, *, keep_unflushed: int = 0) -> None:
        """Lose every entry that was not flushed, except the first ``keep_unflushed``
        of them (the OS may have written some of the tail before power went)."""
        keep = min(self.end_offset, self._flushed + max(0, keep_unflushed))
        del self._entries[keep - self._start:]
        self._flushed = self.end_offset

    def entries(self) -> list[Entry]:
        return list(self._entries)
