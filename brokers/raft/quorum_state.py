"""The ``quorum-state`` file: the hard state (epoch, voted-for, leader), durable first.

Format: one JSON object ``{"epoch": int, "voted_for": int|null, "leader_id": int|null,
"version": 1}``, written with ``brokers.log.durable.atomic_write`` (``quorum-state.tmp``,
fsync, rename over ``quorum-state``, fsync of the directory), so a crash leaves either the
old or the new state, never a torn one.  A missing file means ``HardState()`` (a fresh node).
Thread-safety: none; the Raft driver calls it under its lock.
"""
from __future__ import annotations

import json
from pathlib import Path

from brokers.log.durable import atomic_write
from spark_log.errors import StorageError

from .messages import HardState

__all__ = ["QuorumStateFile"]


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
