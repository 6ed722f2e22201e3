"""Topic schemas: the bytes-topic layout, typed schemas, ids, history and evolution.

Two kinds of topic (DESIGN.md section 3):

- bytes topics use ``BYTES_SCHEMA``, the columns of Spark's Kafka source that a producer
  writes: ``key`` (binary, nullable), ``value`` (binary; null is a tombstone),
  ``headers`` (list<struct<key: string, value: binary>>) and ``timestamp`` (timestamp[ms]).
- typed topics use any Arrow schema with optional key columns (partitioning,
  compaction).  ``validate_typed_schema`` refuses, with ``InvalidSchemaError``: an empty
  schema, empty or duplicate column names, names that collide with the metadata
  columns a reader can ask for (``RESERVED_COLUMNS``, compared case-insensitively
  because Spark resolves columns that way), and key columns that are missing,
  repeated or nested (list, struct, map, union: not usable as a partitioning key).

Schema ids: a topic's schemas form a ``SchemaHistory`` (oldest first, ids 0, 1, 2, ...);
every frame carries the id of the schema it was written with (``frame.schema_id``), so
old frames stay readable after the schema evolves.

Compatibility (``check_compatible(old, new)``): ``new`` must keep every column of
``old`` in the same position with the same name, type and nullability, and may add
columns at the end only if they are nullable (old frames then read them as null).
Anything else raises ``SchemaMismatchError`` naming the field (``details["field"]``).
Field and schema metadata (``pandas`` annotations and the like) are ignored.

Serialisation: ``schema_to_bytes`` / ``schema_from_bytes`` use the Arrow IPC schema
message, the same encoding Arrow's stream format begins with.

Thread-safety: everything here is immutable or pure.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
import pyarrow.ipc as ipc

from .errors import InvalidSchemaError, SchemaMismatchError

__all__ = [
    "BYTES_SCHEMA",
    "HEADERS_TYPE",
    "RESERVED_COLUMNS",
    "SchemaHistory",
    "SchemaVersion",
    "check_compatible",
    "is_compatible",
    "schema_from_bytes",
    "schema_to_bytes",
    "validate_typed_schema",
]

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

BYTES_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary(), nullable=True),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADERS_TYPE),
        pa.field("timestamp", pa.timestamp("ms")),
    ]
)

RESERVED_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestampType")


def _is_nested(data_type: pa.DataType) -> bool:
    return bool(
        pa.types.is_nested(data_type)
        or pa.types.is_dictionary(data_type)
        or pa.types.is_union(data_type)
    )


def validate_typed_schema(schema: pa.Schema, key_columns: Sequence[str] = ()) -> None:
    """Refuse a typed-topic schema that could not work; ``InvalidSchemaError`` says why."""
    if not isinstance(schema, pa.Schema):
        raise InvalidSchemaError(f"a topic schema must be a pyarrow.Schema, not {type(schema).__name__}")
    if isinstance(key_columns, str) or not all(isinstance(k, str) for k in key_columns):
        raise InvalidSchemaError("key_columns must be a sequence of column names")
    if len(schema) == 0:
        raise InvalidSchemaError("a typed topic needs at least one column")
    names = list(schema.names)
    if any(not name for name in names):
        raise InvalidSchemaError("column names must not be empty")
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InvalidSchemaError(f"duplicate column names: {', '.join(duplicates)}", field=duplicates[0])
    reserved = {r.lower() for r in RESERVED_COLUMNS}
    collisions = [name for name in names if name.lower() in reserved]
    if collisions:
        raise InvalidSchemaError(
            f"column {collisions[0]!r} collides with a reserved metadata column "
            f"({', '.join(RESERVED_COLUMNS)}); rename it",
            field=collisions[0],
        )
    repeated = sorted({k for k in key_columns if list(key_columns).count(k) > 1})
    if repeated:
        raise InvalidSchemaError(f"key column {repeated[0]!r} is listed twice", field=repeated[0])
    for key in key_columns:
        if key not in names:
            raise InvalidSchemaError(f"key column {key!r} is not in the schema ({', '.join(names)})", field=key)
        if _is_nested(schema.field(key).type):
            raise InvalidSchemaError(
                f"key column {key!r} has type {schema.field(key).type}; key columns must be primitive", field=key
            )


def check_compatible(old: pa.Schema, new: pa.Schema) -> None:
    """Raise ``SchemaMismatchError`` unless ``new`` is ``old`` plus nullable columns at the end."""
    for index, before in enumerate(old):
        if index >= len(new):
            raise SchemaMismatchError(
                f"incompatible schema: column {before.name!r} ({before.type}) is missing; columns cannot be dropped",
                field=before.name,
            )
        after = new.field(index)
        if after.name != before.name:
            raise SchemaMismatchError(
                f"incompatible schema: column {index} is {after.name!r} but was {before.name!r}; "
                "columns cannot be renamed or reordered",
                field=before.name,
            )
        if not after.type.equals(before.type):
            raise SchemaMismatchError(
                f"incompatible schema: column {before.name!r} changed type from {before.type} to {after.type}",
                field=before.name,
            )
        if after.nullable != before.nullable:
            raise SchemaMismatchError(
                f"incompatible schema: column {before.name!r} changed nullability "
                f"({'nullable' if before.nullable else 'not null'} to {'nullable' if after.nullable else 'not null'})",
                field=before.name,
            )
    for after in list(new)[len(old):]:
        if not after.nullable:
            raise SchemaMismatchError(
                f"incompatible schema: new column {after.name!r} must be nullable (old records have no value for it)",
                field=after.name,
            )


def is_compatible(old: pa.Schema, new: pa.Schema) -> bool:
    try:
        check_compatible(old, new)
    except SchemaMismatchError:
        return False
    return True


def schema_to_bytes(schema: pa.Schema) -> bytes:
    """The Arrow IPC schema message for ``schema`` (metadata included)."""
    if not isinstance(schema, pa.Schema):
        raise InvalidSchemaError(f"expected a pyarrow.Schema, not {type(schema).__name__}")
    return bytes(schema.serialize().to_pybytes())


_BYTES_SCHEMA_MESSAGE = schema_to_bytes(BYTES_SCHEMA)


def schema_from_bytes(data: bytes | bytearray | memoryview) -> pa.Schema:
    """Read a schema written by ``schema_to_bytes``; ``InvalidSchemaError`` if it is not one."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidSchemaError(f"expected bytes, not {type(data).__name__}")
    if data == _BYTES_SCHEMA_MESSAGE:
        return BYTES_SCHEMA  # the one object: ``schema is BYTES_SCHEMA`` is the bytes layout's test (bytes_message)
    try:
        return ipc.read_schema(pa.py_buffer(bytes(data)))
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError, ValueError) as exc:
        raise InvalidSchemaError(f"not an Arrow IPC schema: {exc}") from None


