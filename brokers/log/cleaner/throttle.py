"""``Throttler``: the cleaner's I/O rate limit, shared by every cleaner thread of a broker
(Kafka's ``log.cleaner.io.max.bytes.per.second``).

``acquire(n)`` accounts ``n`` bytes read or written and, when the threads together went
faster than ``bytes_per_second`` over the current window, waits until they are back under
it.  Time comes from the injected ``Clock`` (``monotonic_ms``) and waiting from the
injected ``wait(seconds) -> bool`` (an ``Event.wait``: a stop request ends the wait early,
and ``acquire`` then returns at once).  ``bytes_per_second`` 0 means no limit.

Thread-safety: every method may be called from any thread.
"""
from __future__ import annotations

import threading
from typing import Callable

from spark_log.clock import Clock

__all__ = ["Throttler"]

_WINDOW_MS = 1000


class Throttler:
    """Bytes per second over all callers (module docstring)."""

    def __init__(self, bytes_per_second: int, *, clock: Clock, wait: Callable[[float], bool]) -> None:
        self.bytes_per_second = bytes_per_second
        self._clock = clock
        self._wait = wait
        self._lock = threading.Lock()
        self._window_start = clock.monotonic_ms()
        self._bytes = 0
        self.throttled_ms = 0  # total time callers waited (for tests and logs)

    def acquire(self, nbytes: int) -> None:
        """Account ``nbytes``; wait while the rate is above the limit."""
        if self.bytes_per_second <= 0 or nbytes <= 0:
            return
        with self._lock:
            now = self._clock.monotonic_ms()
            if now - self._window_start >= _WINDOW_MS:
                self._window_start, self._bytes = now, 0
            self._bytes += nbytes
            allowed_ms = self._bytes * 1000 // self.bytes_per_second
            delay_ms = self._window_start + allowed_ms - now
        if delay_ms > 0:
            self.throttled_ms += delay_ms
            self._wait(delay_ms / 1000)
