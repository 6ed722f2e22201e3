"""The cleaner threads: the I/O rate limit, which log goes first, and what a failure costs."""
from __future__ import annotations

import threading
from typing import Callable

import pytest

from brokers.log.cleaner.pool import CleanerPool
from brokers.log.cleaner.records import KeySpec
from brokers.log.cleaner.throttle import Throttler
from spark_log.clock import ManualClock
from spark_log.errors import StorageError
from spark_log.schemas import BYTES_SCHEMA

SPEC = KeySpec("bytes", (), "", lambda schema_id: BYTES_SCHEMA)


def test_the_throttle_waits_for_the_rate_on_the_injected_clock() -> None:
    clock = ManualClock(monotonic_ms=0)
    waits: list[float] = []
    throttle = Throttler(1000, clock=clock, wait=lambda s: bool(waits.append(s)))  # type: ignore[func-returns-value]  # records the wait, never stops
    throttle.acquire(500)  # 500 bytes at 1000 B/s: half a second of budget, none elapsed
    clock.advance(500)
    throttle.acquire(1500)  # 2000 bytes in the window: 2 s of budget at t=0.5 s
    assert waits == [0.5, 1.5]
    clock.advance(3_000)  # a new window
    throttle.acquire(100)
    assert waits == [0.5, 1.5, 0.1] and throttle.throttled_ms == 2100
    unlimited = Throttler(0, clock=clock, wait=lambda s: pytest.fail("no limit, no wait"))
    unlimited.acquire(10**9)


class FakeLog:
    def __init__(self, name: str, priorities: list[float | None], fail: bool = False) -> None:
        self.topic, self.partition = name, 0
        self.priorities = priorities
        self.fail = fail
        self.cleaned = 0

    def compaction_priority(self) -> float | None:
        return self.priorities[0] if self.priorities else None

    def clean(self, spec: KeySpec, *, throttle: Throttler, budget_bytes: int, stop: Callable[[], bool]) -> str | None:
        if self.fail:
            raise StorageError("disk says no")
        self.cleaned += 1
        self.priorities.pop(0)
        return f"cleaned {self.topic} with a budget of {budget_bytes}"


def test_the_most_urgent_log_goes_first_and_a_failing_one_waits_a_backoff() -> None:
    clock = ManualClock(monotonic_ms=0)
    dirty, dirtier, broken = FakeLog("dirty", [0.6]), FakeLog("dirtier", [0.9, 0.6]), FakeLog("broken", [5.0], True)
    pool = CleanerPool(logs=lambda: [dirty, dirtier, broken], spec_for=lambda topic: SPEC, clock=clock, threads=2,
                       dedupe_buffer_bytes=8 << 20, backoff_ms=1_000)
    assert pool.run_once() is None  # broken first: it fails, and is skipped for a backoff
    assert pool.run_once() == "cleaned dirtier with a budget of 4194304"  # the buffer split over 2 threads
    assert [pool.run_once(), pool.run_once()] == ["cleaned dirty with a budget of 4194304",
                                                  "cleaned dirtier with a budget of 4194304"]
    assert pool.run_once() is None and broken.cleaned == 0
    broken.fail = False
    clock.advance(1_000)
    assert pool.run_once() == "cleaned broken with a budget of 4194304"


def test_threads_wake_on_demand_and_stop() -> None:
    log = FakeLog("t", [])
    done = threading.Event()
    pool = CleanerPool(logs=lambda: [log], spec_for=lambda topic: SPEC, clock=ManualClock(), backoff_ms=3_600_000)
    original = log.clean

    def clean(spec: KeySpec, **kwargs: object) -> str | None:
        outcome = original(spec, **kwargs)  # type: ignore[arg-type]
        done.set()
        return outcome

    log.clean = clean  # type: ignore[method-assign]
    pool.start()
    try:
        log.priorities.append(1.0)
        pool.wake()  # without it the thread would sleep for an hour
        assert done.wait(10), "a woken cleaner thread did not pick the log up"
    finally:
        pool.stop(timeout_s=10)
    assert log.cleaned == 1
