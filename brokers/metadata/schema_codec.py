"""The schema rules the metadata layer relies on, taken from ``spark_log.schemas``.

``spark_log.schemas`` (the storage part) is the owner of these rules.  This module only
adapts to it and, while that module does not exist yet, falls back to equivalent rules
on pyarrow directly, so the metadata layer works either way:

- ``schema_to_bytes`` / ``schema_from_bytes``: Arrow IPC schema serialisation;
- ``bytes_schema()``: the schema of a bytes topic;
- ``validate_typed_schema(schema, key_columns)``: raises ``InvalidSchemaError``;
- ``check_compatible(old, new)``: adding nullable fields at the end is compatible,
  anything else raises ``SchemaMismatchError``.
"""
from __future__ import annotations

from types import ModuleType
from typing import Sequence

import pyarrow as pa

from spark_log.errors import InvalidSchemaError, SchemaMismatchError

__all__ = [
    "RESERVED_COLUMNS",
    "bytes_schema",
    "check_compatible",
    "schema_from_bytes",
    "schema_to_bytes",
    "validate_typed_schema",
]

RESERVED_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestampType")


def _schemas() -> ModuleType | None:
    try:
        from spark_log import schemas
    except ImportError:
        return None
    return schemas


def schema_to_bytes(schema: pa.Schema) -> bytes:
    module = _schemas()
    if module is not None and hasattr(module, "schema_to_bytes"):
        return bytes(module.schema_to_bytes(schema))
    return bytes(schema.serialize().to_pybytes())


def schema_from_bytes(data: bytes) -> pa.Schema:
    """Raises ``InvalidSchemaError`` when ``data`` is not an Arrow IPC schema."""
    module = _schemas()
    if module is not None and hasattr(module, "schema_from_bytes"):
        return module.schema_from_bytes(data)
    try:
        return pa.ipc.read_schema(pa.py_buffer(data))
    except (pa.ArrowInvalid, OSError, ValueError) as exc:
        raise InvalidSchemaError(f"not an Arrow IPC schema: {exc}") from None


def bytes_schema() -> pa.Schema:
    module = _schemas()
    if module is not None and hasattr(module, "BYTES_SCHEMA"):
        return module.BYTES_SCHEMA
    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    return pa.schema(
        [
            pa.field("key", pa.binary(), nullable=True),
            pa.field("value", pa.binary()),
            pa.field("headers", pa.list_(header)),
            pa.field("timestamp", pa.timestamp("ms")),
        ]
    )


def validate_typed_schema(schema: pa.Schema, key_columns: Sequence[str]) -> None:
    """Refuse reserved column names, duplicate names, empty schemas and unknown keys."""
    module = _schemas()
    if module is not None and hasattr(module, "validate_typed_schema"):
        module.validate_typed_schema(schema, tuple(key_columns))
        return
    if len(schema) == 0:
        raise InvalidSchemaError("a typed topic needs at least one column")
    names = list(schema.names)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidSchemaError(f"duplicate column names: {', '.join(duplicates)}")
    reserved = [n for n in names if n in RESERVED_COLUMNS]
    if reserved:
        raise InvalidSchemaError(
            f"column names {', '.join(reserved)} are reserved for metadata columns "
            f"({', '.join(RESERVED_COLUMNS)}); rename them"
        )
    missing = [k for k in key_columns if k not in names]
    if missing:
        raise InvalidSchemaError(f"key columns not in the schema: {', '.join(missing)}")


def check_compatible(old: pa.Schema, new: pa.Schema) -> None:
    """Raise ``SchemaMismatchError`` unless ``new`` only appends nullable fields to ``old``."""
    module = _schemas()
    if module is not None and hasattr(module, "check_compatible"):
        module.check_compatible(old, new)
        return
    if len(new) < len(old):
        raise SchemaMismatchError(
            f"incompatible schema: it drops columns {', '.join(old.names[len(new):])}"
        )
    for index, before in enumerate(old):
        after = new.field(index)
        if after.name != before.name or not after.type.equals(before.type) or after.nullable != before.nullable:
            raise SchemaMismatchError(
                f"incompatible schema: column {index} changed from {before} to {after}; "
                "only nullable columns added at the end are allowed"
            )
    added = [f.name for f in list(new)[len(old):] if not f.nullable]
    if added:
        raise SchemaMismatchError(
            f"incompatible schema: new columns {', '.join(added)} must be nullable"
        )
