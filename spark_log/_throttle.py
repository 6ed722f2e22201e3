"""How a client respects the brokers' quota throttling (``throttle_time_ms``).

A broker delays a throttled answer by the throttle time and reports it (KIP-13's model);
what the client must not do is keep many more requests queued behind it.  ``ThrottleGate``
keeps, per broker address, the throttle the last answer reported: while it is non-zero,
``acquire`` lets at most one request be in flight to that broker (the others wait in the
client), so the broker holds at most one delayed answer per throttled client and the
client's rate follows the quota; an answer without throttle lifts it.  It also counts
throttled answers and their total throttle time (``throttled``, ``throttle_time_ms``).

Thread-safety: any thread (one condition).
"""
from __future__ import annotations

import threading
import time

__all__ = ["ThrottleGate"]


class ThrottleGate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._throttled: dict[str, int] = {}
        self._in_flight: dict[str, int] = {}
        self.throttled = 0  # answers that reported a throttle
        self.throttle_time_ms = 0  # their total throttle time

    def is_throttled(self, address: str) -> bool:
        with self._cond:
            return address in self._throttled

    def acquire(self, address: str, timeout_s: float | None = None) -> None:
        """Count a request to ``address`` in flight, first waiting (up to ``timeout_s``)
        while that broker throttles us and a request to it is already in flight."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while address in self._throttled and self._in_flight.get(address, 0) >= 1:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._cond.wait(remaining)
            self._in_flight[address] = self._in_flight.get(address, 0) + 1

    def release(self, address: str, throttle_time_ms: int | None) -> None:
        """A request to ``address`` ended; ``throttle_time_ms`` from its answer (None: no answer)."""
        with self._cond:
            left = self._in_flight.get(address, 1) - 1
            if left > 0:
                self._in_flight[address] = left
            else:
                self._in_flight.pop(address, None)
            if throttle_time_ms is not None:
                self._note(address, throttle_time_ms)
            self._cond.notify_all()

    def note(self, address: str, throttle_time_ms: int) -> None:
        """An answer from ``address`` reported ``throttle_time_ms`` (callers that do not gate)."""
        with self._cond:
            self._note(address, throttle_time_ms)
            self._cond.notify_all()

    def _note(self, address: str, throttle_time_ms: int) -> None:
        if throttle_time_ms > 0:
            self._throttled[address] = throttle_time_ms
            self.throttled += 1
            self.throttle_time_ms += throttle_time_ms
        else:
            self._throttled.pop(address, None)
