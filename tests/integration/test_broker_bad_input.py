"""Every kind of bad input gets its typed error and leaves the log intact."""
from __future__ import annotations

import random
import struct

import grpc
import pyarrow as pa
import pytest

from spark_log import Admin, Consumer, Producer, errors
from spark_log._client import CHANNEL_OPTIONS
from spark_log._records import BYTES_SCHEMA, bytes_batch
from spark_log.frame import encode_batch
from spark_log.proto import broker_pb2 as pb
from spark_log.proto import broker_pb2_grpc as rpc

pytestmark = pytest.mark.integration


@pytest.fixture()
def seeded(bootstrap: str, topic_name: str):
    """A 1-partition bytes topic holding 10 records; yields (topic, leader stub, schema id)."""
    with Admin(bootstrap) as admin:
        description = admin.create_topic(topic_name, partitions=1, config={"max.message.bytes": 4096})
    with Producer(bootstrap) as producer:
        for i in range(10):
            producer.send(topic_name, f"keep-{i}".encode())
        producer.flush()
    leader = description.partitions[0].leader
    with Admin(bootstrap) as admin:
        admin.describe_topic(topic_name)
    from spark_log._client import Cluster

    cluster = Cluster(bootstrap)
    address, _ = cluster.leader(topic_name, 0, refresh=True)
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    try:
        yield topic_name, rpc.BrokerStub(channel), description.schema_id, leader, cluster
    finally:
        channel.close()
        cluster.close()


def _frame(schema_id: int, n: int = 3, size: int = 10) -> bytes:
    batch = bytes_batch([None] * n, [b"v" * size] * n, [None] * n, [1_700_000_000_000] * n, BYTES_SCHEMA)
    return encode_batch(batch, schema_id=schema_id, compression="none")


def _produce(stub: rpc.BrokerStub, topic: str, records: bytes, partition: int = 0) -> pb.PartitionProduceResult:
    response = stub.Produce(pb.ProduceRequest(acks=-1, timeout_ms=5000, partitions=[
        pb.PartitionRecords(topic=topic, partition=partition, records=records, current_leader_epoch=-1)]), timeout=30)
    return response.partitions[0]


def _assert_intact(bootstrap: str, topic: str) -> None:
    with Admin(bootstrap) as admin:
        assert admin.list_offsets(topic, "latest") == {0: 10}
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0)])
        values = []
        for _ in range(20):
            values += [r.value for r in consumer.poll(0.5)]
            if len(values) >= 10:
                break
    assert values == [f"keep-{i}".encode() for i in range(10)]


def _code(result: pb.PartitionProduceResult) -> errors.ErrorCode:
    return errors.ErrorCode(result.error.code)


def test_garbage_bytes_are_corrupt(seeded, bootstrap: str) -> None:
    topic, stub, schema_id, _, _ = seeded
    for garbage in (b"not a frame at all", b"\x00" * 200, _frame(schema_id)[:50]):
        assert _code(_produce(stub, topic, garbage)) == errors.ErrorCode.CORRUPT_RECORD
    assert _code(_produce(stub, topic, b"")) == errors.ErrorCode.CORRUPT_RECORD
    _assert_intact(bootstrap, topic)


def test_crc_mismatch_and_bad_arrow_body(seeded, bootstrap: str) -> None:
    topic, stub, schema_id, _, _ = seeded
    good = bytearray(_frame(schema_id))
    flipped = bytearray(good)
    flipped[-3] ^= 0xFF
    result = _produce(stub, topic, bytes(good) + bytes(flipped))  # one good frame, one bad: nothing appended
    assert _code(result) == errors.ErrorCode.CORRUPT_RECORD and "CRC" in result.error.message
    # a frame whose CRC is right but whose body is not an Arrow batch
    import crc32c

    body = bytearray(good)
    body[64:] = b"\x01" * (len(body) - 64)
    struct.pack_into("<I", body, 20, crc32c.crc32c(bytes(body[24:])))
    assert _code(_produce(stub, topic, bytes(body))) == errors.ErrorCode.CORRUPT_RECORD
    _assert_intact(bootstrap, topic)


def test_oversized_frame(seeded, bootstrap: str) -> None:
    topic, stub, schema_id, _, _ = seeded
    result = _produce(stub, topic, _frame(schema_id, n=10, size=1000))
    assert _code(result) == errors.ErrorCode.RECORD_TOO_LARGE
    with Producer(bootstrap) as producer:
        future = producer.send(topic, random.Random(7).randbytes(10_000))  # incompressible
        with pytest.raises(errors.RecordTooLargeError):
            future.result(timeout=30)
    _assert_intact(bootstrap, topic)


