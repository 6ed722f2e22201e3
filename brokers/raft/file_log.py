"""``FileRaftLog``: the metadata log on disk, behind the ``RaftLog`` protocol.

Interim storage until ``brokers/log/partition_log.PartitionLog`` lands; then the
metadata log moves onto it behind the same protocol.

Layout of ``directory``:

- ``metadata.log``: frames (``codec.py``: one binary ``payload`` column, base offset,
  epoch and control flag in the frame header, CRC-32C), in offset order, no gaps.  An
  append is one frame per run of same-epoch entries, written at once and fsynced only
  by ``flush()``.
- ``snapshots/<end offset, 20 digits>-<epoch, 10 digits>.snapshot``: 20-byte header
  (magic ``SLSN``, int64 end offset, int32 epoch, uint32 CRC-32C of the data) then the
  state machine's bytes.  Written by tmp + fsync + rename + directory fsync; the newest
  valid one wins, older ones are deleted once a newer one is durable.

Recovery (``__init__``): frames are verified from the start; the first damaged or torn
frame and everything after it are cut off (they were never flushed, or a flush was torn
by the crash).  Entries below the newest snapshot's end offset are dropped.  Truncation,
snapshot creation and installation are durable when they return (the file is rewritten
through a tmp file and renamed).  Payloads are kept in memory as well: the metadata log
is small and bounded by snapshots.

Thread-safety: none; the Raft driver serialises calls under its lock.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Sequence

from spark_log.errors import CorruptRecordError, StorageError
from spark_log.frame import crc32c, iter_frames

from .codec import decode_entries, encode_entries
from .log import end_offset_for_epoch
from .messages import Entry, Snapshot, SnapshotId
from .quorum_state import atomic_write, fsync_dir

__all__ = ["FileRaftLog"]

_SNAP_HEADER = struct.Struct("<4sqiI")
_SNAP_MAGIC = b"SLSN"


class FileRaftLog:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.snapshot_dir = self.directory / "snapshots"
        self.snapshot_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "metadata.log"
        self._snapshot = self._load_latest_snapshot()
        self._start = self._snapshot.snapshot_id.end_offset if self._snapshot else 0
        self._entries: list[Entry] = []
        self._recover()
        self._flushed = self.end_offset
        self._handle = open(self.path, "ab")

    # --- recovery ------------------------------------------------------------------
    def _recover(self) -> None:
        data = self.path.read_bytes() if self.path.exists() else b""
        good = 0
        entries: list[Entry] = []
        try:
            for position, header in iter_frames(data, verify=True):
                entries.extend(decode_entries(memoryview(data)[position:position + header.frame_length]))
                good = position + header.frame_length
        except CorruptRecordError:
            pass  # torn or damaged tail: cut below
        kept = [e for e in entries if e.offset >= self._start]
        for previous, entry in zip([None, *kept], kept):
            expected = self._start if previous is None else previous.offset + 1
            if entry.offset != expected:
                raise StorageError(f"{self.path}: entry offset {entry.offset}, expected {expected}")
        self._entries = kept
        if good != len(data) or len(kept) != len(entries):
            self._rewrite()

    def _rewrite(self) -> None:
        atomic_write(self.path, encode_entries(self._entries))

    def _load_latest_snapshot(self) -> Snapshot | None:
        for path in sorted(self.snapshot_dir.glob("*.snapshot"), reverse=True):
            raw = path.read_bytes()
            if len(raw) < _SNAP_HEADER.size:
                continue
            magic, end, epoch, crc = _SNAP_HEADER.unpack_from(raw)
            data = raw[_SNAP_HEADER.size:]
            if magic == _SNAP_MAGIC and crc32c(data) == crc:
                return Snapshot(SnapshotId(end, epoch), data)
        return None

    # --- RaftLog -------------------------------------------------------------------
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

    def append_as_leader(self, payloads: Sequence[bytes], epoch: int, *, control: bool = False) -> int:
        if not payloads:
            raise ValueError("nothing to append")
        if epoch < self.last_epoch:
            raise ValueError(f"epoch {epoch} is older than the log's last epoch {self.last_epoch}")
        first = self.end_offset
        self._write([Entry(first + i, epoch, bytes(p), control) for i, p in enumerate(payloads)])
        return self.end_offset - 1

    def append_as_follower(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        for previous, entry in zip([None, *entries], entries):
            expected = self.end_offset if previous is None else previous.offset + 1
            if entry.offset != expected:
                raise ValueError(f"entry offset {entry.offset} != expected {expected}")
        if entries[0].epoch < self.last_epoch:
            raise ValueError(f"entry epoch {entries[0].epoch} < last epoch {self.last_epoch}")
        self._write(list(entries))

    def _write(self, entries: list[Entry]) -> None:
        try:
            self._handle.write(encode_entries(entries))
        except OSError as exc:
            raise StorageError(f"{self.path}: append failed: {exc}") from None
        self._entries.extend(entries)

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

    def end_offset_for_epoch(self, epoch: int) -> SnapshotId:
        starts: list[tuple[int, int]] = []
        for entry in self._entries:
            if not starts or starts[-1][0] != entry.epoch:
                starts.append((entry.epoch, entry.offset))
        snap_epoch = self._snapshot.snapshot_id.epoch if self._snapshot else 0
        return end_offset_for_epoch(starts, self.end_offset, self._start, snap_epoch, epoch)

    def truncate_to(self, offset: int) -> None:
        if offset < self._start:
            raise ValueError(f"cannot truncate to {offset} below the log start {self._start}")
        if offset >= self.end_offset:
            return
        del self._entries[offset - self._start:]
        self._reopen_with_rewrite()
        self._flushed = self.end_offset  # the rewrite made every remaining entry durable

    def create_snapshot(self, snapshot: Snapshot) -> None:
        end = snapshot.snapshot_id.end_offset
        if not self._start <= end <= self.end_offset:
            raise ValueError(f"snapshot end {end} outside [{self._start}, {self.end_offset}]")
        self._write_snapshot(snapshot)
        del self._entries[: end - self._start]
        self._start = end
        self._reopen_with_rewrite()
        self._flushed = self.end_offset

    def install_snapshot(self, snapshot: Snapshot) -> None:
        self._write_snapshot(snapshot)
        self._entries = []
        self._start = snapshot.snapshot_id.end_offset
        self._reopen_with_rewrite()
        self._flushed = self.end_offset

    def latest_snapshot(self) -> Snapshot | None:
        return self._snapshot

    def flush(self) -> None:
        if self._flushed == self.end_offset:
            return
        try:
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as exc:
            raise StorageError(f"{self.path}: fsync failed: {exc}") from None
        self._flushed = self.end_offset

    def close(self) -> None:
        self._handle.close()

    # --- internals -----------------------------------------------------------------
    def _reopen_with_rewrite(self) -> None:
        self._handle.close()
        self._rewrite()
        self._handle = open(self.path, "ab")

    def _write_snapshot(self, snapshot: Snapshot) -> None:
        sid = snapshot.snapshot_id
        path = self.snapshot_dir / f"{sid.end_offset:020d}-{sid.epoch:010d}.snapshot"
        header = _SNAP_HEADER.pack(_SNAP_MAGIC, sid.end_offset, sid.epoch, crc32c(snapshot.data))
        atomic_write(path, header + snapshot.data)
        for old in self.snapshot_dir.glob("*.snapshot"):
            if old != path:
                old.unlink()
        fsync_dir(self.snapshot_dir)
        self._snapshot = snapshot
