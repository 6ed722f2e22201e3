"""Metadata answers and topic descriptions, built from this broker's metadata image.

Schemas travel as Arrow IPC schema bytes; serialised forms are cached per
``(topic_id, schema_id)`` (schemas never change once registered).
"""
from __future__ import annotations

import threading

import pyarrow as pa

from brokers.metadata.image import MetadataImage, PartitionInfo, TopicImage
from spark_log.schemas import schema_to_bytes
from spark_log.errors import UnknownTopicOrPartitionError
from spark_log.proto import broker_pb2 as pb

from .errors import to_pb

__all__ = ["MetadataBuilder"]


class MetadataBuilder:
    """Turns images into protocol messages.  Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._schema_bytes: dict[tuple[str, int], bytes] = {}

    def _schema(self, topic: TopicImage, schema_id: int, schema: pa.Schema) -> bytes:
        key = (topic.topic_id, schema_id)
        with self._lock:
            data = self._schema_bytes.get(key)
        if data is None:
            data = schema_to_bytes(schema)
            with self._lock:
                self._schema_bytes[key] = data
        return data

    @staticmethod
    def partition(index: int, info: PartitionInfo) -> pb.PartitionMeta:
        return pb.PartitionMeta(
            partition=index, leader_id=info.leader if info.leader is not None else -1,
            leader_epoch=info.leader_epoch, replicas=list(info.replicas), isr=list(info.isr),
            partition_epoch=info.partition_epoch, adding_replicas=list(info.adding_replicas),
            removing_replicas=list(info.removing_replicas),
        )

    def topic_meta(self, topic: TopicImage) -> pb.TopicMeta:
        return pb.TopicMeta(
            name=topic.name, topic_id=topic.topic_id, kind=topic.kind,
            partitions=[self.partition(i, topic.partitions[i]) for i in sorted(topic.partitions)],
            schemas=[pb.SchemaVersion(schema_id=v.schema_id, arrow_schema=self._schema(topic, v.schema_id, v.schema))
                     for v in topic.schemas],
            key_columns=list(topic.key_columns),
        )

    def metadata(self, request: pb.MetadataRequest, image: MetadataImage, controller_id: int | None) -> pb.MetadataResponse:
        response = pb.MetadataResponse(controller_id=controller_id if controller_id is not None else -1,
                                       metadata_offset=image.offset)
        for broker_id, info in sorted(image.brokers.items()):
            response.brokers.add(broker_id=broker_id, address=info.address, rack=info.rack, fenced=info.fenced)
        names = sorted(image.topics) if request.all_topics or not request.topics else list(request.topics)
        for name in names:
            topic = image.topics.get(name)
            if topic is None:
                response.topics.add(name=name).error.CopyFrom(
                    to_pb(UnknownTopicOrPartitionError(f"unknown topic {name!r}")))
            else:
                response.topics.append(self.topic_meta(topic))
        return response

    def describe(self, topic: TopicImage) -> pb.TopicDescription:
        # as Kafka counts it: a partition being moved has its target and its original replicas,
        # and the factor is the original set's size until the move completes
        replication = max((len(p.replicas) - len(p.adding_replicas) for p in topic.partitions.values()), default=0)
        return pb.TopicDescription(
            name=topic.name, topic_id=topic.topic_id, kind=topic.kind,
            partitions=[self.partition(i, topic.partitions[i]) for i in sorted(topic.partitions)],
            configs=topic.config.to_kafka_names(),
            schemas=[pb.SchemaVersion(schema_id=v.schema_id, arrow_schema=self._schema(topic, v.schema_id, v.schema))
                     for v in topic.schemas],
            key_columns=list(topic.key_columns), replication_factor=replication,
        )
