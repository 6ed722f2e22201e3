"""The Consumer's own bookkeeping and argument checks, over a fake cluster
(``tests/support/fake_fetch.py``): no brokers."""
from __future__ import annotations

import threading
from typing import Any

import pytest

from spark_log import Consumer
from spark_log.errors import InvalidConfigError, InvalidRequestError
from spark_log.proto import broker_pb2 as pb
from tests.support.fake_fetch import FakeCall, FakeCluster, fake_consumer, response

T = "t"


def _nothing_new(request: pb.FetchRequest) -> bytes:
    return response(*[pb.FetchPartitionResult(topic=T, partition=p.partition, high_watermark=0,
                                              next_fetch_offset=p.fetch_offset) for p in request.partitions])


def test_a_fetch_forgotten_by_assign_never_makes_a_poll_wait_for_the_next_one() -> None:
    """``assign`` forgets the fetches in flight; the completion of such a fetch, arriving
    later, must not be taken for the newer fetch of the same (broker, topic), whose
    ``result()`` would block the poll until that long poll ends.  Here the long polls end
    only when the test says so, so a poll that waits for one never returns by itself."""
    cluster = FakeCluster(T, 1, _nothing_new)
    held: list[FakeCall] = []

    def on_call(call: FakeCall, request: pb.FetchRequest) -> None:
        if request.max_wait_ms < 1_000:
            call.resolve()
            return
        held.append(call)   # a long poll: answered when the test resolves it

    cluster.on_call = on_call
    consumer = fake_consumer(cluster, fetch_max_wait_ms=60_000)
    polled: list[list[Any]] = []
    try:
        consumer.assign([(T, 0)])
        consumer.seek(T, 0, 0)
        assert consumer.poll(0.05) == [] and len(held) == 1   # leaves a long poll out
        consumer.assign([(T, 0)])                              # forgets it
        assert consumer.poll(0.05) == [] and len(held) == 2   # a new long poll is out
        held[0].resolve()                                      # the forgotten one completes
        polls = threading.Thread(target=lambda: polled.extend(consumer.poll(0.05) for _ in range(3)), daemon=True)
        polls.start()
        polls.join(timeout=30)
        assert not polls.is_alive(), "a poll waited for the long poll in flight"
        assert polled == [[], [], []]
    finally:
        for call in held:
            call.resolve()
        consumer.close()


@pytest.mark.parametrize("setting", [
    dict(fetch_max_wait_ms=-1), dict(fetch_min_bytes=-1), dict(fetch_max_bytes=0), dict(max_partition_fetch_bytes=-1),
    dict(request_timeout_ms=0), dict(fetch_max_wait_ms=1.5), dict(fetch_max_bytes=True),
    dict(group_id="g", group_remote_assignor="bogus"), dict(group_id="g", enable_auto_commit="no"),
    dict(group_id="g", enable_auto_commit=1),
])
def test_nonsense_settings_are_refused(setting: dict[str, Any]) -> None:
    """The constructor documents ``InvalidConfigError`` for invalid values, before connecting."""
    with pytest.raises(InvalidConfigError) as refused:
        Consumer("127.0.0.1:1", **setting).close()
    assert refused.value.details.get("key") in setting


@pytest.mark.parametrize("setting", [
    dict(fetch_max_wait_ms=0, fetch_min_bytes=0), dict(group_id="g", group_remote_assignor="range"),
    dict(group_id="g", group_remote_assignor="uniform", enable_auto_commit=False),
])
def test_edge_settings_are_accepted(setting: dict[str, Any]) -> None:
    Consumer("127.0.0.1:1", **setting).close()


@pytest.mark.parametrize("call", ["list_offsets", "list_offsets_for_topics"])
def test_admin_list_offsets_refuses_an_unknown_isolation_level(call: str) -> None:
    """A typo ("read-committed") is refused before any request, never read as read_uncommitted."""
    from spark_log import Admin

    with Admin("127.0.0.1:1") as admin:
        method = getattr(admin, call)
        with pytest.raises(InvalidConfigError) as refused:
            method("t" if call == "list_offsets" else ["t"], "latest", isolation_level="read-committed")
    assert refused.value.details.get("key") == "isolation_level"


_AFTER_CLOSE: list[tuple[str, tuple[Any, ...]]] = [
    ("assign", ([(T, 0)],)), ("assignment", ()), ("subscribe", ([T],)), ("pause", ([(T, 0)],)),
    ("resume", ([(T, 0)],)), ("paused", ()), ("seek", (T, 0, 1)), ("seek_to_beginning", ()), ("seek_to_end", ()),
    ("position", (T, 0)), ("poll", (0.01,)), ("poll_arrow", (0.01,)), ("commit", ()), ("commit_async", ()),
    ("committed", ()), ("group_metadata", ()),
]


@pytest.mark.parametrize("group_id", [None, "g"])
@pytest.mark.parametrize("name,args", _AFTER_CLOSE, ids=[name for name, _ in _AFTER_CLOSE])
def test_a_closed_consumer_refuses_every_call(name: str, args: tuple[Any, ...], group_id: str | None) -> None:
    """As Kafka's IllegalStateException after close(); close() twice is fine, and the
    metrics stay readable."""
    consumer = fake_consumer(FakeCluster(T, 1, _nothing_new), group_id=group_id, enable_auto_commit=False)
    consumer.assign([(T, 0)])
    consumer.seek(T, 0, 0)
    consumer.close()
    consumer.close()
    with pytest.raises(InvalidRequestError, match="consumer is closed"):
        getattr(consumer, name)(*args)
    assert "polls" in consumer.metrics()


@pytest.mark.parametrize("offset", ["3", 2.5, True, None])
def test_seek_refuses_an_offset_that_is_not_an_int(offset: object) -> None:
    """Never a bare TypeError, never a float or bool taken as an offset (``end`` is checked so too)."""
    consumer = fake_consumer(FakeCluster(T, 1, _nothing_new))
    try:
        consumer.assign([(T, 0)])
        with pytest.raises(InvalidRequestError):
            consumer.seek(T, 0, offset)  # type: ignore[arg-type]
        consumer.seek(T, 0, 2)
        assert consumer.position(T, 0) == 2
    finally:
        consumer.close()


def test_resume_refuses_a_partition_that_is_not_assigned() -> None:
    """As ``pause`` (and Kafka's IllegalStateException): never silently ignored."""
    consumer = fake_consumer(FakeCluster(T, 2, _nothing_new))
    try:
        consumer.assign([(T, 0)])
        consumer.pause([(T, 0)])
        with pytest.raises(InvalidRequestError, match="not assigned"):
            consumer.resume([(T, 0), (T, 1)])
        assert consumer.paused() == [(T, 0)]   # nothing resumed
        consumer.resume([(T, 0)])
        assert consumer.paused() == []
    finally:
        consumer.close()
