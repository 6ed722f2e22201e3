"""Broker leases, kept in memory by the active controller only (as in KRaft).

A broker's lease runs ``session_timeout_ms`` from its last heartbeat (or registration).
Leases are not replicated: a newly active controller grants every registered broker a
fresh lease (``reset``), so a failover never fences a healthy broker.

Thread-safety: safe from any thread (one internal lock).
"""
from __future__ import annotations

import threading
from typing import Iterable

from spark_log.clock import Clock

__all__ = ["BrokerLeases"]


class BrokerLeases:
    def __init__(self, *, clock: Clock, session_timeout_ms: int) -> None:
        self._clock = clock
        self._timeout_ms = session_timeout_ms
        self._last_ms: dict[int, int] = {}
        self._lock = threading.Lock()

    def reset(self, broker_ids: Iterable[int]) -> None:
        """Forget every lease and start a fresh one for each of ``broker_ids``."""
        now = self._clock.monotonic_ms()
        fresh = {broker_id: now for broker_id in broker_ids}
        with self._lock:
            self._last_ms = fresh

    def renew(self, broker_id: int) -> None:
        now = self._clock.monotonic_ms()
        with self._lock:
            self._last_ms[broker_id] = now

    def expired(self, broker_ids: Iterable[int]) -> list[int]:
        """Those of ``broker_ids`` whose lease ran out (never heard of counts as fresh)."""
        now = self._clock.monotonic_ms()
        out = []
        with self._lock:
            for broker_id in broker_ids:
                last = self._last_ms.setdefault(broker_id, now)
                if now - last > self._timeout_ms:
                    out.append(broker_id)
        return sorted(out)

    def silent(self, broker_ids: Iterable[int], after_ms: int) -> list[int]:
        """Those of ``broker_ids`` not heard from for more than ``after_ms`` (a shorter
        threshold than the session timeout: candidates for a liveness probe)."""
        now = self._clock.monotonic_ms()
        with self._lock:
            return sorted(b for b in broker_ids if now - self._last_ms.setdefault(b, now) > after_ms)

    def forget(self, broker_id: int) -> None:
        with self._lock:
            self._last_ms.pop(broker_id, None)
