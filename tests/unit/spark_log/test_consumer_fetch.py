"""The consumer's fetch answers, from a fake cluster (``tests/support/fake_fetch.py``):
what a poll returns when one partition of an answer fails."""
from __future__ import annotations

import time

import pytest

from spark_log.errors import ErrorCode, OffsetOutOfRangeError
from spark_log.proto import broker_pb2 as pb
from tests.support.fake_fetch import FakeCluster, fake_consumer, frame, response

T = "t"


def _one_good_one_failed(request: pb.FetchRequest) -> bytes:
    parts = []
    for p in request.partitions:
        if p.partition == 0:
            parts.append(pb.FetchPartitionResult(topic=T, partition=0, high_watermark=3, last_stable_offset=3,
                                                 records=frame(0, [b"a", b"b", b"c"]), next_fetch_offset=3))
        else:
            parts.append(pb.FetchPartitionResult(topic=T, partition=1, next_fetch_offset=p.fetch_offset,
                                                 error=pb.Error(code=ErrorCode.OFFSET_OUT_OF_RANGE, message="gone")))
    return response(*parts)


def test_a_partitions_error_never_costs_another_partitions_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """One answer: records 0..2 of p0, OFFSET_OUT_OF_RANGE for p1 (no reset policy).  The
    poll returns p0's records and the next poll raises p1's error (Kafka's fetcher does the
    same); p0's position never passes records the caller did not get."""
    from spark_log import _consumer
    from spark_log._tiering import TierDescription
    monkeypatch.setattr(_consumer, "describe_tier", lambda cluster, topics, timeout_s=0: TierDescription("", {}))
    consumer = fake_consumer(FakeCluster(T, 2, _one_good_one_failed), auto_offset_reset="none")
    consumer.assign([(T, 0), (T, 1)])
    consumer.seek(T, 0, 0)
    consumer.seek(T, 1, 100)
    assert [(r.partition, r.offset) for r in consumer.poll(1.0)] == [(0, 0), (0, 1), (0, 2)]
    with pytest.raises(OffsetOutOfRangeError):
        consumer.poll(1.0)
    assert consumer.position(T, 0) == 3 and consumer.position(T, 1) == 100


def _nothing_new(request: pb.FetchRequest) -> bytes:
    return response(*[pb.FetchPartitionResult(topic=T, partition=p.partition, high_watermark=0,
                                              next_fetch_offset=p.fetch_offset) for p in request.partitions])


def test_a_poll_returns_within_its_timeout_while_a_long_poll_is_out() -> None:
    """Each poll leaves a prefetch out that the broker may hold ``fetch_max_wait_ms`` (here
    never answered while nothing is new): the next poll still returns after its own
    timeout, with nothing, and the fetch stays out."""
    cluster = FakeCluster(T, 1, _nothing_new)
    held: list = []
    cluster.on_call = lambda call, request: (held.append(call) if request.max_wait_ms >= 1_000 else call.resolve())
    consumer = fake_consumer(cluster, fetch_max_wait_ms=60_000)
    consumer.assign([(T, 0)])
    consumer.seek(T, 0, 0)
    assert consumer.poll(0.05) == []  # answered; leaves a long poll (60 s) out
    started = time.monotonic()
    for _ in range(3):
        assert consumer.poll(0.05) == []
    assert time.monotonic() - started < 5.0 and len(held) == 1
    for call in held:
        call.resolve()


def _read_then_diverged(request: pb.FetchRequest) -> bytes:
    (wanted,) = request.partitions
    if wanted.last_fetched_epoch < 0:  # the first read: offsets 0-3 in leader epoch 5
        return response(pb.FetchPartitionResult(topic=T, partition=0, high_watermark=4, last_stable_offset=4,
                                                records=frame(0, [b"a", b"b", b"c", b"d"], epoch=5),
                                                next_fetch_offset=4))
    assert wanted.last_fetched_epoch == 5
    return response(pb.FetchPartitionResult(topic=T, partition=0, high_watermark=2, next_fetch_offset=4,
                                            diverging_epoch=pb.EpochEndOffset(epoch=4, end_offset=2)))


@pytest.mark.parametrize("reset", ["earliest", "none"])
def test_a_truncated_log_moves_the_position_back_or_is_an_error(reset: str) -> None:
    """KIP-320: the consumer sends the epoch of its last record; a leader whose log ends
    that epoch below the position answers where it diverges.  With a reset policy the
    position moves back there (what the new leader wrote since is read, not skipped);
    without one, OffsetOutOfRangeError."""
    consumer = fake_consumer(FakeCluster(T, 1, _read_then_diverged), auto_offset_reset=reset)
    consumer.assign([(T, 0)])
    consumer.seek(T, 0, 0)
    assert [r.offset for r in consumer.poll(1.0)] == [0, 1, 2, 3]
    if reset == "none":
        with pytest.raises(OffsetOutOfRangeError):
            consumer.poll(0.2)
        assert consumer.position(T, 0) == 4
    else:  # read again from 2 (this fake's leader answers the same records there)
        assert [r.offset for r in consumer.poll(1.0)] == [2, 3]
