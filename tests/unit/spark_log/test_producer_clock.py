"""The Producer measures linger and delivery deadlines on the clock it is given (not on
``time.monotonic``): with a ``ManualClock`` nothing expires until the clock moves, and
moving it expires at once what real time alone would take long to.

The cluster is a fake (no broker): metadata for one bytes partition, and a leader lookup
that answers with an error, so every shipment ends in ``_failed`` without a network.
Adds under 1 s.
"""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from spark_log import _producer, errors
from spark_log._client import TopicInfo
from spark_log.clock import ManualClock
from spark_log.proto import broker_pb2 as pb
from spark_log.schemas import BYTES_SCHEMA
from tests.support.wait import wait_until


class _FakeCluster:
    """One bytes topic ``t`` with one partition; ``leader`` raises ``error`` and counts calls."""

    def __init__(self, error: errors.SparkLogError) -> None:
        self.error = error
        self.leader_calls = 0

    def topic(self, name: str, *, refresh: bool = False, auto_create: bool = False) -> TopicInfo:
        return TopicInfo(name=name, kind="bytes", partitions={0: pb.PartitionMeta(partition=0, leader_id=1)},
                         schemas={0: BYTES_SCHEMA}, schema_id=0, key_columns=())

    def leader(self, topic: str, partition: int, *, refresh: bool = False) -> tuple[str, int]:
        self.leader_calls += 1
        raise self.error

    def forget(self, name: str) -> None:
        pass

    def close(self) -> None:
        pass


def _producer_with(monkeypatch: pytest.MonkeyPatch, cluster: _FakeCluster, clock: ManualClock,
                   **settings: Any) -> _producer.Producer:
    monkeypatch.setattr(_producer, "Cluster", lambda *args, **kwargs: cluster)
    return _producer.Producer("127.0.0.1:1", clock=clock, **settings)


def _failure(future: Future[Any]) -> BaseException | None:
    return future.exception(timeout=0) if future.done() else None


def test_linger_expires_on_the_injected_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    cluster = _FakeCluster(errors.InvalidRequestError("fake cluster: refused"))
    producer = _producer_with(monkeypatch, cluster, clock, linger_ms=600_000)  # 10 minutes of linger
    try:
        future = producer.send("t", b"v")
        assert not future.done() and cluster.leader_calls == 0
        clock.advance(600_000)  # the batch is due now; real time has hardly moved
        wait_until(lambda: future.done(), timeout=10, message="the lingering batch did not ship when the clock moved")
        assert isinstance(_failure(future), errors.InvalidRequestError)
        assert cluster.leader_calls == 1
    finally:
        clock.advance(10**10)  # whatever is left expires (close's flush measures on this clock too)
        producer.close(timeout=5)


def test_delivery_timeout_runs_on_the_injected_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    cluster = _FakeCluster(errors.BrokerNotAvailableError("fake cluster: down"))  # retriable
    producer = _producer_with(monkeypatch, cluster, clock, linger_ms=0, delivery_timeout_ms=3_600_000)
    try:
        future = producer.send("t", b"v")
        wait_until(lambda: cluster.leader_calls >= 1, timeout=10, message="the batch was never issued")
        # frozen clock: the backoff never ends, so the shipment waits for its retry and stays pending
        calls = cluster.leader_calls
        assert not future.done() and calls == 1
        clock.advance(60_000)  # retries come due (backoff <= 200 ms), within the hour of delivery time
        wait_until(lambda: cluster.leader_calls > calls, timeout=10, message="no retry after the clock moved")
        assert not future.done()
        clock.advance(3_600_000)  # past the delivery timeout: the next failure is final
        wait_until(lambda: future.done(), timeout=10, message="delivery timeout did not expire with the clock")
        assert isinstance(_failure(future), errors.BrokerNotAvailableError)
    finally:
        clock.advance(10**10)  # whatever is left expires (close's flush measures on this clock too)
        producer.close(timeout=5)
