"""``SimNetwork``: a seeded network between simulated nodes.

Per message: dropped with ``drop_rate``, delivered after a uniform delay in
``[min_delay_ms, max_delay_ms]`` (so messages reorder), duplicated with
``duplicate_rate`` (the copy gets its own delay).  Links are directed: ``cut(a, b)``
drops a -> b only (asymmetric partitions); ``partition(groups)`` cuts every link between
groups (both directions); ``isolate(n)``; ``clog(a, b, ms)`` adds latency to a link;
``heal()`` restores everything.  A message in flight when its link is cut is dropped
on arrival, as a real partition would.
"""
from __future__ import annotations

import random
from typing import Callable, Iterable

from brokers.raft.messages import Message

from .scheduler import Scheduler

__all__ = ["SimNetwork"]


class SimNetwork:
    def __init__(self, rng: random.Random, scheduler: Scheduler, *, min_delay_ms: int = 1, max_delay_ms: int = 5,
                 drop_rate: float = 0.0, duplicate_rate: float = 0.0) -> None:
        self.rng = rng
        self.scheduler = scheduler
        self.min_delay_ms = min_delay_ms
        self.max_delay_ms = max_delay_ms
        self.drop_rate = drop_rate
        self.duplicate_rate = duplicate_rate
        self.cut_links: set[tuple[int, int]] = set()
        self.clogged: dict[tuple[int, int], int] = {}
        self.deliver: Callable[[Message], None] = lambda _m: None
        self.sent = self.dropped = 0

    # --- faults ----------------------------------------------------------------------
    def cut(self, src: int, dst: int) -> None:
        self.cut_links.add((src, dst))

    def partition(self, groups: Iterable[Iterable[int]]) -> None:
        sets = [sorted(g) for g in groups]
        for i, left in enumerate(sets):
            for right in sets[i + 1:]:
                for a in left:
                    for b in right:
                        self.cut_links.add((a, b))
                        self.cut_links.add((b, a))

    def isolate(self, node: int, everyone: Iterable[int]) -> None:
        self.partition([[node], [n for n in everyone if n != node]])

    def clog(self, src: int, dst: int, extra_ms: int) -> None:
        self.clogged[(src, dst)] = extra_ms

    def heal(self) -> None:
        self.cut_links.clear()
        self.clogged.clear()

    def is_healed(self) -> bool:
        return not self.cut_links and not self.clogged

    # --- traffic ---------------------------------------------------------------------
    def send(self, message: Message) -> None:
        self.sent += 1
        copies = 1
        if self.drop_rate and self.rng.random() < self.drop_rate:
            self.dropped += 1
            return
        if self.duplicate_rate and self.rng.random() < self.duplicate_rate:
            copies = 2
        link = (message.src, message.dst)
        for _ in range(copies):
            if link in self.cut_links:
                self.dropped += 1
                continue
            delay = self.rng.randint(self.min_delay_ms, self.max_delay_ms) + self.clogged.get(link, 0)
            self.scheduler.schedule(delay, "deliver", lambda m=message: self._arrive(m))

    def _arrive(self, message: Message) -> None:
        if (message.src, message.dst) in self.cut_links:
            self.dropped += 1
            return
        self.deliver(message)
