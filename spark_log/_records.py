"""Arrow shaping shared by the producer and the consumer (no I/O).

- ``bytes_batch``: Python lists of keys/values/headers/timestamps -> a bytes-topic batch;
  ``bytes_ipc_message``: the same lists -> that batch's IPC message (``bytes_message`` writes
  small ones directly).
- ``conform``: a user's table or batch -> the topic's current schema, or
  ``SchemaMismatchError`` naming the difference (bytes topics accept ``value`` alone, str
  for binary, and fill ``key``/``headers``/``timestamp``).
- ``widen``: a batch written with an older compatible schema, read as the current one.
- ``add_reserved_columns``: decoded frames -> consumer batches with the reserved columns
  ``topic``, ``partition``, ``offset``, ``timestamp`` appended.
- ``with_append_time`` (``frame``'s, re-exported): a bytes-topic batch of a ``LogAppendTime``
  frame with the frame's append time as every record's ``timestamp``.

The bytes-topic layout (``BYTES_SCHEMA``, ``HEADERS_TYPE``) and the schema codecs are the
kernel's: ``spark_log.schemas``.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence, cast

import numpy as np
import pyarrow as pa

from . import bytes_message
from .arrays import binary_array, bool_array, int32_array, repeated_int32, repeated_string, timestamp_ms_array
from .errors import SchemaMismatchError
from .frame import Codec, ipc_message, with_append_time
from .schemas import BYTES_SCHEMA, HEADERS_TYPE

__all__ = [
    "BYTES_SCHEMA",
    "HEADERS_TYPE",
    "bytes_batch",
    "conform",
    "widen",
    "add_reserved_columns",
    "with_append_time",
    "bytes_ipc_message",
]


def null_column(n: int, type_: Any) -> pa.Array[Any]:
    """``n`` nulls of ``type_`` whose buffers hold nothing more than ``n`` rows need.

    ``pa.nulls`` of a list type allocates its (empty) child's buffers for ``n`` rows, and
    Arrow IPC writes a child's buffers whole, also for a slice: a frame cut from a large
    ``send_batch`` table carried the whole table's null ``headers`` child, 233 bytes a record
    beside 100-byte values.  Here the child is truly empty, so a frame holds 4 bytes a
    record (the list offsets) for absent headers."""
    if pa.types.is_list(type_):
        mask = bool_array(np.ones(n, dtype=np.bool_))
        lists: Any = pa.ListArray  # pyarrow's stubs know no overload with type= and mask= together
        return cast("pa.Array[Any]", lists.from_arrays(int32_array(np.zeros(n + 1, dtype=np.int32)),
                                                       pa.nulls(0, type_.value_type), type=type_, mask=mask))
    return cast("pa.Array[Any]", pa.nulls(n, type_))


_NULL_HEADERS: list[pa.Array[Any]] = []  # one all-null headers column, sliced (from 0) for shorter ones


def null_headers(n: int) -> pa.Array[Any]:
    """``n`` null headers, a slice of a cached column (no buffers to allocate per batch)."""
    cached = _NULL_HEADERS[0] if _NULL_HEADERS else None
    if cached is None or len(cached) < n:
        cached = null_column(max(n, 1 << 16), HEADERS_TYPE)
        _NULL_HEADERS[:] = [cached]
    return cached.slice(0, n) if len(cached) != n else cached


def _headers_array(headers: list[Any] | None, n: int) -> pa.Array[Any]:
    if headers is None or headers.count(None) == len(headers):
        return null_headers(n)
    rows: list[list[dict[str, Any]] | None] = []
    for h in headers:
        if h is None:
            rows.append(None)
            continue
        items = h.items() if isinstance(h, dict) else h
        rows.append([{"key": str(k), "value": v.encode() if isinstance(v, str) else v} for k, v in items])
    return pa.array(rows, HEADERS_TYPE)


_BINARY = pa.binary()


def bytes_batch(
    keys: list[bytes | None] | None,
    values: list[bytes | None],
    headers: list[Any] | None,
    timestamps: Sequence[int],
    schema: pa.Schema = BYTES_SCHEMA,
) -> pa.RecordBatch:
    """A bytes-topic batch from per-record Python values (timestamps in ms); ``keys`` or
    ``headers`` None: every record has none."""
    n = len(values)
    columns = {  # all-null keys are the common case: pa.nulls is O(1), converting Nones is not
        "key": pa.nulls(n, _BINARY) if keys is None or keys.count(None) == n else binary_array(keys),
        "value": binary_array(values),
        "headers": _headers_array(headers, n),
        "timestamp": timestamp_ms_array(timestamps),
    }
    if schema is BYTES_SCHEMA:
        return pa.RecordBatch.from_arrays([columns["key"], columns["value"], columns["headers"],
                                           columns["timestamp"]], schema=schema)
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


def bytes_ipc_message(keys: list[bytes | None] | None, values: list[bytes | None], headers: list[Any] | None,
                      timestamps: Sequence[int], schema: pa.Schema, codec: Codec) -> "pa.Buffer | bytes":
    """The IPC message of ``bytes_batch(keys, values, headers, timestamps, schema)`` compressed
    with ``codec``: written directly by ``bytes_message`` for a small batch of the bytes layout
    without headers (the same bytes, a fraction of the cost), else through pyarrow."""
    if headers is None and schema is BYTES_SCHEMA:
        direct = bytes_message.encode(keys, values, timestamps, codec)
        if direct is not None:
            return direct
    return ipc_message(bytes_batch(keys, values, headers, timestamps, schema), codec)


def _as_table(data: pa.Table | pa.RecordBatch) -> pa.Table:
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        return data
    raise SchemaMismatchError(f"expected a pyarrow Table or RecordBatch, got {type(data).__name__}")


def _binary(column: pa.ChunkedArray[Any], name: str) -> pa.ChunkedArray[Any]:
    if pa.types.is_binary(column.type):
        return column
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type):
        return column.cast(pa.binary())
    if pa.types.is_null(column.type):
        return column.cast(pa.binary())
    raise SchemaMismatchError(f"column {name!r} must be binary or string, got {column.type}")


def conform(data: pa.Table | pa.RecordBatch, schema: pa.Schema, *, kind: str, now_ms: int,
            extra: Iterable[str] = ("partition", "topic")) -> pa.Table:
    """``data`` as a table with exactly ``schema`` (see the module docstring).

    Columns named in ``extra`` (routing columns such as ``partition``) are dropped, not
    refused.  Raises ``SchemaMismatchError`` for anything else that does not fit.
    """
    table = _as_table(data)
    extra = set(extra)
    names = [n for n in table.column_names if n not in extra]
    if kind == "bytes":
        unknown = sorted(set(names) - set(schema.names))
        if unknown:
            raise SchemaMismatchError(
                f"a bytes topic takes columns key, value, headers, timestamp; unexpected {unknown}")
        if "value" not in names:
            raise SchemaMismatchError("a bytes topic needs a 'value' column")
        n = table.num_rows
        arrays = []
        for field in schema:
            if field.name in names:
                column = table.column(field.name)
                if field.name in ("key", "value"):
                    column = _binary(column, field.name)
                elif field.name == "timestamp":
                    if pa.types.is_integer(column.type):
                        column = column.cast(pa.int64()).cast(pa.timestamp("ms"))
                    elif pa.types.is_timestamp(column.type):
                        column = column.cast(pa.timestamp("ms"))
                    else:
                        raise SchemaMismatchError(f"column 'timestamp' must be a timestamp or int64 ms, got {column.type}")
                    if column.null_count:
                        column = column.fill_null(pa.scalar(now_ms, pa.timestamp("ms")))
                elif field.name == "headers" and not column.type.equals(field.type):
                    try:
                        column = column.cast(field.type)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                        raise SchemaMismatchError(f"column 'headers' must be {field.type}, got {column.type}") from None
            elif field.name == "timestamp":
                column = pa.chunked_array([timestamp_ms_array(np.full(n, now_ms, dtype=np.int64))])
            else:
                column = pa.chunked_array([null_column(n, field.type)])
            arrays.append(column)
        return pa.Table.from_arrays(arrays, schema=schema)
    missing = [f.name for f in schema if f.name not in names]
    unknown = [n for n in names if n not in schema.names]
    if missing or unknown:
        raise SchemaMismatchError(
            f"columns do not match the topic's schema: missing {missing}, unexpected {unknown} "
            f"(topic schema: {', '.join(f'{f.name}: {f.type}' for f in schema)})")
    arrays = []
    for field in schema:
        column = table.column(field.name)
        if not column.type.equals(field.type):
            raise SchemaMismatchError(f"column {field.name!r} has type {column.type}, the topic's schema says {field.type}")
        if not field.nullable and column.null_count:
            raise SchemaMismatchError(f"column {field.name!r} is not nullable but holds {column.null_count} nulls")
        arrays.append(column)
    return pa.Table.from_arrays(arrays, schema=schema)


def widen(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A batch written with an older compatible schema, read as ``schema`` (new nullable
    columns filled with nulls)."""
    if batch.schema.equals(schema, check_metadata=False):
        return batch
    arrays = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        arrays.append(batch.column(index) if index >= 0 else pa.nulls(batch.num_rows, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def add_reserved_columns(batch: pa.RecordBatch, *, topic: str, partition: int,
                         offsets: pa.Array[Any], timestamps: pa.Array[Any] | None) -> pa.RecordBatch:
    """``batch`` plus ``topic``, ``partition``, ``offset`` and (unless present) ``timestamp``."""
    n = batch.num_rows
    names = list(batch.schema.names)
    arrays = list(batch.columns)
    if "timestamp" not in names and timestamps is not None:
        names.append("timestamp")
        arrays.append(timestamps)
    names += ["topic", "partition", "offset"]
    arrays += [*_topic_and_partition(topic, partition, n), offsets]
    return pa.RecordBatch.from_arrays(arrays, names=names)


_SMALL_BATCH = 64  # rows of a batch whose topic and partition columns are kept for reuse
_TOPIC_PARTITION: dict[tuple[str, int, int], tuple[pa.Array[Any], pa.Array[Any]]] = {}


def _topic_and_partition(topic: str, partition: int, n: int) -> tuple[pa.Array[Any], pa.Array[Any]]:
    """The ``topic`` and ``partition`` columns of an ``n``-row batch.  A consumer at a
    moderate rate decodes batches of a few rows, each finding pyarrow's code cold (about
    50 us per column then, 4 us in a loop): small ones are built once and shared (Arrow
    arrays are immutable), at most a few thousand of them."""
    if n > _SMALL_BATCH:
        return repeated_string(topic, n), repeated_int32(partition, n)
    key = (topic, partition, n)
    found = _TOPIC_PARTITION.get(key)
    if found is None:
        if len(_TOPIC_PARTITION) >= 4096:
            _TOPIC_PARTITION.clear()
        found = _TOPIC_PARTITION[key] = (repeated_string(topic, n), repeated_int32(partition, n))
    return found