def _same(a: pa.Schema, b: pa.Schema) -> bool:
    return a.equals(b, check_metadata=False)


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    schema_id: int
    schema: pa.Schema


@dataclass(frozen=True, slots=True)
class SchemaHistory:
    """A topic's schemas, oldest first, with ids 0, 1, 2, ... (immutable).

    ``SchemaHistory.bytes_topic()`` or ``SchemaHistory.typed(schema, key_columns)`` start
    one; ``evolve(schema)`` returns ``(history, schema_id)``: the same history and the
    latest id when ``schema`` equals the latest (idempotent), otherwise a history with
    ``schema`` appended after ``check_compatible(latest, schema)``."""

    versions: tuple[SchemaVersion, ...]
    key_columns: tuple[str, ...] = ()
    kind: str = "typed"  # "bytes" | "typed"

    @classmethod
    def bytes_topic(cls) -> "SchemaHistory":
        return cls((SchemaVersion(0, BYTES_SCHEMA),), (), "bytes")

    @classmethod
    def typed(cls, schema: pa.Schema, key_columns: Sequence[str] = ()) -> "SchemaHistory":
        validate_typed_schema(schema, key_columns)
        return cls((SchemaVersion(0, schema),), tuple(key_columns), "typed")

    @property
    def latest(self) -> pa.Schema:
        return self.versions[-1].schema

    @property
    def latest_id(self) -> int:
        return self.versions[-1].schema_id

    def get(self, schema_id: int) -> pa.Schema:
        """The schema with ``schema_id``; ``SchemaMismatchError`` if the topic never had it."""
        if 0 <= schema_id < len(self.versions):
            return self.versions[schema_id].schema
        raise SchemaMismatchError(
            f"unknown schema id {schema_id}; this topic has ids 0..{len(self.versions) - 1}", schema_id=schema_id
        )

    def id_for(self, schema: pa.Schema) -> int | None:
        """The newest id whose schema equals ``schema`` (metadata ignored), or None."""
        for version in reversed(self.versions):
            if _same(version.schema, schema):
                return version.schema_id
        return None

    def evolve(self, schema: pa.Schema) -> tuple["SchemaHistory", int]:
        if _same(self.latest, schema):
            return self, self.latest_id
        if self.kind == "bytes":
            raise SchemaMismatchError("the schema of a bytes topic is fixed")
        validate_typed_schema(schema, self.key_columns)
        check_compatible(self.latest, schema)
        version = SchemaVersion(len(self.versions), schema)
        return SchemaHistory(self.versions + (version,), self.key_columns, self.kind), version.schema_id
