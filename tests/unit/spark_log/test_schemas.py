"""spark_log.schemas: bytes schema, typed validation, compatibility, ids, IPC round trip."""
from __future__ import annotations

import pyarrow as pa
import pytest

from spark_log import schemas
from spark_log.errors import InvalidSchemaError, SchemaMismatchError
from spark_log.schemas import (
    BYTES_SCHEMA,
    RESERVED_COLUMNS,
    SchemaHistory,
    check_compatible,
    is_compatible,
    schema_from_bytes,
    schema_to_bytes,
    validate_typed_schema,
)

BASE = pa.schema([pa.field("user", pa.string(), nullable=False), pa.field("clicks", pa.int64())])


def test_bytes_schema_is_the_kafka_layout() -> None:
    assert BYTES_SCHEMA.names == ["key", "value", "headers", "timestamp"]
    assert BYTES_SCHEMA.field("key").type == pa.binary() and BYTES_SCHEMA.field("key").nullable
    assert BYTES_SCHEMA.field("value").type == pa.binary()
    headers = BYTES_SCHEMA.field("headers").type
    assert pa.types.is_list(headers)
    assert [(f.name, f.type) for f in headers.value_type] == [("key", pa.string()), ("value", pa.binary())]
    assert BYTES_SCHEMA.field("timestamp").type == pa.timestamp("ms")
    assert RESERVED_COLUMNS == ("topic", "partition", "offset", "timestamp", "timestampType")


def test_a_good_typed_schema_passes() -> None:
    validate_typed_schema(BASE, ["user"])
    validate_typed_schema(BASE)


@pytest.mark.parametrize(
    "schema, keys, message",
    [
        (pa.schema([]), (), "at least one column"),
        (pa.schema([("a", pa.int32()), ("a", pa.int64())]), (), "duplicate column names: a"),
        (pa.schema([("offset", pa.int64())]), (), "'offset' collides"),
        (pa.schema([("Timestamp", pa.int64())]), (), "'Timestamp' collides"),
        (pa.schema([("timestampType", pa.int32())]), (), "collides"),
        (pa.schema([("", pa.int32())]), (), "must not be empty"),
        (BASE, ["nope"], "'nope' is not in the schema"),
        (BASE, ["user", "user"], "listed twice"),
        (pa.schema([("tags", pa.list_(pa.string()))]), ["tags"], "must be primitive"),
        (BASE, "user", "sequence of column names"),
    ],
)
def test_bad_typed_schemas_are_refused(schema: pa.Schema, keys, message: str) -> None:
    with pytest.raises(InvalidSchemaError, match=message):
        validate_typed_schema(schema, keys)


def test_not_a_schema_is_refused() -> None:
    with pytest.raises(InvalidSchemaError, match="pyarrow.Schema"):
        validate_typed_schema({"a": "int"}, ())  # type: ignore[arg-type]


def test_adding_nullable_columns_at_the_end_is_compatible() -> None:
    new = BASE.append(pa.field("country", pa.string())).append(pa.field("ts", pa.timestamp("ms")))
    check_compatible(BASE, new)
    check_compatible(BASE, BASE)
    check_compatible(BASE, BASE.with_metadata({b"pandas": b"{}"}))
    assert is_compatible(BASE, new) and not is_compatible(new, BASE)


@pytest.mark.parametrize(
    "new, field, message",
    [
        (pa.schema([BASE.field("user")]), "clicks", "'clicks' .* is missing"),
        (pa.schema([BASE.field("clicks"), BASE.field("user")]), "user", "renamed or reordered"),
        (pa.schema([BASE.field("user"), pa.field("clicks", pa.int32())]), "clicks", "changed type from int64 to int32"),
        (pa.schema([pa.field("user", pa.string()), BASE.field("clicks")]), "user", "nullability"),
        (BASE.append(pa.field("must", pa.int8(), nullable=False)), "must", "must be nullable"),
        (pa.schema([BASE.field("user"), pa.field("country", pa.string()), BASE.field("clicks")]), "clicks", "renamed or reordered"),
    ],
)
def test_anything_else_is_a_mismatch_naming_the_field(new: pa.Schema, field: str, message: str) -> None:
    with pytest.raises(SchemaMismatchError, match=message) as info:
        check_compatible(BASE, new)
    assert info.value.details["field"] == field


def test_ipc_round_trip() -> None:
    for schema in (BYTES_SCHEMA, BASE, BASE.with_metadata({b"k": b"v"})):
        data = schema_to_bytes(schema)
        assert isinstance(data, bytes)
        back = schema_from_bytes(data)
        assert back.equals(schema, check_metadata=True)
    with pytest.raises(InvalidSchemaError):
        schema_from_bytes(b"not a schema")
    with pytest.raises(InvalidSchemaError):
        schema_from_bytes("text")  # type: ignore[arg-type]
    with pytest.raises(InvalidSchemaError):
        schema_to_bytes("text")  # type: ignore[arg-type]


def test_history_ids_and_evolution() -> None:
    history = SchemaHistory.typed(BASE, ["user"])
    assert (history.latest_id, history.kind, history.key_columns) == (0, "typed", ("user",))
    same, schema_id = history.evolve(BASE.with_metadata({b"x": b"y"}))
    assert same is history and schema_id == 0
    v1 = BASE.append(pa.field("country", pa.string()))
    history, schema_id = history.evolve(v1)
    assert schema_id == 1 and history.get(0).equals(BASE) and history.get(1).equals(v1)
    assert history.id_for(BASE) == 0 and history.id_for(v1) == 1 and history.id_for(BYTES_SCHEMA) is None
    with pytest.raises(SchemaMismatchError, match="clicks"):
        history.evolve(pa.schema([BASE.field("user")]))
    assert history.latest_id == 1
    with pytest.raises(SchemaMismatchError, match="unknown schema id 7"):
        history.get(7)
    with pytest.raises(InvalidSchemaError, match="offset"):
        history.evolve(v1.append(pa.field("offset", pa.int64())))


def test_typed_history_validates_and_bytes_history_is_fixed() -> None:
    with pytest.raises(InvalidSchemaError):
        SchemaHistory.typed(pa.schema([("partition", pa.int32())]))
    history = SchemaHistory.bytes_topic()
    assert history.latest.equals(BYTES_SCHEMA) and history.latest_id == 0 and history.kind == "bytes"
    assert history.evolve(BYTES_SCHEMA)[1] == 0
    with pytest.raises(SchemaMismatchError, match="fixed"):
        history.evolve(BYTES_SCHEMA.append(pa.field("extra", pa.int8())))


def test_module_exports() -> None:
    for name in schemas.__all__:
        assert hasattr(schemas, name)
