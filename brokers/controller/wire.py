"""Conversions between metadata objects and the controller.proto messages (pure).

The proto's ``leader = -1`` is Python's ``None``; configs travel as dotted Kafka names
with string values; schemas as Arrow IPC schema bytes.
"""
from __future__ import annotations

from brokers.metadata.image import BrokerInfo, PartitionInfo, TopicImage
from brokers.metadata.schema_codec import schema_to_bytes
from spark_log.proto import controller_pb2 as pb

__all__ = ["broker_to_pb", "partition_from_pb", "partition_to_pb", "topic_to_pb"]


def partition_to_pb(index: int, info: PartitionInfo) -> pb.PartitionState:
    return pb.PartitionState(
        partition=index,
        replicas=list(info.replicas),
        isr=list(info.isr),
        leader=-1 if info.leader is None else info.leader,
        leader_epoch=info.leader_epoch,
        partition_epoch=info.partition_epoch,
        adding_replicas=list(info.adding_replicas),
        removing_replicas=list(info.removing_replicas),
    )


def partition_from_pb(state: pb.PartitionState) -> tuple[int, PartitionInfo]:
    return state.partition, PartitionInfo(
        replicas=tuple(state.replicas),
        isr=tuple(state.isr),
        leader=None if state.leader < 0 else state.leader,
        leader_epoch=state.leader_epoch,
        partition_epoch=state.partition_epoch,
        adding_replicas=tuple(state.adding_replicas),
        removing_replicas=tuple(state.removing_replicas),
    )


def topic_to_pb(topic: TopicImage) -> pb.TopicDescription:
    schema = topic.schema
    return pb.TopicDescription(
        name=topic.name,
        topic_id=topic.topic_id,
        kind=topic.kind,
        key_columns=list(topic.key_columns),
        configs=topic.config.to_kafka_names(),
        partitions=[partition_to_pb(i, p) for i, p in sorted(topic.partitions.items())],
        schema_id=topic.schema_id,
        schema=schema_to_bytes(schema) if schema is not None else b"",
    )


def broker_to_pb(info: BrokerInfo) -> pb.BrokerDescription:
    return pb.BrokerDescription(
        broker_id=info.broker_id,
        address=info.address,
        rack=info.rack,
        fenced=info.fenced,
        broker_epoch=info.broker_epoch,
        incarnation=info.incarnation,
    )
