"""The ``quorum-state`` file: the hard state (epoch, voted-for, leader), durable first.

Format: one JSON object ``{"epoch": int, "voted_for": int|null, "leader_id": int|null,
"version": 1}``.  Written to ``quorum-state.tmp``, fsynced, renamed over
``quorum-state``, then the directory is fsynced, so a crash leaves either the old or the
new state, never a torn one.  A missing file means ``HardState()`` (a fresh node).
Thread-safety: none; the Raft driver calls it under its lock.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from spark_log.errors import StorageError

from .messages import HardState

__all__ = ["QuorumStateFile", "fsync_dir", "atomic_write"]


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` durably (tmp file, fsync, rename, fsync dir)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


class QuorumStateFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> HardState:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return HardState()
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot read quorum state {self.path}: {exc}") from None
        return HardState(int(raw["epoch"]), raw.get("voted_for"), raw.get("leader_id"))

    def write(self, state: HardState) -> None:
        body = {"version": 1, "epoch": state.epoch, "voted_for": state.voted_for, "leader_id": state.leader_id}
        atomic_write(self.path, json.dumps(body, sort_keys=True).encode())
