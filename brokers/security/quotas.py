"""Produce and fetch byte-rate quotas per user and client id (Kafka's client quota model).

Quotas live in the metadata image (``SecurityImage.quotas``: ``QuotaEntity(user,
client_id)`` -> {``producer_byte_rate``/``consumer_byte_rate``: bytes per second}).  For a
call by user ``U`` (the principal's name; ``ANONYMOUS`` when unauthenticated) with client
id ``C``, the quota is the first entity that defines the key, in Kafka's order:

    (U, C)  (U, <default>)  (U, -)  (<default>, C)  (<default>, <default>)  (<default>, -)
    (-, C)  (-, <default>)

and the bytes are counted in one bucket per matched entity with its defaults filled in by
the caller's names (so ``(<default>, -)`` gives every user a bucket of its own, and
``(U, -)`` one bucket for all of U's client ids).

Accounting is a token bucket per bucket and key: it refills at the quota's rate up to
``burst_ms`` worth of bytes and each call takes its bytes.  A call that leaves the bucket
in debt is throttled for the time the rate needs to pay the debt back, at most
``max_throttle_ms``; the broker delays that call's answer by it and reports it as
``throttle_time_ms``, so a client's average rate converges on the quota.  While a
bucket already has ``max_delayed`` answers being delayed, further calls of it are refused
at once with ``ThrottledError`` (retriable; nothing was done), so a client that ignores
throttling cannot hold every worker thread of the broker.

Time is the injected ``clock``.  Thread-safety: any thread (one lock).
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Mapping

from brokers.metadata.security_image import DEFAULT, QuotaEntity
from spark_log.clock import Clock

__all__ = ["QuotaManager", "Charge", "resolve"]


def resolve(quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str,
            client_id: str) -> tuple[QuotaEntity, float] | None:
    """``(bucket entity, bytes per second)`` of the quota that applies, or None."""
    if not quotas:
        return None
    order = (
        (QuotaEntity(user, client_id), QuotaEntity(user, client_id)),
        (QuotaEntity(user, DEFAULT), QuotaEntity(user, client_id)),
        (QuotaEntity(user, None), QuotaEntity(user, None)),
        (QuotaEntity(DEFAULT, client_id), QuotaEntity(user, client_id)),
        (QuotaEntity(DEFAULT, DEFAULT), QuotaEntity(user, client_id)),
        (QuotaEntity(DEFAULT, None), QuotaEntity(user, None)),
        (QuotaEntity(None, client_id), QuotaEntity(None, client_id)),
        (QuotaEntity(None, DEFAULT), QuotaEntity(None, client_id)),
    )
    for entity, bucket in order:
        values = quotas.get(entity)
        if values is not None and key in values:
            return bucket, values[key]
    return None


@dataclass(slots=True)
class _Bucket:
    rate: float
    tokens: float
    updated_ms: int
    delayed: int = 0


@dataclass(frozen=True, slots=True)
class Charge:
    """One call's accounting: delay its answer by ``throttle_ms`` (0: none), then ``done()``."""

    bucket: tuple[str, QuotaEntity] | None
    throttle_ms: int


class QuotaManager:
    def __init__(self, *, clock: Clock, burst_ms: int = 1000, max_throttle_ms: int = 10_000,
                 max_delayed: int = 4) -> None:
        self._clock = clock
        self.burst_ms = burst_ms
        self.max_throttle_ms = max_throttle_ms
        self.max_delayed = max_delayed
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, QuotaEntity], _Bucket] = {}
        # per quota key: answers delayed, their total delay in ms, calls refused (metrics)
        self.throttled: dict[str, list[int]] = {}

    def admit(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str) -> bool:
        """False when the caller's bucket already has ``max_delayed`` answers being delayed."""
        found = resolve(quotas, key, user, client_id)
        if found is None:
            return True
        with self._lock:
            bucket = self._buckets.get((key, found[0]))
            admitted = bucket is None or bucket.delayed < self.max_delayed
            if not admitted:
                self.throttled.setdefault(key, [0, 0, 0])[2] += 1
            return admitted

    def charge(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str,
               nbytes: int) -> Charge:
        """Count ``nbytes`` against the quota that applies; the throttle to apply."""
        found = resolve(quotas, key, user, client_id)
        if found is None:
            return Charge(None, 0)
        entity, rate = found
        now = self._clock.monotonic_ms()
        capacity = rate * self.burst_ms / 1000
        name = (key, entity)
        with self._lock:
            bucket = self._buckets.get(name)
            if bucket is None:
                bucket = self._buckets[name] = _Bucket(rate=rate, tokens=capacity, updated_ms=now)
            elapsed_ms = max(0, now - bucket.updated_ms)
            bucket.rate = rate
            bucket.tokens = min(capacity, bucket.tokens + rate * elapsed_ms / 1000) - nbytes
            bucket.updated_ms = now
            if bucket.tokens >= 0:
                return Charge(name, 0)
            throttle_ms = min(self.max_throttle_ms, math.ceil(-bucket.tokens / rate * 1000))
            bucket.delayed += 1
            stats = self.throttled.setdefault(key, [0, 0, 0])
            stats[0] += 1
            stats[1] += throttle_ms
            return Charge(name, throttle_ms)

    def stats(self) -> tuple[dict[str, tuple[int, int, int]], int]:
        """``({quota key: (answers delayed, ms of delay, calls refused)}, answers being delayed now)``."""
        with self._lock:
            return ({key: (v[0], v[1], v[2]) for key, v in self.throttled.items()},
                    sum(b.delayed for b in self._buckets.values()))

    def done(self, charge: Charge) -> None:
        """The delayed answer of ``charge`` went out."""
        if charge.bucket is None or charge.throttle_ms == 0:
            return
        with self._lock:
            bucket = self._buckets.get(charge.bucket)
            if bucket is not None and bucket.delayed > 0:
                bucket.delayed -= 1