def test_schema_mismatch(seeded, bootstrap: str) -> None:
    topic, stub, schema_id, _, _ = seeded
    assert _code(_produce(stub, topic, _frame(schema_id + 17))) == errors.ErrorCode.SCHEMA_MISMATCH
    # a typed frame sent under the bytes topic's schema id does not decode as that schema
    other = pa.record_batch({"a": pa.array([1, 2, 3], pa.int64())})
    assert _code(_produce(stub, topic, encode_batch(other, schema_id=schema_id, compression="none"))) in (
        errors.ErrorCode.CORRUPT_RECORD, errors.ErrorCode.SCHEMA_MISMATCH)
    with Producer(bootstrap) as producer:
        with pytest.raises(errors.SchemaMismatchError):
            producer.send_batch(topic, pa.table({"value": [b"x"], "extra": [1]}))
        with pytest.raises(errors.SchemaMismatchError):
            producer.send(topic, 12345)  # type: ignore[arg-type]
    _assert_intact(bootstrap, topic)


def test_typed_schema_mismatch_is_refused_by_the_client(bootstrap: str, topic_name: str) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, schema=schema)
    with Producer(bootstrap) as producer:
        with pytest.raises(errors.SchemaMismatchError):
            producer.send_batch(topic_name, pa.table({"id": pa.array([1], pa.int32()), "name": ["a"]}))
        with pytest.raises(errors.SchemaMismatchError):
            producer.send_batch(topic_name, pa.table({"id": pa.array([None], pa.int64()), "name": ["a"]}))
        with pytest.raises(errors.SchemaMismatchError):
            producer.send(topic_name, {"id": "not a number", "name": "a"})
        with pytest.raises(errors.SchemaMismatchError):
            producer.send(topic_name, b"raw bytes")
    with Admin(bootstrap) as admin:
        assert admin.list_offsets(topic_name, "latest") == {0: 0}
        with pytest.raises(errors.SchemaMismatchError):
            admin.register_schema(topic_name, pa.schema([pa.field("id", pa.string())]))


def test_unknown_topic_and_partition(seeded, bootstrap: str) -> None:
    topic, stub, schema_id, _, _ = seeded
    assert _code(_produce(stub, "no-such-topic-xyz", _frame(schema_id))) == errors.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _code(_produce(stub, topic, _frame(schema_id), partition=7)) == errors.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with Producer(bootstrap) as producer:
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            producer.send("no-such-topic-xyz", b"x")
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            producer.send(topic, b"x", partition=5)
    with Consumer(bootstrap) as consumer:
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            consumer.assign([(topic, 3)])
    with Admin(bootstrap) as admin:
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            admin.describe_topic("no-such-topic-xyz")
    _assert_intact(bootstrap, topic)


def test_not_leader_names_the_leader(seeded, bootstrap: str, cluster) -> None:
    topic, _, schema_id, leader, _ = seeded
    other = next(n for n in cluster.nodes if n.node_id != leader)
    leader_port = next(n.port for n in cluster.nodes if n.node_id == leader)
    channel = grpc.insecure_channel(f"127.0.0.1:{other.port}", options=CHANNEL_OPTIONS)
    try:
        result = _produce(rpc.BrokerStub(channel), topic, _frame(schema_id))
    finally:
        channel.close()
    assert _code(result) == errors.ErrorCode.NOT_LEADER
    assert result.error.leader_address == f"127.0.0.1:{leader_port}"
    _assert_intact(bootstrap, topic)


def test_invalid_configs_and_requests(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        with pytest.raises(errors.InvalidConfigError):
            admin.create_topic(topic_name, config={"retention.ms": "soon"})
        with pytest.raises(errors.InvalidConfigError):
            admin.create_topic(topic_name, config={"no.such.setting": "1"})
        with pytest.raises(errors.InvalidPartitionsError):
            admin.create_topic(topic_name, partitions=0)
        with pytest.raises(errors.InvalidReplicationFactorError):
            admin.create_topic(topic_name, replication_factor=9)
        with pytest.raises(errors.InvalidTopicError):
            admin.create_topic("bad/name")
        assert topic_name not in admin.list_topics()
        admin.create_topic(topic_name)
        with pytest.raises(errors.TopicAlreadyExistsError):
            admin.create_topic(topic_name)
        with pytest.raises(errors.InvalidConfigError):
            admin.alter_configs(topic_name, {"segment.bytes": "1"})
        assert admin.describe_topic(topic_name).config["segment.bytes"] == str(128 * 1024 * 1024)
        with pytest.raises(errors.InvalidRequestError):
            admin.list_offsets(topic_name, "yesterday")
    with pytest.raises(errors.InvalidConfigError):
        Producer(bootstrap, acks="most")
    with pytest.raises(errors.InvalidRequestError):
        Producer(bootstrap, compression="snappy")
    with pytest.raises(errors.InvalidConfigError):
        Consumer(bootstrap, isolation_level="dirty")
