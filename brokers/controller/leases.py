"""Broker leases, kept in memory by the active controller only (as in KRaft).

A broker's lease runs ``session_timeout_ms`` from its last heartbeat (or registration).
Leases are not replicated: a newly active controller grants every registered broker a
fresh lease (``reset``), so a failover never fences a healthy broker.

Thread-safety: none; the controller calls it under its request lock.
"""
from __future__ import annotations

from typing import Iterable

from spark_log.clock import Clock

__all__ = ["BrokerLeases"]


class BrokerLeases:
    def __init__(self, *, clock: Clock, session_timeout_ms: int) -> None:
        self._clock = clock
        self._timeout_ms = session_timeout_ms
        self._last_ms: dict[int, int] = {}

    def reset(self, broker_ids: Iterable[int]) -> None:
        """Forget every lease and start a fresh one for each of ``broker_ids``."""
        now = self._clock.monotonic_ms()
        self._last_ms = {broker_id: now for broker_id in broker_ids}

    def renew(self, broker_id: int) -> None:
        self._last_ms[broker_id] = self._clock.monotonic_ms()

    def expired(self, broker_ids: Iterable[int]) -> list[int]:
        """Those of ``broker_ids`` whose lease ran out (never heard of counts as fresh)."""
        now = self._clock.monotonic_ms()
        out = []
        for broker_id in broker_ids:
            last = self._last_ms.setdefault(broker_id, now)
            if now - last > self._timeout_ms:
                out.append(broker_id)
        return sorted(out)

    def forget(self, broker_id: int) -> None:
        self._last_ms.pop(broker_id, None)
