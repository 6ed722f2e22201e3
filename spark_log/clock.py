"""Time, injected: every component that needs the time takes a ``Clock``."""
from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "SystemClock", "ManualClock"]


class Clock(Protocol):
    def monotonic_ms(self) -> int:
        """Milliseconds from an arbitrary origin; never goes backwards."""

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch (record timestamps, retention by time)."""


class SystemClock:
    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to (tests and simulations). Thread-safe."""

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic_ms: int = 0) -> None:
        self._lock = threading.Lock()
        self._wall = wall_ms
        self._mono = monotonic_ms

    def monotonic_ms(self) -> int:
        with self._lock:
            return self._mono

    def wall_ms(self) -> int:
        with self._lock:
            return self._wall

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._mono += ms
            self._wall += ms
