"""Discrete-event scheduler: a heap of ``(time_ms, seq, label, action)``.

``seq`` increases with every ``schedule`` call, so events at the same time run in the
order they were scheduled: the run is a pure function of the seed.  ``after_event`` is
called after every event (the invariant checks).
"""
from __future__ import annotations

import heapq
from typing import Callable

from .clock import SimClock

__all__ = ["Scheduler"]


class Scheduler:
    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self._heap: list[tuple[int, int, str, Callable[[], None]]] = []
        self._seq = 0
        self.events_run = 0
        self.after_event: Callable[[str], None] = lambda _label: None

    def schedule(self, delay_ms: int, label: str, action: Callable[[], None]) -> None:
        if delay_ms < 0:
            raise ValueError("cannot schedule in the past")
        self._seq += 1
        heapq.heappush(self._heap, (self.clock.now_ms + delay_ms, self._seq, label, action))

    def run_until(self, time_ms: int, stop: Callable[[], bool] | None = None) -> bool:
        """Run events up to ``time_ms`` (inclusive); True if ``stop()`` became true first."""
        while self._heap and self._heap[0][0] <= time_ms:
            at, _, label, action = heapq.heappop(self._heap)
            self.clock.advance_to(at)
            action()
            self.events_run += 1
            self.after_event(label)
            if stop is not None and stop():
                return True
        self.clock.advance_to(max(self.clock.now_ms, time_ms))
        return False
