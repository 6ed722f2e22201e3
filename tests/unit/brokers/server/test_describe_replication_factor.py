"""A topic's replication factor during a reassignment: Kafka's describe (TopicCommand
``getReplicationFactor``) counts the replicas minus those being added (the original set's
size until the move completes); ``MetadataBuilder.describe`` reports the largest
``len(replicas)``, i.e. target ∪ original, so moving a 3-replica partition to 3 other
brokers describes the topic as replication factor 6."""
from __future__ import annotations

from brokers.metadata.image import PartitionInfo, SchemaVersion, TopicImage, frozen_map
from brokers.server.metadata import MetadataBuilder
from spark_log.schemas import SchemaHistory


def test_replication_factor_during_a_move_is_not_the_union_of_old_and_new_replicas() -> None:
    moving = PartitionInfo(replicas=(4, 5, 6, 1, 2, 3), isr=(1, 2, 3), leader=1,
                           adding_replicas=(4, 5, 6), removing_replicas=(1, 2, 3))
    settled = PartitionInfo(replicas=(2, 3, 1), isr=(2, 3, 1), leader=2)
    topic = TopicImage(name="t", topic_id="id-t", partitions=frozen_map({0: moving, 1: settled}),
                       schemas=(SchemaVersion(schema_id=0, schema=SchemaHistory.bytes_topic().latest),))
    assert MetadataBuilder().describe(topic).replication_factor == 3
