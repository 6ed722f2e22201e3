"""Small builders for metadata tests."""
from __future__ import annotations

from brokers.metadata.delta import MetadataDelta
from brokers.metadata.image import EMPTY, MetadataImage
from brokers.metadata.records import MetadataRecord, PartitionRecord, RegisterBrokerRecord, SchemaRecord, TopicRecord
from brokers.metadata.schema_codec import bytes_schema, schema_to_bytes


def broker(broker_id: int, *, epoch: int = 1, fenced: bool = False, rack: str = "") -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation=f"inc-{broker_id}-{epoch}",
        broker_epoch=epoch,
        address=f"127.0.0.1:{9000 + broker_id}",
        rack=rack,
        fenced=fenced,
    )


def topic(name: str, replicas: list[tuple[int, ...]], *, topic_id: str | None = None) -> list[MetadataRecord]:
    records: list[MetadataRecord] = [
        TopicRecord(name=name, topic_id=topic_id or f"id-{name}"),
        SchemaRecord(topic=name, schema_id=0, schema_bytes=schema_to_bytes(bytes_schema())),
    ]
    for index, reps in enumerate(replicas):
        records.append(PartitionRecord(topic=name, partition=index, replicas=reps, isr=reps, leader=reps[0]))
    return records


def build(records: list[MetadataRecord], base: MetadataImage = EMPTY) -> MetadataImage:
    delta = MetadataDelta(base)
    for record in records:
        delta.replay(record)
    return delta.apply(offset=base.offset + len(records), epoch=1)
