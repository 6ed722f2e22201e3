"""The schema rules the metadata layer relies on: a thin view of ``spark_log.schemas``.

``spark_log.schemas`` (the storage part) owns them; this module names what the metadata
and controller code uses, so that the rest of ``brokers.metadata``/``brokers.controller``
depends on one place:

- ``schema_to_bytes`` / ``schema_from_bytes``: Arrow IPC schema serialisation
  (``InvalidSchemaError`` for bytes that are not a schema);
- ``bytes_schema()``: the schema of a bytes topic (schema id 0 of every bytes topic);
- ``validate_typed_schema(schema, key_columns)``: raises ``InvalidSchemaError``;
- ``check_compatible(old, new)``: adding nullable fields at the end is compatible,
  anything else raises ``SchemaMismatchError``.
"""
from __future__ import annotations

import pyarrow as pa

from spark_log.schemas import (
    BYTES_SCHEMA,
    RESERVED_COLUMNS,
    check_compatible,
    schema_from_bytes,
    schema_to_bytes,
    validate_typed_schema,
)

__all__ = [
    "RESERVED_COLUMNS",
    "bytes_schema",
    "check_compatible",
    "schema_from_bytes",
    "schema_to_bytes",
    "validate_typed_schema",
]


def bytes_schema() -> pa.Schema:
    return BYTES_SCHEMA
