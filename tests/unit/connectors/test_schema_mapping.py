"""Schema mapping between topics and Spark (no Spark session needed)."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType, BinaryType, DecimalType, IntegerType, LongType, ShortType, StringType, StructField, StructType, TimestampType,
)

from connectors import schema_mapping as sm
from spark_log.errors import InvalidConfigError, SchemaMismatchError

KAFKA_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def test_bytes_topics_read_as_spark_kafka_columns() -> None:
    schema = sm.bytes_source_schema(include_headers=False)
    assert schema.fieldNames() == KAFKA_COLUMNS
    assert [f.dataType for f in schema.fields] == [
        BinaryType(), BinaryType(), StringType(), IntegerType(), LongType(), TimestampType(), IntegerType()]
    assert all(f.nullable for f in schema.fields)
    with_headers = sm.bytes_source_schema(include_headers=True)
    assert with_headers.fieldNames() == KAFKA_COLUMNS + ["headers"]
    assert with_headers["headers"].dataType == ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def test_typed_topics_add_metadata_and_widen_types() -> None:
    topic = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("n", pa.uint8()), pa.field("big", pa.uint64()),
                       pa.field("s", pa.large_string()), pa.field("tags", pa.list_(pa.struct([("k", pa.string())])))])
    schema = sm.typed_source_schema(topic)
    assert schema.fieldNames() == ["id", "n", "big", "s", "tags", "topic", "partition", "offset", "timestamp"]
    assert not schema["id"].nullable
    assert schema["n"].dataType == ShortType()
    assert schema["big"].dataType == DecimalType(20, 0)
    assert schema["s"].dataType == StringType()


def test_typed_topic_with_unreadable_type_names_the_column() -> None:
    with pytest.raises(SchemaMismatchError, match="'t'"):
        sm.typed_source_schema(pa.schema([("t", pa.dense_union([pa.field("a", pa.int32())]))]))


def test_project() -> None:
    full = sm.bytes_source_schema(include_headers=False)
    assert sm.project(full, ("offset", "value")).fieldNames() == ["offset", "value"]
    assert sm.project(full, None) is full
    with pytest.raises(InvalidConfigError, match="'columns'.*headers"):
        sm.project(full, ("headers",))


def test_data_columns_are_what_brokers_must_send() -> None:
    assert sm.data_columns(sm.project(sm.bytes_source_schema(include_headers=True), ("value", "offset")), bytes_topic=True) == ["value"]
    typed = sm.typed_source_schema(pa.schema([("a", pa.int32()), ("b", pa.string())]))
    assert sm.data_columns(sm.project(typed, ("b", "partition")), bytes_topic=False) == ["b"]


def _fetched_bytes_batch() -> pa.RecordBatch:
    headers_type = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
    return pa.RecordBatch.from_arrays(
        [
            pa.array([b"k", None]), pa.array([b"v1", b"v2"]),
            pa.array([[{"key": "h", "value": b"x"}], None], headers_type),
            pa.array([1_700_000_000_000, 1_700_000_000_001], pa.timestamp("ms")),
            pa.array(["t", "t"]), pa.array([3, 3], pa.int32()), pa.array([10, 11], pa.int64()),
        ],
        names=["key", "value", "headers", "timestamp", "topic", "partition", "offset"],
    )


def test_to_spark_batch_matches_sparks_arrow_schema_exactly() -> None:
    schema = sm.bytes_source_schema(include_headers=True)
    target = sm.spark_arrow_schema(schema)
    out = sm.to_spark_batch(_fetched_bytes_batch(), target, timestamp_type=1)
    assert out.schema.equals(target)
    assert out.column("timestampType").to_pylist() == [1, 1]
    assert out.column("timestamp").to_pylist()[0] == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc)
    assert out.column("key").to_pylist() == [b"k", None]
    projected = sm.spark_arrow_schema(sm.project(schema, ("offset", "value")))
    assert sm.to_spark_batch(_fetched_bytes_batch(), projected).column_names == ["offset", "value"]


def test_to_spark_batch_reports_a_missing_column() -> None:
    target = sm.spark_arrow_schema(StructType([StructField("nope", LongType())]))
    with pytest.raises(SchemaMismatchError, match="'nope'"):
        sm.to_spark_batch(_fetched_bytes_batch(), target)


def test_typed_payload_drops_routing_columns() -> None:
    batch = pa.RecordBatch.from_pydict({"a": [1], "topic": ["t"], "partition": [0], "offset": [5], "b": ["x"]})
    assert sm.typed_payload(batch).column_names == ["a", "b"]
