"""When ``send()``'s records go on the wire (issue 19), on a ``ManualClock`` that never lets
``linger_ms`` expire, against a fake cluster whose Produce calls stay open until the test
answers them:

- by default (``linger_ms=None``) a record whose leader has nothing of this producer's in
  flight goes at once, alone (latency: no lone record waits for a linger timer);
- an explicit ``linger_ms`` is Kafka's ``linger.ms``: a lone record waits for it (or for
  ``batch_size`` or ``flush``), and an answer does not ship what is lingering;
- records sent while a call is in flight wait, and go together, in one frame, when that
  call is answered (throughput: batching while the wire is busy);
- a batch that fills goes at once even while a call is in flight;
- futures resolve with consecutive offsets in send order, and callbacks run.

No broker, no sleeps; adds well under 1 s.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import pytest

from spark_log import _producer
from spark_log._client import TopicInfo
from spark_log.clock import ManualClock
from spark_log.frame import parse_header
from spark_log.proto import broker_pb2 as pb
from spark_log.schemas import BYTES_SCHEMA
from tests.support.wait import wait_until

LEADER = "127.0.0.1:1"


class _OpenCall:
    """A Produce call the test answers (``answer``) when it chooses."""

    def __init__(self, request: bytes) -> None:
        self.request = pb.ProduceRequest.FromString(request)
        self.response: pb.ProduceResponse | None = None
        self.callbacks: list[Callable[[Any], None]] = []

    @property
    def record_counts(self) -> list[int]:
        return [parse_header(entry.records).record_count for entry in self.request.partitions]

    def answer(self, base_offset: int) -> None:
        response = pb.ProduceResponse()
        for entry, count in zip(self.request.partitions, self.record_counts):
            response.partitions.add(topic=entry.topic, partition=entry.partition, base_offset=base_offset,
                                    last_offset=base_offset + count - 1)
            base_offset += count
        self.response = response
        for fn in self.callbacks:
            fn(self)

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        self.callbacks.append(fn)

    def result(self) -> pb.ProduceResponse:
        assert self.response is not None
        return self.response


class _FakeCluster:
    """One bytes topic ``t`` with one partition led by ``LEADER``; Produce calls stay open."""

    def __init__(self) -> None:
        self.calls: list[_OpenCall] = []
        self._lock = threading.Lock()

    def topic(self, name: str, *, refresh: bool = False, auto_create: bool = False) -> TopicInfo:
        return TopicInfo(name=name, kind="bytes", partitions={0: pb.PartitionMeta(partition=0, leader_id=1)},
                         schemas={0: BYTES_SCHEMA}, schema_id=0, key_columns=())

    def leader(self, topic: str, partition: int, *, refresh: bool = False) -> tuple[str, int]:
        return LEADER, 0

    def broker_address(self, broker_id: int) -> str | None:
        return LEADER if broker_id == 1 else None

    def produce_raw(self, address: str) -> "_FakeCluster":
        return self

    def future(self, request: bytes, timeout: float) -> _OpenCall:
        call = _OpenCall(request)
        with self._lock:
            self.calls.append(call)
        return call

    def forget(self, name: str) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture()
def rig(monkeypatch: pytest.MonkeyPatch) -> Any:
    cluster = _FakeCluster()
    clock = ManualClock()
    monkeypatch.setattr(_producer, "Cluster", lambda *args, **kwargs: cluster)
    made: list[_producer.Producer] = []

    def producer(**settings: Any) -> _producer.Producer:
        made.append(_producer.Producer(LEADER, clock=clock, **settings))
        return made[-1]

    yield cluster, producer
    for p in made:  # close ships what is left: answer every call until it is done
        closing = threading.Thread(target=p.close)
        closing.start()

        def closed() -> bool:
            for call in list(cluster.calls):
                if call.response is None:
                    call.answer(10_000)
            return not closing.is_alive()

        wait_until(closed, timeout=10, message="close did not finish")


def test_a_lone_record_goes_at_once_by_default(rig: Any) -> None:
    cluster, producer = rig
    p = producer()  # the default; the clock never moves, so no linger ever expires
    future = p.send("t", b"alone")
    assert len(cluster.calls) == 1 and cluster.calls[0].record_counts == [1]  # shipped inside send()
    cluster.calls[0].answer(41)
    assert future.result(timeout=5) == (0, 41)


def test_records_sent_while_a_call_is_in_flight_wait_and_go_together(rig: Any) -> None:
    cluster, producer = rig
    p = producer()
    seen: list[tuple[int, int]] = []
    first = p.send("t", b"first")
    waiting = [p.send("t", f"v{i}".encode()) for i in range(5)]
    waiting[2].add_done_callback(lambda f: seen.append(f.result()))
    assert len(cluster.calls) == 1 and not any(f.done() for f in waiting)  # nothing more on the wire
    cluster.calls[0].answer(100)  # its answer sends what waited: one call, one frame of 5
    wait_until(lambda: len(cluster.calls) == 2, timeout=10, message="the waiting records never left")
    assert cluster.calls[1].record_counts == [5]
    assert first.result(timeout=5) == (0, 100) and not any(f.done() for f in waiting)
    cluster.calls[1].answer(101)
    assert [f.result(timeout=5) for f in waiting] == [(0, 101 + i) for i in range(5)]
    assert seen == [(0, 103)]


def test_a_full_batch_goes_while_a_call_is_in_flight(rig: Any) -> None:
    cluster, producer = rig
    p = producer(batch_size=992)
    p.send("t", b"first")
    futures = [p.send("t", bytes(100)) for _ in range(8)]  # 100 + 24 bytes each: full at the 8th
    wait_until(lambda: len(cluster.calls) == 2, timeout=10, message="the full batch did not ship")
    assert cluster.calls[1].record_counts == [8]
    cluster.calls[1].answer(1)  # answered before the first call: offsets still follow the frame
    assert [f.result(timeout=5) for f in futures] == [(0, 1 + i) for i in range(8)]


def test_a_record_that_does_not_fit_goes_in_the_next_batch(rig: Any) -> None:
    """As Kafka's accumulator: a batch never takes a record past ``batch_size`` (a record
    larger than it goes alone), so a record too large for the topic fails alone."""
    cluster, producer = rig
    p = producer(batch_size=900)
    p.send("t", b"first")
    futures = [p.send("t", bytes(100)) for _ in range(7)]  # 868 bytes: the 8th would not fit
    futures.append(p.send("t", bytes(2000)))               # closes them, and goes alone
    wait_until(lambda: sum(len(call.record_counts) for call in cluster.calls) == 3, timeout=10,
               message="the batches did not ship")
    assert [n for call in cluster.calls[1:] for n in call.record_counts] == [7, 1]  # two frames
    for call in cluster.calls:
        call.answer(0 if call is cluster.calls[0] else 1)
    assert [f.result(timeout=5) for f in futures] == [(0, 1 + i) for i in range(8)]


def test_flush_ships_a_waiting_batch_and_waits_for_it(rig: Any) -> None:
    cluster, producer = rig
    p = producer()
    p.send("t", b"first")
    later = p.send("t", b"later")
    flushed = threading.Thread(target=p.flush, kwargs={"timeout": 10})
    flushed.start()
    wait_until(lambda: len(cluster.calls) == 2, timeout=10, message="flush did not ship the waiting batch")
    assert flushed.is_alive()  # nothing answered yet: flush waits
    cluster.calls[0].answer(0)
    cluster.calls[1].answer(1)
    flushed.join(timeout=10)
    assert not flushed.is_alive() and later.result(timeout=0) == (0, 1)


def test_an_explicit_linger_is_kafkas_linger(rig: Any) -> None:
    cluster, producer = rig
    p = producer(linger_ms=600_000)  # ten minutes, on a clock that never moves
    first = p.send("t", b"lone")
    assert cluster.calls == []  # an idle leader does not end an explicit linger
    flushed = threading.Thread(target=p.flush, kwargs={"timeout": 10})
    flushed.start()
    wait_until(lambda: len(cluster.calls) == 1, timeout=10, message="flush did not ship the lingering batch")
    cluster.calls[0].answer(7)
    flushed.join(timeout=10)
    assert not flushed.is_alive() and first.result(timeout=0) == (0, 7)
    later = p.send("t", b"later")  # the answer above left the leader idle: still it lingers
    assert len(cluster.calls) == 1 and not later.done()
