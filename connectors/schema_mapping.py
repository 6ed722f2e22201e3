"""How topics look to Spark, and how Spark rows become topic records.

Reading
-------
- A *bytes* topic (stored columns ``key, value, headers, timestamp``) reads as exactly
  the columns of Spark's Kafka source, in this order and all nullable::

      key binary, value binary, topic string, partition int, offset bigint,
      timestamp timestamp, timestampType int [, headers array<struct<key string, value binary>>]

  ``headers`` is present only with ``includeHeaders=true``, as for Kafka.
  ``timestampType`` is 0 (CreateTime) or 1 (LogAppendTime), from the topic's config.
- A *typed* topic reads as its own columns (Arrow types mapped to Spark's; unsigned
  integers widen, ``uint64`` becomes ``decimal(20,0)``) followed by
  ``topic, partition, offset, timestamp``.
- ``columns`` selects and orders a subset of these names.

``to_spark_batch`` turns a batch fetched from a broker (data columns plus ``topic``,
``partition``, ``offset``, ``timestamp``) into a batch whose Arrow schema equals
``spark_arrow_schema(schema)`` exactly, as the Python Data Source contract demands,
with column-wise casts only (no per-row Python).

Writing
-------
``typed_payload`` drops the reserved routing/metadata columns of a Spark batch bound for a
typed topic (bytes topics are shaped by the producer, which takes ``key``/``value`` as
binary or string, as Spark's Kafka sink does).
"""
from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_log.errors import InvalidConfigError, SchemaMismatchError

__all__ = [
    "METADATA_FIELDS",
    "HEADERS_FIELD",
    "bytes_source_schema",
    "typed_source_schema",
    "project",
    "data_columns",
    "spark_arrow_schema",
    "to_spark_batch",
    "typed_payload",
    "ROUTING_COLUMNS",
]

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
HEADERS_FIELD = StructField("headers", HEADERS_TYPE)
METADATA_FIELDS = (
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
)
_BYTES_FIELDS = (
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    *METADATA_FIELDS,
    StructField("timestampType", IntegerType()),
)
# Columns of a Spark batch that steer a write rather than being stored.
ROUTING_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestampType")

def bytes_source_schema(*, include_headers: bool) -> StructType:
    """The Kafka-source schema of a bytes topic (see module docstring)."""
    fields = list(_BYTES_FIELDS) + ([HEADERS_FIELD] if include_headers else [])
    return StructType(fields)


def _widen(arrow_type: pa.DataType) -> pa.DataType:
    """An Arrow type Spark can represent, for types Spark has no twin of."""
    widen: dict[pa.DataType, pa.DataType] = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.decimal128(20, 0)}
    if arrow_type in widen:
        return widen[arrow_type]
    if pa.types.is_dictionary(arrow_type):
        return _widen(arrow_type.value_type)
    if pa.types.is_large_string(arrow_type) or pa.types.is_string_view(arrow_type):
        return pa.string()
    if pa.types.is_large_binary(arrow_type) or pa.types.is_binary_view(arrow_type):
        return pa.binary()
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return pa.list_(arrow_type.value_field.with_type(_widen(arrow_type.value_type)))
    if pa.types.is_struct(arrow_type):
        return pa.struct([f.with_type(_widen(f.type)) for f in arrow_type])
    if pa.types.is_map(arrow_type):
        # pyarrow-stubs 20 takes only a DataType as the item; pyarrow takes a Field too (keeps its name and nullability)
        mapped: pa.DataType = pa.map_(  # type: ignore[call-overload]
            _widen(arrow_type.key_type), arrow_type.item_field.with_type(_widen(arrow_type.item_type)))
        return mapped
    return arrow_type


def typed_source_schema(topic_schema: pa.Schema) -> StructType:
    """Spark schema of a typed topic: its columns, then topic, partition, offset, timestamp.

    Raises ``SchemaMismatchError`` naming the column whose type Spark cannot hold.
    """
    from pyspark.sql.pandas.types import from_arrow_type

    fields = []
    for field in topic_schema:
        try:
            spark_type: DataType = from_arrow_type(_widen(field.type))
        except Exception as exc:  # pyspark raises several kinds for unsupported types
            raise SchemaMismatchError(f"column '{field.name}' has type {field.type}, which Spark cannot read: {exc}") from None
        fields.append(StructField(field.name, spark_type, field.nullable))
    return StructType(fields + list(METADATA_FIELDS))


def project(schema: StructType, columns: Sequence[str] | None) -> StructType:
    """``schema`` restricted to ``columns`` in that order; unknown names raise
    ``InvalidConfigError`` naming option ``columns`` and listing what exists."""
    if columns is None:
        return schema
    by_name = {f.name: f for f in schema.fields}
    unknown = [c for c in columns if c not in by_name]
    if unknown:
        raise InvalidConfigError(
            f"option 'columns' names unknown columns {unknown}; the topic has {schema.fieldNames()}", key="columns"
        )
    return StructType([by_name[c] for c in columns])


def data_columns(schema: StructType, *, bytes_topic: bool) -> list[str]:
    """Stored columns the brokers must send to produce ``schema`` (projection pushdown)."""
    names = schema.fieldNames()
    if bytes_topic:
        return [c for c in ("key", "value", "headers") if c in names]
    meta = {f.name for f in METADATA_FIELDS}
    return [c for c in names if c not in meta]


def spark_arrow_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark expects from ``read()`` for ``schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def _column(batch: pa.RecordBatch, name: str, target: pa.DataType, *, timestamp_type: int) -> pa.Array[Any]:
    if name == "timestampType":
        return pa.nulls(batch.num_rows, pa.int32()).fill_null(timestamp_type)
    column = batch.column(name)
    if name == "timestamp" and pa.types.is_integer(column.type):
        column = column.cast(pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    if column.type != target:
        column = column.cast(target)
    return column


def to_spark_batch(batch: pa.RecordBatch, target: pa.Schema, *, timestamp_type: int = 0) -> pa.RecordBatch:
    """``batch`` (fetched: data columns + topic, partition, offset, timestamp) shaped to ``target``.

    Columns are selected by name and cast column-wise; ``timestampType`` is filled with
    ``timestamp_type``.  A missing column raises ``SchemaMismatchError``.
    """
    names = set(batch.schema.names)
    arrays = []
    for field in target:
        if field.name != "timestampType" and field.name not in names:
            raise SchemaMismatchError(f"a fetched batch lacks column '{field.name}' (it has {batch.schema.names})")
        arrays.append(_column(batch, field.name, field.type, timestamp_type=timestamp_type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def typed_payload(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` without the routing/metadata columns (topic, partition, offset, timestamp, timestampType)."""
    keep = [i for i, name in enumerate(batch.schema.names) if name not in ROUTING_COLUMNS]
    return batch.select(keep)
