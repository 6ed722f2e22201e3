"""Register a new schema version for a typed topic (pure validation).

- ``UnknownTopicOrPartitionError``: no such topic;
- ``SchemaMismatchError``: a bytes topic (its schema is fixed), or an evolution that is
  not compatible (``spark_log.schemas.check_compatible``: only nullable columns added at
  the end keep old readers working);
- ``InvalidSchemaError``: the new schema breaks the typed-schema rules.

Registering the latest schema again is a no-op that returns its id.  A typed topic
created without a schema takes the first one registered as schema id 0 (ids are dense
per topic from 0, as for a schema given at creation); only the typed-schema rules and the
topic's key columns apply to it.  Two registrations of the same first schema racing each
other both return 0; of different ones, the second is an evolution of the first and is
refused unless compatible.  Returns ``(records, schema_id)``.
"""
from __future__ import annotations

import pyarrow as pa

from brokers.metadata.image import MetadataImage
from brokers.metadata.records import MetadataRecord, SchemaRecord
from brokers.metadata.schema_codec import check_compatible, schema_to_bytes, validate_typed_schema
from spark_log.compaction import check_settings as check_compaction_settings
from spark_log.errors import InvalidRequestError, SchemaMismatchError, UnknownTopicOrPartitionError

__all__ = ["register_schema_records"]


def register_schema_records(image: MetadataImage, topic: str, schema: pa.Schema) -> tuple[list[MetadataRecord], int]:
    current = image.topics.get(topic)
    if current is None:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    if not isinstance(schema, pa.Schema):
        raise InvalidRequestError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    latest = current.schema
    if latest is not None and latest.equals(schema):
        return [], current.schema_id
    if current.kind == "bytes":
        raise SchemaMismatchError(f"topic {topic!r} is a bytes topic; its schema is fixed")
    validate_typed_schema(schema, current.key_columns)
    if latest is not None:
        check_compatible(latest, schema)
    check_compaction_settings(kind=current.kind, key_columns=current.key_columns, schema=schema, config=current.config)
    schema_id = current.schema_id + 1
    return [SchemaRecord(topic=topic, schema_id=schema_id, schema_bytes=schema_to_bytes(schema))], schema_id
