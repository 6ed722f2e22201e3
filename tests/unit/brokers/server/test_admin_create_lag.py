"""A broker whose metadata image lags behind a CreateTopic its controller committed answers
with the controller's description of the topic, not "unknown topic": that retriable error
made clients retry a create that had succeeded, and the retry found the topic existing
(TOPIC_ALREADY_EXISTS from a caller's own create_topic, seen in a busy CI pair)."""
from __future__ import annotations

from typing import Any

from brokers.metadata.image import MetadataImage, PartitionInfo, TopicImage, frozen_map
from brokers.server.admin import AdminHandler
from brokers.server.metadata import MetadataBuilder
from spark_log.errors import RequestTimeoutError
from spark_log.proto import broker_pb2 as pb

CREATED = TopicImage(name="t", topic_id="id-new", partitions=frozen_map(
    {i: PartitionInfo(replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=0, partition_epoch=0) for i in range(3)}))


class _Controller:
    def create_topic(self, name: str, **_: Any) -> TopicImage:
        assert name == "t"
        return CREATED


def _handler(image: MetadataImage) -> AdminHandler:
    def wait_for(predicate: Any, timeout_s: float) -> MetadataImage:
        if predicate(image):
            return image
        raise RequestTimeoutError("the image did not catch up (test)")

    return AdminHandler(controller=_Controller(), image=lambda: image, wait_for=wait_for,  # type: ignore[arg-type]
                        builder=MetadataBuilder())


def _create(handler: AdminHandler) -> pb.TopicDescription:
    return handler.create_topic(pb.CreateTopicRequest(name="t", partitions=3, replication_factor=2))


def test_an_image_without_the_topic_answers_with_the_controllers_description() -> None:
    described = _create(_handler(MetadataImage()))
    assert (described.name, described.topic_id, len(described.partitions), described.replication_factor) == \
        ("t", "id-new", 3, 2)


def test_an_image_still_holding_a_deleted_namesake_answers_with_the_new_topic() -> None:
    old = TopicImage(name="t", topic_id="id-old", partitions=frozen_map(
        {0: PartitionInfo(replicas=(3,), isr=(3,), leader=3, leader_epoch=0, partition_epoch=0)}))
    described = _create(_handler(MetadataImage(topics=frozen_map({"t": old}))))
    assert (described.topic_id, len(described.partitions)) == ("id-new", 3)


def test_an_image_that_caught_up_answers_from_itself() -> None:
    mine = TopicImage(name="t", topic_id="id-new", partitions=CREATED.partitions, key_columns=("k",))
    described = _create(_handler(MetadataImage(topics=frozen_map({"t": mine}))))
    assert list(described.key_columns) == ["k"]  # this broker's image, not the controller's answer
