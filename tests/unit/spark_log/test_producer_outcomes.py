"""A failed send says whether any of its attempts may have written it (``maybe_written``).

The broker's answer tells: an error with the offsets of an append (the acks=all wait after
it: ``NOT_ENOUGH_REPLICAS_AFTER_APPEND``, or a leader change) means the records are in a
log and may yet become visible; a refusal before the append (``NOT_ENOUGH_REPLICAS``) means
they are in none.  The verdict covers every attempt: a send refused before the append on
its last attempt, after an attempt that appended, may still have been written.  Fault
tests record a send as a *definite* failure only when ``maybe_written`` is False.

The cluster is a fake (no broker) that answers each Produce call with the next scripted
answer, on a ``ManualClock``.  Adds about 1 s.
"""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from spark_log import _producer, errors
from spark_log._client import TopicInfo
from spark_log.clock import ManualClock
from spark_log.errors import ErrorCode
from spark_log.proto import broker_pb2 as pb
from spark_log.schemas import BYTES_SCHEMA
from tests.support.wait import wait_until

AFTER_APPEND = (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 7)
BEFORE_APPEND = (ErrorCode.NOT_ENOUGH_REPLICAS, -1)


class _Call:
    def __init__(self, response: pb.ProduceResponse) -> None:
        self.response = response

    def add_done_callback(self, fn: Any) -> None:
        fn(self)

    def result(self) -> pb.ProduceResponse:
        return self.response


class _Stub:
    def __init__(self, cluster: "_FakeCluster") -> None:
        self.cluster = cluster

    @property
    def Produce(self) -> "_Stub":  # noqa: N802 - the gRPC stub's method name
        return self

    def future(self, request: bytes, timeout: float) -> _Call:
        assert pb.ProduceRequest.FromString(request).partitions[0].records  # a whole serialised request
        code, base = self.cluster.answers.pop(0)
        self.cluster.calls += 1
        response = pb.ProduceResponse()
        response.partitions.add(topic="t", partition=0, base_offset=base, last_offset=base,
                                error=pb.Error(code=int(code), message=code.name))
        return _Call(response)


class _FakeCluster:
    def __init__(self, answers: list[tuple[ErrorCode, int]]) -> None:
        self.answers = list(answers)
        self.calls = 0

    def topic(self, name: str, *, refresh: bool = False, auto_create: bool = False) -> TopicInfo:
        return TopicInfo(name=name, kind="bytes", partitions={0: pb.PartitionMeta(partition=0, leader_id=1)},
                         schemas={0: BYTES_SCHEMA}, schema_id=0, key_columns=())

    def leader(self, topic: str, partition: int, *, refresh: bool = False) -> tuple[str, int]:
        return "127.0.0.1:1", 0

    def broker(self, address: str) -> _Stub:
        return _Stub(self)

    def produce_raw(self, address: str) -> _Stub:  # the producer sends serialised requests
        return _Stub(self)

    def forget(self, name: str) -> None:
        pass

    def close(self) -> None:
        pass


def _fail_after(monkeypatch: pytest.MonkeyPatch, answers: list[tuple[ErrorCode, int]]) -> errors.SparkLogError:
    """Send one record through ``answers``; the last one comes after the delivery timeout."""
    cluster = _FakeCluster(answers)
    clock = ManualClock()
    monkeypatch.setattr(_producer, "Cluster", lambda *args, **kwargs: cluster)
    producer = _producer.Producer("127.0.0.1:1", clock=clock, linger_ms=0, delivery_timeout_ms=60_000)
    try:
        future: Future[Any] = producer.send("t", b"v")
        for attempt in range(1, len(answers)):
            wait_until(lambda: cluster.calls >= attempt, timeout=10, message=f"attempt {attempt}")
            clock.advance(1_000 if attempt < len(answers) - 1 else 120_000)   # retry due; the last past the deadline
        wait_until(future.done, timeout=10, message="the send never failed")
        error = future.exception()
        assert isinstance(error, errors.SparkLogError)
        return error
    finally:
        clock.advance(10**10)
        producer.close(timeout=5)


def test_a_send_refused_before_every_append_is_a_definite_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    error = _fail_after(monkeypatch, [BEFORE_APPEND, BEFORE_APPEND, BEFORE_APPEND])
    assert isinstance(error, errors.NotEnoughReplicasError)
    assert error.maybe_written is False


