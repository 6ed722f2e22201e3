"""``MetadataLog``: the Raft ``RaftLog`` over the project's segmented ``PartitionLog``.

Layout of ``directory``: ``log/`` is a ``PartitionLog`` (segments of frames, see
``codec.py``: one binary ``payload`` column per frame, offset and epoch in the frame
header, control entries flagged by the control attribute); ``snapshots/`` is a
``SnapshotStore``.  Entries are also kept in memory (the metadata log is small and
bounded by snapshots), so reads and epoch lookups never touch the disk.

Durability: appends are written to the partition log at once (inside the core's
``step``/``propose``) and made durable by ``flush()``, which the shell calls when a
``Ready`` has a ``flush_to_offset`` (the Ready contract, ``core.py``); the partition log
runs with ``flush_messages = flush_ms = 0`` and retention off, so it never fsyncs on its
own.  Truncation and snapshots are durable on return (they flush as they go): because
``PartitionLog`` drops a frame that straddles the truncation point whole, the entries of
that frame below the point are appended again and flushed; a snapshot is made durable
before the log start moves past it.

Recovery: ``PartitionLog`` cuts a torn tail; entries below the newest snapshot are then
dropped (``advance_log_start``), and a log that ends below the snapshot (a crash while
installing one) is emptied to start at the snapshot's end.

Thread-safety: none; the Raft driver serialises calls on its thread.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from brokers.log import PartitionLog
from spark_log.config import TopicConfig
from spark_log.errors import StorageError

from .codec import decode_entries, encode_entries
from .entry_buffer import EntryBuffer
from .messages import Entry, Snapshot
from .snapshot_store import SnapshotStore

__all__ = ["MetadataLog"]

_LOG_CONFIG = TopicConfig(retention_ms=-1, retention_bytes=-1, flush_messages=0, flush_ms=0,
                          segment_bytes=64 * 1024 * 1024, max_message_bytes=256 * 1024 * 1024)
_READ_BYTES = 8 * 1024 * 1024


class MetadataLog(EntryBuffer):
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._snapshots = SnapshotStore(self.directory / "snapshots")
        snapshot = self._snapshots.load_latest()
        super().__init__(start=snapshot.snapshot_id.end_offset if snapshot else 0, snapshot=snapshot)
        self._log = PartitionLog(self.directory / "log", _LOG_CONFIG)
        snap_end = self._snapshot.snapshot_id.end_offset if self._snapshot else 0
        if self._log.log_end_offset < snap_end:
            self._log.truncate_fully_and_start_at(snap_end)
        elif self._log.log_start_offset < snap_end:
            self._log.advance_log_start(snap_end)
        if self._log.log_start_offset != snap_end:
            raise StorageError(f"{self.directory}: log starts at {self._log.log_start_offset}, "
                               f"newest snapshot ends at {snap_end}")
        self._start = snap_end
        self._entries = [e for e in self._read_all() if e.offset >= snap_end]
        if self._entries and self._entries[0].offset != snap_end:
            raise StorageError(f"{self.directory}: first entry {self._entries[0].offset} != start {snap_end}")
        self._flushed = self.end_offset
        self._starts: list[tuple[int, int]] = []  # (epoch, first offset) of each epoch held
        self._rebuild_starts()

    def _rebuild_starts(self) -> None:
        self._starts = EntryBuffer._epoch_starts(self)

    def _extend_starts(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if not self._starts or self._starts[-1][0] != entry.epoch:
                self._starts.append((entry.epoch, entry.offset))

    def _read_all(self) -> list[Entry]:
        out: list[Entry] = []
        offset = self._log.log_start_offset
        while offset < self._log.log_end_offset:
            result = self._log.read(offset, max_bytes=_READ_BYTES)
            if result.next_offset <= offset:
                break
            out.extend(decode_entries(result.data))
            offset = result.next_offset
        return out

    # --- RaftLog (the read side is EntryBuffer's) ---------------------------------
    def append_as_leader(self, payloads: Sequence[bytes], epoch: int, *, control: bool = False) -> int:
        self._write(self._leader_entries(payloads, epoch, control))
        return self.end_offset - 1

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        self._check_follower_entries(entries)
        self._write(list(entries))

    def _write(self, entries: list[Entry]) -> None:
        self._log.append_as_follower(encode_entries(entries))
        self._entries.extend(entries)
        self._extend_starts(entries)

    def _epoch_starts(self) -> list[tuple[int, int]]:
        return self._starts

    def truncate_to(self, offset: int) -> None:
        if offset < self._start:
            raise ValueError(f"cannot truncate to {offset} below the log start {self._start}")
        if offset >= self.end_offset:
            return
        del self._entries[offset - self._start:]
        self._log.truncate_to(offset)
        lost = self._log.log_end_offset
        if lost < offset:  # a frame straddled the point: put back its head
            self._log.append_as_follower(encode_entries(self.read(lost, offset - lost)))
        self._log.flush()
        self._flushed = self.end_offset
        self._rebuild_starts()

    def create_snapshot(self, snapshot: Snapshot) -> None:
        end = self._check_snapshot_end(snapshot)
        self._log.flush()
        self._snapshots.write(snapshot)
        self._snapshot = snapshot
        self._log.advance_log_start(end)
        del self._entries[: end - self._start]
        self._start = end
        self._flushed = self.end_offset
        self._rebuild_starts()

    def install_snapshot(self, snapshot: Snapshot) -> None:
        self._snapshots.write(snapshot)
        self._snapshot = snapshot
        end = snapshot.snapshot_id.end_offset
        self._log.truncate_fully_and_start_at(end)
        self._entries = []
        self._start = self._flushed = end
        self._starts = []

    def flush(self) -> None:
        if self._flushed != self.end_offset:
            self._log.flush()
            self._flushed = self.end_offset

    def close(self) -> None:
        self._log.close()
