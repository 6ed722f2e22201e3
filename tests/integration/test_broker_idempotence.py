"""Idempotent producers: duplicates acknowledged with their original offsets, never appended
twice; gaps and older epochs refused; the Spark writer's replay pattern."""
from __future__ import annotations

import grpc
import pyarrow as pa
import pytest

from spark_log import Admin, Consumer, Producer, errors
from spark_log._client import CHANNEL_OPTIONS, Cluster
from spark_log._records import BYTES_SCHEMA, bytes_batch
from spark_log.frame import encode_batch
from spark_log.proto import broker_pb2 as pb
from spark_log.proto import broker_pb2_grpc as rpc

pytestmark = pytest.mark.integration

PID = 4242


def _frame(seq: int, n: int, *, epoch: int = 0, tag: str = "r") -> bytes:
    batch = bytes_batch([None] * n, [f"{tag}{seq + i}".encode() for i in range(n)], [None] * n,
                        [1_700_000_000_000] * n, BYTES_SCHEMA)
    return encode_batch(batch, schema_id=0, compression="none", producer_id=PID, producer_epoch=epoch,
                        base_sequence=seq)


@pytest.fixture()
def leader(bootstrap: str, topic_name: str):
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
    cluster = Cluster(bootstrap)
    address, _ = cluster.leader(topic_name, 0, refresh=True)
    cluster.close()
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    try:
        yield topic_name, rpc.BrokerStub(channel)
    finally:
        channel.close()


def _send(stub: rpc.BrokerStub, topic: str, frame: bytes, timeout_ms: int = 10_000) -> pb.PartitionProduceResult:
    request = pb.ProduceRequest(acks=-1, timeout_ms=timeout_ms, partitions=[
        pb.PartitionRecords(topic=topic, partition=0, records=frame, current_leader_epoch=-1)])
    return stub.Produce(request, timeout=30).partitions[0]


def _end(bootstrap: str, topic: str) -> int:
    with Admin(bootstrap) as admin:
        return admin.list_offsets(topic, "latest")[0]


def test_duplicate_is_acknowledged_with_original_offsets(leader, bootstrap: str) -> None:
    topic, stub = leader
    first = _send(stub, topic, _frame(0, 5))
    second = _send(stub, topic, _frame(5, 5))
    assert (first.error.code, first.base_offset, second.base_offset) == (0, 0, 5)
    again = _send(stub, topic, _frame(5, 5))
    assert again.error.code == 0 and again.duplicate and (again.base_offset, again.last_offset) == (5, 9)
    # a replay cut differently (records 2..6) is a duplicate too, with the offset of record 2
    recut = _send(stub, topic, _frame(2, 5))
    assert recut.duplicate and recut.base_offset == 2
    assert _end(bootstrap, topic) == 10


def test_gap_straddle_and_fenced_epoch(leader, bootstrap: str) -> None:
    topic, stub = leader
    assert _send(stub, topic, _frame(0, 3)).error.code == 0
    gap = _send(stub, topic, _frame(10, 3), timeout_ms=300)  # waits for 3..9, which never come
    assert errors.ErrorCode(gap.error.code) == errors.ErrorCode.OUT_OF_ORDER_SEQUENCE
    straddle = _send(stub, topic, _frame(1, 5))
    assert errors.ErrorCode(straddle.error.code) == errors.ErrorCode.OUT_OF_ORDER_SEQUENCE
    assert _send(stub, topic, _frame(0, 2, epoch=1)).error.code == 0  # a new epoch starts at 0
    old = _send(stub, topic, _frame(3, 1, epoch=0))
    assert errors.ErrorCode(old.error.code) == errors.ErrorCode.FENCED_EPOCH
    assert _end(bootstrap, topic) == 5


def test_out_of_order_calls_are_appended_in_sequence_order(leader, bootstrap: str) -> None:
    topic, stub = leader
    later = stub.Produce.future(pb.ProduceRequest(acks=-1, timeout_ms=10_000, partitions=[
        pb.PartitionRecords(topic=topic, partition=0, records=_frame(4, 4), current_leader_epoch=-1)]), timeout=30)
    earlier = _send(stub, topic, _frame(0, 4))
    result = later.result().partitions[0]
    assert (earlier.base_offset, result.base_offset) == (0, 4)
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0)])
        values: list[bytes] = []
        for _ in range(20):
            values += [r.value for r in consumer.poll(0.5)]
            if len(values) >= 8:
                break
    assert values == [f"r{i}".encode() for i in range(8)]


def test_spark_writer_replay_appends_nothing_twice(bootstrap: str, topic_name: str) -> None:
    """Producer id per (query, Spark partition), epoch = micro-batch id: a replayed batch
    with the same data is acknowledged at the same offsets; an older batch id is fenced."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=3)
    table = pa.table({"key": [f"k{i % 17}".encode() for i in range(5000)],
                      "value": [f"v{i}".encode() * 10 for i in range(5000)]})

    def write(epoch: int) -> list[tuple[int, int]]:
        with Producer(bootstrap, producer_id=987654321, producer_epoch=epoch) as producer:
            return sorted(f.result(timeout=30) for f in producer.send_batch(topic_name, table))

    first = write(7)
    with Admin(bootstrap) as admin:
        ends = admin.list_offsets(topic_name, "latest")
    assert sum(ends.values()) == 5000
    assert write(7) == first  # the replay: same offsets, nothing appended
    with Admin(bootstrap) as admin:
        assert admin.list_offsets(topic_name, "latest") == ends
    write(8)  # the next micro-batch
    with Admin(bootstrap) as admin:
        assert sum(admin.list_offsets(topic_name, "latest").values()) == 10_000
    with Producer(bootstrap, producer_id=987654321, producer_epoch=7) as stale:
        futures = stale.send_batch(topic_name, table)
        with pytest.raises(errors.FencedEpochError):
            for future in futures:
                future.result(timeout=30)
    with Admin(bootstrap) as admin:
        assert sum(admin.list_offsets(topic_name, "latest").values()) == 10_000
