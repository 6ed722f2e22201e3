"""MetadataImage helpers and immutability."""
from __future__ import annotations

import dataclasses

import pytest

from brokers.metadata.delta import MetadataDelta
from brokers.metadata.image import EMPTY, MetadataImage, frozen_map, merged_map
from brokers.metadata.records import PartitionChangeRecord

from .helpers import broker, build, topic


def image() -> MetadataImage:
    return build([broker(1), broker(2, fenced=True), broker(3, rack="r9"), *topic("a", [(1, 2), (2, 3), (3, 1)]), *topic("b", [(3,)])])


def test_empty() -> None:
    assert MetadataImage.EMPTY is EMPTY
    assert not EMPTY.brokers and not EMPTY.topics and EMPTY.offset == -1


def test_broker_helpers() -> None:
    img = image()
    assert [b.broker_id for b in img.live_brokers()] == [1, 3]
    assert img.broker_address(2) == "127.0.0.1:9002"
    assert img.broker_address(7) is None and img.broker_address(None) is None
    assert img.brokers[3].placement_domain == "r9"
    assert img.brokers[1].placement_domain == "127.0.0.1"


def test_partition_helpers() -> None:
    img = image()
    assert [(t, p) for t, p, _ in img.partitions_led_by(3)] == [("a", 2), ("b", 0)]
    assert [(t, p) for t, p, _ in img.replicas_of(1)] == [("a", 0), ("a", 2)]
    assert img.leader_address("a", 1) == "127.0.0.1:9002"
    assert img.partition("a", 9) is None and img.partition("zz", 0) is None
    assert img.topic_by_id("id-b") is img.topics["b"]
    replicas, leaders = img.replica_counts()
    assert replicas == {1: 2, 2: 2, 3: 3} and leaders == {1: 1, 2: 1, 3: 2}
    assert img.topics["a"].schema_id == 0 and img.topics["a"].schema is not None


def test_image_is_immutable() -> None:
    img = image()
    with pytest.raises(dataclasses.FrozenInstanceError):
        img.offset = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        img.topics["c"] = img.topics["a"]  # type: ignore[index]
    with pytest.raises(TypeError):
        img.topics["a"].partitions[5] = img.topics["a"].partitions[0]  # type: ignore[index]


def test_merged_map_keeps_keys_in_order_and_leaves_the_base_alone() -> None:
    base = frozen_map({1: "a", 3: "c", 5: "e"})
    changed = merged_map(base, {3: "C", 7: "g", 9: "i"})  # a change in place, new keys past the end
    assert list(changed.items()) == [(1, "a"), (3, "C"), (5, "e"), (7, "g"), (9, "i")]
    unordered = merged_map(base, {4: "d", 0: "z"}, removed=[5])  # new keys among the old: sorted
    assert list(unordered.items()) == [(0, "z"), (1, "a"), (3, "c"), (4, "d")]
    assert list(merged_map(base, {9: "i", 8: "h"}).items()) == [(1, "a"), (3, "c"), (5, "e"), (8, "h"), (9, "i")]
    assert list(merged_map({}, {"b": 2, "a": 1}).items()) == [("a", 1), ("b", 2)]
    assert dict(base) == {1: "a", 3: "c", 5: "e"}
    with pytest.raises(TypeError):
        changed[1] = "x"  # type: ignore[index]


def test_replaying_partition_changes_does_not_sort_the_topic_each_time() -> None:
    """Each committed entry is one delta on the last image; a change to one partition of a
    large topic copies its map without sorting it (was quadratic in partitions on replay)."""
    import brokers.metadata.delta as delta_module
    import brokers.metadata.image as image_module

    partitions = 3_000
    sorts = 0
    real_sorted = sorted

    def counting_sorted(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal sorts
        sorts += 1
        return real_sorted(*args, **kwargs)

    modules = (delta_module, image_module)
    for module in modules:
        module.sorted = counting_sorted  # type: ignore[attr-defined]
    try:
        image = build([broker(1)])
        for record in topic("t", [(1, 2, 3)] * partitions):  # one entry each, as Raft applies them
            image = build([record], image)
        for index in range(0, partitions, 10):
            delta = MetadataDelta(image)
            delta.replay(PartitionChangeRecord(topic="t", partition=index, isr=(1,), leader=1))
            image = delta.apply()
    finally:
        for module in modules:
            del module.sorted  # type: ignore[attr-defined]
    assert sorts == 0
    assert list(image.topics["t"].partitions) == list(range(partitions))
    assert image.topics["t"].partitions[10].isr == (1,)
    assert image.topics["t"].partitions[10].partition_epoch == 1
