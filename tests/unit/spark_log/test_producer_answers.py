"""How the producer reacts to a broker's answers and to failures on the way to the wire
(unit, ``tests/support/fake_produce.py``: no broker)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from spark_log import errors
from spark_log.errors import ErrorCode
from tests.support.fake_produce import FakeCluster, answer_all, bytes_topic, fake_producer, ok
from tests.support.wait import wait_until


def test_duplicate_sequence_is_an_acknowledgement_with_an_unknown_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker answers DUPLICATE_SEQUENCE to a replay of a frame it appended long ago (its
    offsets evicted from the producer state): the records are in the log, so the send
    succeeds with offset -1, as in Kafka's Sender, and the producer keeps its id."""
    cluster = FakeCluster({"t": bytes_topic()}, auto=answer_all(ErrorCode.DUPLICATE_SEQUENCE))
    p = fake_producer(monkeypatch, cluster, linger_ms=0)
    pid = p.producer_id
    try:
        assert p.send("t", b"v").result(timeout=10) == (0, -1)
        assert [f.result(timeout=10) for f in p.send_batch("t", _table(3), partition=0)] == [(0, -1)]
        p.flush(10)
        assert p.producer_id == pid
        assert p.metrics()["records_failed"] == 0
    finally:
        p.close(5)


def _table(n: int) -> pa.Table:
    return pa.table({"value": pa.array([b"x"] * n, pa.binary())})


def test_a_retriable_metadata_error_on_the_way_to_the_wire_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch closed while its topic's metadata was cached, shipped after the cache was
    dropped (every NOT_LEADER drops it) with the refresh failing with a retriable error: the
    batch is shipped again after a backoff (until its delivery deadline), in order with the
    partition's later batches; a non-retriable error fails it at once."""
    cluster = FakeCluster({"t": bytes_topic()}, auto=ok)
    fails = {"left": 2}

    def flaky(name: str) -> None:
        if fails["left"]:
            fails["left"] -= 1
            raise errors.BrokerNotAvailableError("metadata refresh: no broker answered")

    p = fake_producer(monkeypatch, cluster, linger_ms=0, delivery_timeout_ms=60_000)
    try:
        cluster.topic_hook = flaky  # send() reads the cache; the way to the wire asks topic()
        futures = [p.send("t", f"v{i}".encode()) for i in range(3)]
        assert [f.exception(timeout=10) for f in futures] == [None, None, None]
        p.flush(10)
        assert fails["left"] == 0
        sequences = [header.base_sequence for _, _, header in cluster.frames()]
        assert sequences == sorted(sequences), f"the partition's frames went out of sequence order: {sequences}"
        assert p.metrics()["retries"] >= 1

        def refused(name: str) -> None:
            raise errors.TopicAuthorizationError("not allowed")

        cluster.topic_hook = refused
        assert isinstance(p.send("t", b"w").exception(timeout=10), errors.TopicAuthorizationError)
    finally:
        cluster.topic_hook = None
        p.close(5)


def test_a_retriable_metadata_error_fails_the_batch_at_its_delivery_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster({"t": bytes_topic()}, auto=ok)

    def down(name: str) -> None:
        raise errors.BrokerNotAvailableError("metadata refresh: no broker answered")

    p = fake_producer(monkeypatch, cluster, linger_ms=0, delivery_timeout_ms=300)
    try:
        cluster.topic_hook = down
        assert isinstance(p.send("t", b"v").exception(timeout=10), errors.BrokerNotAvailableError)
        p.flush(5)
        assert cluster.frames() == []
    finally:
        cluster.topic_hook = None
        p.close(5)


def test_close_with_a_timeout_fails_what_is_unfinished_and_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    """As Kafka's ``close(Duration)``: when the timeout passes, every unfinished send fails
    (``RequestTimeoutError``; ``maybe_written`` True for one that went to a broker, False for
    one that never did) and ``close`` returns without raising; the sender thread ends."""
    cluster = FakeCluster({"t": bytes_topic(), "u": bytes_topic("u")}, auto=None)  # never answers
    p = fake_producer(monkeypatch, cluster, linger_ms=0, delivery_timeout_ms=60_000)
    sent = p.send("t", b"on the wire")
    wait_until(lambda: cluster.unanswered(), timeout=10, message="the send never went out")

    def down(name: str) -> None:
        if name == "u":
            raise errors.BrokerNotAvailableError("metadata refresh: no broker answered")

    cluster.topic_hook = down
    parked = p.send("u", b"never encoded")  # put back again and again: its metadata cannot be read
    wait_until(lambda: p.metrics()["retries"] >= 1, timeout=10, message="the batch was never put back")
    p.close(timeout=0.3)
    failed = sent.exception(timeout=0)
    assert isinstance(failed, errors.RequestTimeoutError) and failed.maybe_written
    never = parked.exception(timeout=0)
    assert isinstance(never, errors.RequestTimeoutError) and not never.maybe_written
    wait_until(lambda: not p._sender.is_alive(), timeout=10, message="the sender thread did not end")
    assert p._pending == 0
    assert p.metrics()["records_failed"] == 2


def test_after_a_close_that_timed_out_nothing_is_retried_and_late_answers_count_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Sends retrying (NOT_LEADER) when ``close``'s timeout passes fail instead of being
    retried; the cancellation of the calls still in flight (closing a gRPC channel) and
    answers coming after it change nothing."""
    cluster = FakeCluster({"t": bytes_topic()}, auto=answer_all(ErrorCode.NOT_LEADER), cancel_on_close=True)
    p = fake_producer(monkeypatch, cluster, linger_ms=0, delivery_timeout_ms=60_000)
    retrying = p.send("t", b"retried")
    wait_until(lambda: p.metrics()["retries"] >= 2, timeout=10, message="never retried")
    cluster.auto = None  # the next attempt stays in flight, cancelled by close
    p.close(timeout=0.3)
    assert isinstance(retrying.exception(timeout=0), errors.RequestTimeoutError)
    calls = len(cluster.calls())
    for call in cluster.calls():
        call.answer(ok)  # too late: settled already
    assert len(cluster.calls()) == calls, "a send was retried after close"
    assert retrying.exception(timeout=0) is not None
    assert p.metrics()["records_failed"] == 1 and p.metrics()["records_sent"] == 0
    assert p._pending == 0
