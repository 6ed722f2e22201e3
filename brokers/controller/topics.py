"""Topic creation and deletion: validation and the records they produce (pure).

``create_topic_records`` refuses, each with its typed error and nothing changed:

- ``InvalidTopicError``: a name outside ``[a-zA-Z0-9._-]{1,249}``, ``.`` or ``..``,
  or one that collides with an existing topic once ``.`` and ``_`` are treated alike
  (Kafka's rule, since both map to the same metric names);
- ``TopicAlreadyExistsError``: the name is taken;
- ``InvalidPartitionsError``: ``partitions < 1`` or above ``MAX_PARTITIONS``;
- ``InvalidReplicationFactorError``: ``replication_factor < 1`` or more than the live
  (registered, unfenced) brokers;
- ``InvalidConfigError``: an unknown config key or a bad value (``TopicConfig``);
- ``InvalidSchemaError`` / ``InvalidRequestError``: a typed topic's schema breaks the
  schema rules, key columns given for a bytes topic, an unknown ``kind``, or a schema
  given with ``kind="bytes"``.

The kind: ``kind=None`` (the default, and ``""`` on the wire) makes a typed topic iff a
schema is given, else a bytes topic.  ``kind="typed"`` without a schema makes a typed
topic with no schema yet: its first ``register_schema`` becomes schema id 0 (as a schema
given at creation would), until then producers get ``NoSchemaError`` and there is
nothing to read.  Its key columns (if any) must be distinct non-empty names; that they
exist and are primitive is checked against the first schema.

The records: ``TopicRecord`` (config resolved against the controller's defaults),
``SchemaRecord`` id 0 (the bytes schema for a bytes topic, the given schema for a typed
one; none for a typed topic without a schema), and one ``PartitionRecord`` per partition
with replicas from ``placement.py``, leader = first replica, ISR = all replicas, epochs 0.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import pyarrow as pa

from brokers.metadata.image import MetadataImage
from brokers.metadata.records import MetadataRecord, PartitionRecord, RemoveTopicRecord, SchemaRecord, TopicRecord
from brokers.metadata.schema_codec import bytes_schema, schema_to_bytes, validate_typed_schema
from spark_log.compaction import check_settings as check_compaction_settings
from spark_log.config import TopicConfig
from spark_log.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from .placement import BrokerSlot, place_replicas

__all__ = ["KINDS", "MAX_PARTITIONS", "create_topic_records", "delete_topic_records", "validate_topic_name"]

KINDS = ("bytes", "typed")

MAX_PARTITIONS = 10_000
_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def validate_topic_name(name: str) -> None:
    """Raise ``InvalidTopicError`` unless ``name`` is a legal topic name."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError("topic name must not be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > 249:
        raise InvalidTopicError(f"topic name is {len(name)} characters long; the limit is 249")
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicError(
            f"topic name {name!r} is illegal: it may contain only ASCII letters, digits, '.', '_' and '-'"
        )


def create_topic_records(
    image: MetadataImage,
    *,
    name: str,
    topic_id: str,
    partitions: int = 1,
    replication_factor: int = 1,
    config: Mapping[str, Any] | None = None,
    schema: pa.Schema | None = None,
    key_columns: Sequence[str] = (),
    defaults: TopicConfig = TopicConfig(),
    kind: str | None = None,
) -> list[MetadataRecord]:
    validate_topic_name(name)
    if kind is not None and kind not in KINDS:
        raise InvalidRequestError(f"topic kind must be 'bytes' or 'typed', got {kind!r}")
    if name in image.topics:
        raise TopicAlreadyExistsError(f"topic {name!r} already exists")
    folded = name.replace(".", "_")
    for existing in image.topics:
        if existing.replace(".", "_") == folded:
            raise InvalidTopicError(
                f"topic {name!r} collides with existing topic {existing!r} ('.' and '_' are treated alike)"
            )
    if not isinstance(partitions, int) or partitions < 1:
        raise InvalidPartitionsError(f"number of partitions must be at least 1, got {partitions}")
    if partitions > MAX_PARTITIONS:
        raise InvalidPartitionsError(f"number of partitions {partitions} exceeds the limit of {MAX_PARTITIONS}")
    if not isinstance(replication_factor, int) or replication_factor < 1:
        raise InvalidReplicationFactorError(f"replication factor must be at least 1, got {replication_factor}")
    live = image.live_brokers()
    if replication_factor > len(live):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {len(live)} live (registered, unfenced) brokers"
        )
    resolved = defaults.with_overrides(config or {})
    topic_schema: pa.Schema | None
    if schema is None and kind != "typed":
        if key_columns:
            raise InvalidRequestError("key columns need a typed topic; bytes topics are keyed by 'key'")
        kind, topic_schema = "bytes", bytes_schema()
    elif schema is None:
        _check_key_names(key_columns)
        kind, topic_schema = "typed", None  # schema set by the first register_schema
    else:
        if kind == "bytes":
            raise InvalidRequestError("a bytes topic has the fixed bytes schema; give kind='typed' with a schema")
        if not isinstance(schema, pa.Schema):
            raise InvalidRequestError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
        validate_typed_schema(schema, tuple(key_columns))
        kind, topic_schema = "typed", schema
    check_compaction_settings(kind=kind, key_columns=tuple(key_columns), schema=topic_schema if kind == "typed" else None,
                              config=resolved)
    replica_load, leader_load = image.replica_counts()
    assignment = place_replicas(
        [BrokerSlot(b.broker_id, b.placement_domain) for b in live],
        partitions,
        replication_factor,
        replica_load=replica_load,
        leader_load=leader_load,
    )
    records: list[MetadataRecord] = [
        TopicRecord(name=name, topic_id=topic_id, kind=kind, key_columns=tuple(key_columns), config=resolved),
    ]
    if topic_schema is not None:
        records.append(SchemaRecord(topic=name, schema_id=0, schema_bytes=schema_to_bytes(topic_schema)))
    for index, replicas in enumerate(assignment):
        records.append(
            PartitionRecord(topic=name, partition=index, replicas=replicas, isr=replicas, leader=replicas[0])
        )
    return records


def _check_key_names(key_columns: Sequence[str]) -> None:
    names = list(key_columns)
    if any(not isinstance(n, str) or not n for n in names):
        raise InvalidRequestError(f"key columns must be non-empty names, got {names}")
    if len(set(names)) != len(names):
        raise InvalidRequestError(f"key columns must be distinct, got {names}")


def delete_topic_records(image: MetadataImage, name: str) -> list[MetadataRecord]:
    """``UnknownTopicOrPartitionError`` if there is no such topic."""
    topic = image.topics.get(name)
    if topic is None:
        raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
    return [RemoveTopicRecord(name=name, topic_id=topic.topic_id)]