def test_an_append_on_any_attempt_makes_the_failure_indefinite(monkeypatch: pytest.MonkeyPatch) -> None:
    error = _fail_after(monkeypatch, [AFTER_APPEND, BEFORE_APPEND, BEFORE_APPEND])
    assert isinstance(error, errors.NotEnoughReplicasError)        # the last answer's type ...
    assert error.maybe_written is True                               # ... but the first attempt appended


def test_an_error_with_the_offsets_of_an_append_is_indefinite(monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader change during the acks=all wait answers NOT_LEADER *after* appending."""
    error = _fail_after(monkeypatch, [BEFORE_APPEND, (ErrorCode.NOT_LEADER, 3), BEFORE_APPEND])
    assert error.maybe_written is True
    assert _fail_after(monkeypatch, [(ErrorCode.NOT_LEADER, -1), BEFORE_APPEND]).maybe_written is False


class _HeldCall:
    """A Produce call the test answers when it wants."""

    def __init__(self, request: pb.ProduceRequest) -> None:
        self.request = request
        self.callbacks: list[Any] = []
        self.response: pb.ProduceResponse | None = None

    def add_done_callback(self, fn: Any) -> None:
        self.callbacks.append(fn)

    def result(self) -> pb.ProduceResponse:
        assert self.response is not None
        return self.response

    def answer(self, base_offset: int, code: ErrorCode = ErrorCode.NONE) -> None:
        self.response = pb.ProduceResponse()
        self.response.partitions.add(topic="t", partition=0, base_offset=base_offset, last_offset=base_offset,
                                     error=pb.Error(code=int(code), message=code.name))
        for fn in self.callbacks:
            fn(self)


class _HoldingCluster(_FakeCluster):
    def __init__(self) -> None:
        super().__init__([])
        self.held: list[_HeldCall] = []

    def broker(self, address: str) -> Any:
        cluster = self

        class Stub:
            class Produce:  # noqa: N801 - the gRPC stub's method name
                @staticmethod
                def future(request: bytes, timeout: float) -> _HeldCall:
                    call = _HeldCall(pb.ProduceRequest.FromString(request))
                    cluster.held.append(call)
                    return call
        return Stub()

    def produce_raw(self, address: str) -> Any:  # the producer sends serialised requests
        return self.broker(address).Produce


def _frame_pid(call: _HeldCall) -> int:
    from spark_log.frame import parse_header
    return parse_header(call.request.partitions[0].records).producer_id


def test_a_new_producer_id_waits_for_the_old_ids_sends_so_acks_stay_in_send_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the data-plane simulation: send 0 fails for good (it may have been written),
    so the producer takes a new id; send 1, under the old id, is still on its way and is
    appended after all (send 0 left no hole).  Had send 2 gone out under the new id at
    once, it could have been acknowledged at a lower offset than send 1."""
    cluster = _HoldingCluster()
    clock = ManualClock()
    monkeypatch.setattr(_producer, "Cluster", lambda *args, **kwargs: cluster)
    producer = _producer.Producer("127.0.0.1:1", clock=clock, linger_ms=0, delivery_timeout_ms=60_000)
    try:
        first = producer.send("t", b"v0")
        wait_until(lambda: len(cluster.held) == 1, timeout=10, message="send 0 in flight")
        second = producer.send("t", b"v1")
        wait_until(lambda: len(cluster.held) == 2, timeout=10, message="send 1 in flight")
        old_pid = _frame_pid(cluster.held[0])
        clock.advance(120_000)                                      # past send 0's delivery deadline
        cluster.held[0].answer(0, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        assert isinstance(first.exception(timeout=10), errors.NotEnoughReplicasAfterAppendError)
        assert producer.producer_id != old_pid
        third = producer.send("t", b"v2")
        with pytest.raises(TimeoutError):
            third.result(timeout=0.3)
        assert len(cluster.held) == 2, "the new id's send went out while the old id's send 1 was unsettled"
        cluster.held[1].answer(1)                                   # send 1 (old id) appended after all
        assert second.result(timeout=10) == (0, 1)
        wait_until(lambda: len(cluster.held) == 3, timeout=10, message="the held send goes once send 1 settled")
        assert _frame_pid(cluster.held[2]) == producer.producer_id
        cluster.held[2].answer(2)
        assert third.result(timeout=10) == (0, 2)
    finally:
        clock.advance(10**10)                   # every send past its deadline: the next failure is final

        def drained() -> bool:
            for call in list(cluster.held):
                if call.response is None:
                    call.answer(-1, ErrorCode.BROKER_NOT_AVAILABLE)
            return producer._pending == 0 and not producer._closing
        wait_until(drained, timeout=10, message="the producer settles every send")
        producer.close(timeout=5)
