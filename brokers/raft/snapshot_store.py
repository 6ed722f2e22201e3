"""Raft snapshots as files: ``<dir>/<end offset, 20 digits>-<epoch, 10 digits>.snapshot``.

Each file is a 20-byte header (magic ``SLSN``, int64 end offset, int32 epoch, uint32
CRC-32C of the data) followed by the state machine's bytes.  Written with
``brokers.log.durable.atomic_write`` (tmp file, fsync, rename, directory fsync): a crash leaves the old or the new snapshot, never a
torn one.  Older snapshots are deleted once a newer one is durable.  On load the newest
file whose header and CRC check out wins.  Thread-safety: none; the owner serialises.
"""
from __future__ import annotations

import struct
from pathlib import Path

from brokers.log.durable import atomic_write, fsync_dir
from spark_log.frame import crc32c

from .messages import Snapshot, SnapshotId

__all__ = ["SnapshotStore"]

_HEADER = struct.Struct("<4sqiI")
_MAGIC = b"SLSN"


class SnapshotStore:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def load_latest(self) -> Snapshot | None:
        for path in sorted(self.directory.glob("*.snapshot"), reverse=True):
            raw = path.read_bytes()
            if len(raw) < _HEADER.size:
                continue
            magic, end, epoch, crc = _HEADER.unpack_from(raw)
            data = raw[_HEADER.size:]
            if magic == _MAGIC and crc32c(data) == crc:
                return Snapshot(SnapshotId(end, epoch), data)
        return None

    def write(self, snapshot: Snapshot) -> None:
        sid = snapshot.snapshot_id
        path = self.directory / f"{sid.end_offset:020d}-{sid.epoch:010d}.snapshot"
        atomic_write(path, _HEADER.pack(_MAGIC, sid.end_offset, sid.epoch, crc32c(snapshot.data)) + snapshot.data)
        for old in self.directory.glob("*.snapshot"):
            if old != path:
                old.unlink()
        fsync_dir(self.directory)
