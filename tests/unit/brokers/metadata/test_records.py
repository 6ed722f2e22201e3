"""Metadata records: every type round-trips through its JSON encoding; junk is refused."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokers.metadata import records as r
from brokers.metadata.schema_codec import schema_to_bytes
from spark_log.config import TopicConfig
from spark_log.errors import CorruptRecordError

SAMPLES = [
    r.RegisterBrokerRecord(broker_id=1, incarnation="abc", broker_epoch=3, address="127.0.0.1:9092", rack="r1"),
    r.FenceBrokerRecord(broker_id=1, broker_epoch=3),
    r.UnfenceBrokerRecord(broker_id=1, broker_epoch=3),
    r.TopicRecord(name="t", topic_id="x", kind="typed", key_columns=("k",), config=TopicConfig(retention_ms=5)),
    r.PartitionRecord(topic="t", partition=2, replicas=(1, 2, 3), isr=(1, 2), leader=None, leader_epoch=4),
    r.PartitionChangeRecord(topic="t", partition=2, leader=r.NO_LEADER, isr=(2,)),
    r.PartitionChangeRecord(topic="t", partition=2, replicas=(3, 2, 1)),
    r.RemoveTopicRecord(name="t", topic_id="x"),
    r.ConfigRecord(topic="t", config=TopicConfig(cleanup_policy="compact", unclean_leader_election_enable=True)),
    r.SchemaRecord(topic="t", schema_id=1, schema_bytes=schema_to_bytes(pa.schema([("a", pa.int64())]))),
    r.NoOpRecord(controller_id=2),
]


@pytest.mark.parametrize("record", SAMPLES, ids=lambda rec: type(rec).__name__)
def test_round_trip(record: r.MetadataRecord) -> None:
    data = r.encode(record)
    assert b"\n" not in data
    assert json.loads(data)["type"]
    assert r.decode(data) == record


@given(
    replicas=st.lists(st.integers(0, 1000), min_size=1, max_size=5, unique=True),
    leader=st.none() | st.integers(0, 1000),
    epochs=st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1)),
    name=st.text(min_size=1, max_size=30),
)
def test_partition_records_round_trip(replicas: list[int], leader: int | None, epochs: tuple[int, int], name: str) -> None:
    record = r.PartitionRecord(
        topic=name, partition=0, replicas=tuple(replicas), isr=tuple(replicas[:1]), leader=leader,
        leader_epoch=epochs[0], partition_epoch=epochs[1],
    )
    assert r.decode(r.encode(record)) == record


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[1,2]",
        b'{"type":"nope","v":1}',
        b'{"type":"fence_broker","v":2,"broker_id":1,"broker_epoch":1}',
        b'{"type":"fence_broker","v":1,"broker_id":"1","broker_epoch":1}',
        b'{"type":"fence_broker","v":1,"broker_id":1}',
        b'{"type":"fence_broker","v":1,"broker_id":1,"broker_epoch":1,"extra":0}',
        b'{"type":"config","v":1,"topic":"t","config":{"retention.ms":"-5"}}',
        b'{"type":"schema","v":1,"topic":"t","schema_id":0,"schema_bytes":"***"}',
    ],
)
def test_decode_refuses_junk(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        r.decode(data)


def test_encode_refuses_non_records() -> None:
    with pytest.raises(TypeError):
        r.encode("hello")  # type: ignore[arg-type]
