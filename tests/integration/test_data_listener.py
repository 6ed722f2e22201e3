"""The broker's binary data listener (brokers/server/data_listener.py) against a real cluster:
discovery over gRPC, metadata naming every broker's listener, list offsets, fetch returning
the stored frames unchanged, produce with the idempotent producer fields, and errors."""
from __future__ import annotations

import pyarrow as pa
import pytest

from brokers.launcher.local import LocalCluster
from brokers.server.data_listener import check_config
from spark_log import Admin, Producer
from spark_log.config import BrokerConfig, SecurityConfig
from spark_log.errors import ErrorCode
from spark_log.frame import decode_batch, encode_batch, iter_frames
from spark_log.schemas import BYTES_SCHEMA
from tests.support.data_client import DataClient, DataError, describe


def _listener(cluster: LocalCluster, broker_id: int) -> tuple[str, int]:
    address = next(a for i, a in enumerate(cluster.bootstrap.split(","), start=1) if i == broker_id)
    info = describe(address)
    assert info.port > 0 and info.broker_id == broker_id, info
    port_file = cluster.node_dir(broker_id) / "data.port"
    assert int(port_file.read_text()) == info.port
    return info.host, info.port


def _leader_client(cluster: LocalCluster, topic: str, partition: int = 0) -> DataClient:
    host, port = _listener(cluster, 1)
    with DataClient(host, port) as any_broker:
        brokers, topics = any_broker.metadata([topic])
    leader = topics[topic].partitions[partition].leader
    _address, host, port = brokers[leader]
    return DataClient(host, port)


def test_metadata_names_every_brokers_listener(cluster: LocalCluster, topic_name: str) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic_name, partitions=2, replication_factor=3)
    host, port = _listener(cluster, 2)
    with DataClient(host, port) as client:
        brokers, topics = client.metadata([topic_name, "no-such-topic"])
        assert sorted(brokers) == [1, 2, 3]
        for broker_id, (_address, data_host, data_port) in brokers.items():
            assert (data_host, data_port) == _listener(cluster, broker_id)
        topic = topics[topic_name]
        assert topic.code == 0 and topic.kind == "bytes" and len(topic.partitions) == 2
        assert pa.ipc.read_schema(pa.py_buffer(topic.schemas[0])).equals(BYTES_SCHEMA)
        assert sorted(topic.partitions[0].replicas) == [1, 2, 3]
        assert topics["no-such-topic"].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        _, everything = client.metadata(None)
        assert topic_name in everything


def test_fetch_returns_stored_frames_and_offsets(cluster: LocalCluster, topic_name: str) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=3)
    rows = pa.table({"key": [b"k%d" % i for i in range(1000)], "value": [b"v%d" % i for i in range(1000)]})
    with Producer(cluster.bootstrap, compression="lz4") as producer:
        for future in producer.send_batch(topic_name, rows, partition=0):
            future.result(timeout=30)
    with _leader_client(cluster, topic_name) as client:
        offsets = client.list_offsets(-1, [(topic_name, 0)])
        assert offsets[(topic_name, 0)] == (0, 1000)
        assert client.list_offsets(-2, [(topic_name, 0)])[(topic_name, 0)] == (0, 0)
        seen: list[bytes] = []
        position = 0
        while position < 1000:
            code, message, hw, next_offset, frames = client.fetch(topic_name, 0, position, max_bytes=4096)
            assert code == 0, message
            assert hw == 1000 and next_offset > position
            for at, header in iter_frames(frames):  # CRCs verify: the stored bytes, unchanged
                batch = decode_batch(memoryview(frames)[at: at + header.frame_length], BYTES_SCHEMA)
                seen.extend(batch.column("value").to_pylist())
            position = next_offset
        assert seen == [b"v%d" % i for i in range(1000)]
        code, _message, _hw, _next, frames = client.fetch(topic_name, 0, 5000)
        assert code == ErrorCode.OFFSET_OUT_OF_RANGE and frames == b""


def test_produce_is_idempotent_and_checked(cluster: LocalCluster, topic_name: str) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=3)
    batch = pa.record_batch({"key": pa.array([b"a", b"b"]), "value": pa.array([b"1", b"2"]),
                             "headers": pa.nulls(2, BYTES_SCHEMA.field("headers").type),
                             "timestamp": pa.array([1, 2], pa.timestamp("ms"))}, schema=BYTES_SCHEMA)
    frame = encode_batch(batch, producer_id=4242, producer_epoch=3, base_sequence=0)
    with _leader_client(cluster, topic_name) as client:
        assert client.produce(topic_name, 0, frame) == (0, "", 0, 1, False)
        code, _m, base, last, duplicate = client.produce(topic_name, 0, frame)  # a task's re-run
        assert (code, base, last, duplicate) == (0, 0, 1, True)
        code, message, *_ = client.produce(topic_name, 0, frame[:-3])
        assert code == ErrorCode.CORRUPT_RECORD, message
        assert client.list_offsets(-1, [(topic_name, 0)])[(topic_name, 0)] == (0, 2)
        with pytest.raises(DataError) as refused:
            client.call(99, b"")
        assert refused.value.code == ErrorCode.INVALID_REQUEST
        # the connection survives a refused request
        assert client.list_offsets(-1, [(topic_name, 0)])[(topic_name, 0)] == (0, 2)


def test_not_leader_is_reported_per_partition(cluster: LocalCluster, topic_name: str) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=1)
    host, port = _listener(cluster, 1)
    with DataClient(host, port) as client:
        brokers, topics = client.metadata([topic_name])
    leader = topics[topic_name].partitions[0].leader
    other = next(b for b in brokers if b != leader)
    _address, host, port = brokers[other]
    with DataClient(host, port) as client:
        code, _message, *_ = client.fetch(topic_name, 0, 0)
        assert code in (ErrorCode.NOT_LEADER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def test_the_listener_runs_under_every_security_protocol() -> None:
    """TLS and SASL_SSL nodes run the listener too (served with the node's security);
    ``data_listener = off`` never starts it."""
    plain = BrokerConfig(broker_id=1)
    assert check_config("auto", plain) is None
    assert check_config("off", plain) is not None
    for protocol in ("SSL", "SASL_SSL"):
        secure = BrokerConfig(broker_id=1, security=SecurityConfig(security_protocol=protocol, ssl_certfile="c.pem",
                                                                  ssl_keyfile="k.pem", ssl_cafile="ca.pem",
                                                                  ssl_client_auth="required"))
        assert check_config("auto", secure) is None
        assert check_config("on", secure) is None


def test_read_committed_fetch_lists_the_aborted_transactions(cluster: LocalCluster, topic_name: str) -> None:
    """The JVM reader drops an aborted transaction's frames by the list the listener sends."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=3)
    with Producer(cluster.bootstrap, transactional_id=f"dl-{topic_name}") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic_name, b"aborted", partition=0)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic_name, b"committed", partition=0)
        producer.commit_transaction()
        pid = producer.producer_id
    with _leader_client(cluster, topic_name) as client:
        code, message, _hw, _next, frames = client.fetch(topic_name, 0, 0, committed=True)
        assert code == 0, message
        assert client.last_aborted == [(pid, 0, 1)]  # the record at 0, its abort marker at 1
        client.fetch(topic_name, 0, 0)
        assert client.last_aborted == []  # read_uncommitted: nothing listed
