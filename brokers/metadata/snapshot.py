"""Snapshots of a whole ``MetadataImage`` (the Raft state-machine snapshot).

A snapshot is newline-delimited compact JSON: a header line, then the records that
rebuild the image from ``EMPTY`` (as Kafka writes a snapshot as a batch of records)::

    {"type":"snapshot","v":1,"offset":41,"epoch":3,"records":12}
    {"type":"register_broker",...}          one per broker (with its fenced state)
    {"type":"topic",...}                    then per topic: the topic,
    {"type":"schema",...}                   its schema versions, oldest first,
    {"type":"partition",...}                and its partitions with their epochs
    {"type":"user_scram_credential",...}    then SCRAM users, ACLs and client quotas

``decode_image(encode_image(image)) == image`` for every image (records never contain
newlines: JSON escapes them).  ``decode_image`` raises ``CorruptRecordError``.
"""
from __future__ import annotations

import json

from spark_log.errors import CorruptRecordError

from .delta import MetadataDelta, ReplayError
from .image import EMPTY, MetadataImage
from .records import (
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    SchemaRecord,
    TopicRecord,
    decode,
    encode,
)
from .schema_codec import schema_to_bytes
from .security_image import security_records

__all__ = ["encode_image", "decode_image", "image_records"]

_VERSION = 1


def image_records(image: MetadataImage) -> list[MetadataRecord]:
    """The records that rebuild ``image`` from ``EMPTY``, in replay order."""
    records: list[MetadataRecord] = []
    for broker in image.brokers.values():
        records.append(
            RegisterBrokerRecord(
                broker_id=broker.broker_id,
                incarnation=broker.incarnation,
                broker_epoch=broker.broker_epoch,
                address=broker.address,
                rack=broker.rack,
                fenced=broker.fenced,
            )
        )
    for topic in image.topics.values():
        records.append(
            TopicRecord(
                name=topic.name,
                topic_id=topic.topic_id,
                kind=topic.kind,
                key_columns=topic.key_columns,
                config=topic.config,
            )
        )
        for version in topic.schemas:
            records.append(
                SchemaRecord(topic=topic.name, schema_id=version.schema_id, schema_bytes=schema_to_bytes(version.schema))
            )
        for index, info in topic.partitions.items():
            records.append(
                PartitionRecord(
                    topic=topic.name,
                    partition=index,
                    replicas=info.replicas,
                    isr=info.isr,
                    leader=info.leader,
                    leader_epoch=info.leader_epoch,
                    partition_epoch=info.partition_epoch,
                    adding_replicas=info.adding_replicas,
                    removing_replicas=info.removing_replicas,
                )
            )
    records.extend(security_records(image.security))
    return records


def encode_image(image: MetadataImage) -> bytes:
    records = image_records(image)
    header = {"type": "snapshot", "v": _VERSION, "offset": image.offset, "epoch": image.epoch, "records": len(records)}
    lines = [json.dumps(header, separators=(",", ":")).encode("utf-8")]
    lines.extend(encode(record) for record in records)
    return b"\n".join(lines)


def decode_image(data: bytes | bytearray | memoryview) -> MetadataImage:
    """The image in snapshot ``data``; ``CorruptRecordError`` if it is not one."""
    lines = bytes(data).split(b"\n")
    try:
        header = json.loads(lines[0])
        if not isinstance(header, dict) or header.get("type") != "snapshot" or header.get("v") != _VERSION:
            raise ValueError("not a metadata snapshot header")
        offset, epoch, count = int(header["offset"]), int(header["epoch"]), int(header["records"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecordError(f"not a metadata snapshot: {exc}") from None
    body = [line for line in lines[1:] if line]
    if len(body) != count:
        raise CorruptRecordError(f"metadata snapshot is truncated: {len(body)} of {count} records")
    delta = MetadataDelta(EMPTY)
    try:
        for line in body:
            delta.replay(decode(line))
    except ReplayError as exc:
        raise CorruptRecordError(f"metadata snapshot is inconsistent: {exc}") from None
    return delta.apply(offset=offset, epoch=epoch)
