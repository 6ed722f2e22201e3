"""``SimDisk``: one node's durable state: a ``MemoryRaftLog`` plus the persisted hard state.

``crash(rng)`` drops what was not flushed; with ``tear_rate`` it keeps a random part of
the unflushed tail instead (the OS wrote some pages before the power went).  ``wipe``
loses everything (only safe for observers: a voter that forgets its vote can vote twice).
"""
from __future__ import annotations

import random

from brokers.raft.log import MemoryRaftLog
from brokers.raft.messages import HardState

__all__ = ["SimDisk"]


class SimDisk:
    def __init__(self, tear_rate: float = 0.3) -> None:
        self.log = MemoryRaftLog()
        self.hard_state = HardState()
        self.tear_rate = tear_rate

    def persist_hard_state(self, state: HardState) -> None:
        self.hard_state = state

    def crash(self, rng: random.Random) -> int:
        """Lose unflushed entries; returns how many unflushed entries survived."""
        unflushed = self.log.end_offset - self.log.flushed_end_offset
        keep = rng.randint(0, unflushed) if unflushed and rng.random() < self.tear_rate else 0
        self.log.crash(keep_unflushed=keep)
        return keep

    def wipe(self) -> None:
        self.log = MemoryRaftLog()
        self.hard_state = HardState()
