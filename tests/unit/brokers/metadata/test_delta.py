"""MetadataDelta: Kafka's replay rules, structural sharing, local changes."""
from __future__ import annotations

import pyarrow as pa
import pytest

from brokers.metadata import records as r
from brokers.metadata.delta import MetadataDelta, ReplayError
from brokers.metadata.schema_codec import schema_to_bytes
from spark_log.config import TopicConfig

from .helpers import broker, build, topic


def test_partition_change_bumps_epochs() -> None:
    img = build([broker(1), broker(2), *topic("a", [(1, 2)])])
    isr_only = build([r.PartitionChangeRecord(topic="a", partition=0, isr=(1,))], img)
    info = isr_only.topics["a"].partitions[0]
    assert (info.isr, info.leader, info.leader_epoch, info.partition_epoch) == ((1,), 1, 0, 1)
    new_leader = build([r.PartitionChangeRecord(topic="a", partition=0, leader=2)], isr_only)
    info = new_leader.topics["a"].partitions[0]
    assert (info.leader, info.leader_epoch, info.partition_epoch) == (2, 1, 2)
    offline = build([r.PartitionChangeRecord(topic="a", partition=0, leader=r.NO_LEADER)], new_leader)
    info = offline.topics["a"].partitions[0]
    assert (info.leader, info.leader_epoch, info.partition_epoch) == (None, 2, 3)
    same_leader = build([r.PartitionChangeRecord(topic="a", partition=0, leader=None or r.NO_LEADER)], offline)
    assert same_leader.topics["a"].partitions[0].leader_epoch == 2


def test_untouched_parts_are_shared() -> None:
    img = build([broker(1), *topic("a", [(1,)]), *topic("b", [(1,)])])
    new = build([r.PartitionChangeRecord(topic="a", partition=0, leader=r.NO_LEADER)], img)
    assert new.topics["b"] is img.topics["b"]
    assert new.brokers is img.brokers
    assert new.topics["a"] is not img.topics["a"]


def test_fencing_is_per_registration() -> None:
    img = build([broker(1, epoch=2)])
    assert build([r.FenceBrokerRecord(broker_id=1, broker_epoch=1)], img).brokers[1].fenced is False
    fenced = build([r.FenceBrokerRecord(broker_id=1, broker_epoch=2)], img)
    assert fenced.brokers[1].fenced is True
    assert build([r.UnfenceBrokerRecord(broker_id=1, broker_epoch=2)], fenced).brokers[1].fenced is False


def test_configs_and_schemas() -> None:
    img = build([broker(1), *topic("a", [(1,)])])
    config = TopicConfig(retention_ms=10)
    schema = pa.schema([("x", pa.int32())])
    new = build(
        [r.ConfigRecord(topic="a", config=config), r.SchemaRecord(topic="a", schema_id=1, schema_bytes=schema_to_bytes(schema))],
        img,
    )
    assert new.topics["a"].config == config
    assert new.topics["a"].schema_id == 1 and new.topics["a"].schema_by_id(1) == schema
    with pytest.raises(ReplayError, match="not the next"):
        build([r.SchemaRecord(topic="a", schema_id=5, schema_bytes=schema_to_bytes(schema))], new)


@pytest.mark.parametrize(
    "record",
    [
        r.PartitionRecord(topic="nope", partition=0, replicas=(1,), isr=(1,), leader=1),
        r.PartitionChangeRecord(topic="a", partition=7, isr=(1,)),
        r.FenceBrokerRecord(broker_id=9, broker_epoch=1),
        r.RemoveTopicRecord(name="a", topic_id="wrong-id"),
        r.TopicRecord(name="a", topic_id="again"),
        r.ConfigRecord(topic="nope", config=TopicConfig()),
    ],
    ids=lambda rec: type(rec).__name__,
)
def test_contradicting_records_raise(record: r.MetadataRecord) -> None:
    img = build([broker(1), *topic("a", [(1,)])])
    with pytest.raises(ReplayError):
        MetadataDelta(img).replay(record)


def test_remove_and_recreate_in_one_delta() -> None:
    img = build([broker(1), broker(2), *topic("a", [(1,)])])
    delta = MetadataDelta(img)
    delta.replay(r.RemoveTopicRecord(name="a", topic_id="id-a"))
    for record in topic("a", [(2,)], topic_id="id-a2"):
        delta.replay(record)
    new = delta.apply()
    assert new.topics["a"].topic_id == "id-a2"
    assert set(delta.removed_topics()) == {"a"} and delta.changed_topics() == {"a"}
    changes = delta.local_changes(1, new)
    assert changes.removed == [("a", 0)] and not changes.leaders
    assert [(t, p) for t, p, _ in delta.local_changes(2, new).leaders] == [("a", 0)]


def test_local_changes() -> None:
    img = build([broker(1), broker(2), broker(3), *topic("a", [(1, 2), (2, 3)])])
    delta = MetadataDelta(img)
    delta.replay(r.PartitionChangeRecord(topic="a", partition=0, leader=2))
    delta.replay(r.PartitionChangeRecord(topic="a", partition=1, replicas=(2, 1), isr=(2, 1)))
    for record in topic("b", [(3,)]):
        delta.replay(record)
    new = delta.apply()
    one = delta.local_changes(1, new)
    assert [(t, p) for t, p, _ in one.followers] == [("a", 0), ("a", 1)] and not one.leaders and not one.removed
    two = delta.local_changes(2, new)
    assert [(t, p) for t, p, _ in two.leaders] == [("a", 0), ("a", 1)]
    three = delta.local_changes(3, new)
    assert three.removed == [("a", 1)] and [(t, p) for t, p, _ in three.leaders] == [("b", 0)]


def test_between_is_a_wholesale_delta() -> None:
    old = build([broker(1), *topic("a", [(1,)])])
    new = build([broker(1), *topic("b", [(1,)])])
    delta = MetadataDelta.between(old, new)
    assert delta.apply() is new
    assert set(delta.removed_topics()) == {"a"} and delta.changed_topics() == {"b"}
    with pytest.raises(ReplayError):
        delta.replay(r.NoOpRecord())
