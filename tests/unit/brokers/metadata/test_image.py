"""MetadataImage helpers and immutability."""
from __future__ import annotations

import dataclasses

import pytest

from brokers.metadata.image import EMPTY, MetadataImage

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
