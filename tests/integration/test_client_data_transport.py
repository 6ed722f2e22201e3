"""The Python clients' produce and fetch over the brokers' data listener (``PB_PRODUCE``,
``PB_FETCH``, ``CLIENT_ID``; ``spark_log/_data_transport.py``) against real brokers.

- With the default ``transport="auto"`` a plaintext producer and consumer send every
  Produce and Fetch over the data listeners (each call is a ``DataCall``; no gRPC Produce or
  Fetch reaches a broker) and every record arrives once, in order; ``transport="grpc"``
  opens no data connection and gets the same records.
- A broker running no data listener is reached over gRPC with ``"auto"``.
- The broker answers bad PB requests with a typed refusal: a follower's replica id on
  ``PB_FETCH``, a request that is not a protobuf message.
"""
from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer
from spark_log._data_transport import DataCall
from spark_log.errors import ErrorCode, InvalidConfigError
from spark_log.proto import broker_pb2 as pb
from tests.support.data_client import DataClient, DataError, describe
from tests.support.metrics import total

PB_PRODUCE, PB_FETCH = 15, 16


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int, transport: str) -> dict[int, list[bytes]]:
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    with Consumer(bootstrap, auto_offset_reset="earliest", transport=transport) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        for _ in range(200):
            for record in consumer.poll(0.5):
                got[record.partition].append(record.value)
            if sum(len(v) for v in got.values()) >= expected:
                break
        if transport == "auto":
            assert consumer._cluster._data is not None and consumer._cluster._data.connections_opened >= 1
            address = consumer._cluster.leader(topic, 0)[0]
            assert type(consumer._cluster.fetch_raw(address)).__name__ == "_DataRoute"
        else:
            assert consumer._cluster._data is None
    return got


@pytest.mark.parametrize("transport", ["auto", "grpc"])
def test_records_go_over_the_chosen_transport_once_and_in_order(cluster: LocalCluster, topic_name: str,
                                                                 transport: str) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic_name, partitions=3, replication_factor=3)
    grpc_calls = _grpc_produce_and_fetch_calls(cluster)
    sent: dict[int, list[bytes]] = {p: [] for p in range(3)}
    with Producer(cluster.bootstrap, transport=transport, client_id=f"dt-{transport}") as producer:
        futures = []
        for i in range(3000):
            value = b"%s-%05d" % (transport.encode(), i)
            sent[i % 3].append(value)
            futures.append(producer.send(topic_name, value, partition=i % 3))
        producer.flush()
        for future in futures:
            future.result(timeout=30)
        if transport == "auto":
            address = producer._cluster.leader(topic_name, 0)[0]
            call = producer._cluster.produce_raw(address).future(
                pb.ProduceRequest(acks=1, timeout_ms=1000).SerializeToString(), timeout=10)
            assert isinstance(call, DataCall) and call.result(timeout=10).partitions == []
    assert _read_all(cluster.bootstrap, topic_name, 3, 3000, transport) == sent
    if transport == "auto":  # nothing of this went over gRPC's Produce or Fetch
        assert _grpc_produce_and_fetch_calls(cluster) == grpc_calls


def _grpc_produce_and_fetch_calls(cluster: LocalCluster) -> float:
    """Produce and Fetch calls served over gRPC by every broker (their metrics; the followers
    fetch over the data listeners too, ``replica_fetch_transport = "auto"``)."""
    urls = [url for url in (cluster.metrics_url(node) for node in (1, 2, 3)) if url]
    assert len(urls) == 3
    return sum(total(urls, "spark_log_rpc_requests_total", method=f"Broker/{m}") for m in ("Produce", "Fetch"))


def test_a_broker_without_a_data_listener_is_reached_over_grpc(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", brokers=1, extra_config={"data_listener": "off"})
    cluster.up(timeout_s=60)
    try:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topic("t", partitions=1, replication_factor=1)
        with Producer(cluster.bootstrap) as producer:
            assert producer.send("t", b"over grpc").result(timeout=30) == (0, 0)
            assert producer._cluster._data is not None and producer._cluster._data.connections_opened == 0
        assert _read_all(cluster.bootstrap, "t", 1, 1, "grpc") == {0: [b"over grpc"]}
    finally:
        cluster.down()


def test_a_bad_transport_setting_is_refused(cluster: LocalCluster) -> None:
    with pytest.raises(InvalidConfigError, match="transport"):
        Producer(cluster.bootstrap, transport="tcp")
    with pytest.raises(InvalidConfigError, match="transport"):
        Consumer(cluster.bootstrap, transport="")


def test_bad_pb_requests_get_typed_refusals(cluster: LocalCluster, topic_name: str) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=1)
    info = describe(cluster.bootstrap.split(",")[0])
    follower = pb.FetchRequest(replica_id=2, partitions=[pb.FetchPartition(topic=topic_name, partition=0)])
    with DataClient(info.host, info.port) as client:
        for api, payload, text in ((PB_FETCH, follower.SerializeToString(), "REPLICA_FETCH"),
                                   (PB_FETCH, b"\xff\xff\xff", "malformed"),
                                   (PB_PRODUCE, struct.pack("<q", -1) * 3, "malformed")):
            with pytest.raises(DataError) as caught:
                client.call(api, payload)
            assert caught.value.code == ErrorCode.INVALID_REQUEST and text in str(caught.value), caught.value
        # the connection still serves: an empty produce answers an empty response
        answer = client.call(PB_PRODUCE, pb.ProduceRequest(acks=1, timeout_ms=1000).SerializeToString())
        assert pb.ProduceResponse.FromString(answer.data[answer.at:]).partitions == []
    rows = pa.table({"value": [b"v"]})
    with Producer(cluster.bootstrap) as producer:
        assert producer.send_batch(topic_name, rows, partition=0)[0].result(timeout=30) == (0, 0)
