"""What compaction means for a record: its key and whether it is a tombstone.

Shared by the broker cleaner (``brokers/log/cleaner``), the Spark compaction job
(``jobs/compact.py``) and the controller's checks, so that every one of them agrees on
which records are "the same key" and which records delete a key.

The compaction key (``record_keys``):

- bytes topics: the ``key`` column, byte for byte.  A record whose key is null has no key:
  compaction never removes it (topics with ``cleanup.policy`` naming ``compact`` refuse
  such records at produce time, as Kafka does; older records may still hold one).
- typed topics: the topic's key columns, encoded so that different keys never encode the
  same: for each key column in order, a 4-byte little-endian signed length (-1 for null)
  then the value's bytes: binary and string columns as stored (UTF-8), other types as
  Arrow's text of the value (integers, booleans, decimals, floats) or of its integer
  representation (dates, times, timestamps, durations: the count of their unit).  The key
  columns are first cast to the topic's schema (``schema``), so a Spark DataFrame whose
  timestamps came back as microseconds encodes as the topic's milliseconds.

A tombstone (``tombstones``) deletes its key: once compaction keeps it as the latest record
of its key and its timestamp is older than ``delete.retention.ms`` (the cleaning plan's
horizon), it is removed too.

- bytes topics: a record whose ``value`` is null (Kafka's rule).
- typed topics: a record whose ``tombstone.column`` (a boolean column of the topic named
  by that topic setting) is true; without the setting a typed topic has no tombstones.
  A Spark DataFrame writes one by setting that column (the sink option
  ``tombstoneColumn`` checks the DataFrame agrees with the topic); readers see the column
  like any other.

``check_settings`` refuses (``InvalidConfigError``) settings that compaction could not
honour: ``compact`` on a typed topic without key columns, a ``tombstone.column`` on a
bytes topic, or one that is not a boolean non-key column of the typed topic's schema.

Thread-safety: pure functions.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from .config import TopicConfig
from .errors import InvalidConfigError, SchemaMismatchError

__all__ = ["check_settings", "record_keys", "tombstones", "has_keys"]

_NULL_LENGTH = -1


def check_settings(*, kind: str, key_columns: Sequence[str], schema: pa.Schema | None, config: TopicConfig) -> None:
    """Refuse compaction settings that cannot work for this topic (module docstring).
    ``schema`` None: a typed topic without a schema yet (the column is checked when the
    first schema is registered)."""
    if config.remote_storage_enable and config.compact:  # here, not in TopicConfig: a stored config still loads
        raise InvalidConfigError(
            f"a tiered topic cannot be compacted (cleanup.policy={config.cleanup_policy!r}): the Delta tier is never "
            "compacted, so a key deleted on the brokers would come back from it (Kafka refuses it too); use "
            "cleanup.policy=delete", key="remote.storage.enable")
    column = config.tombstone_column
    if kind == "bytes":
        if column:
            raise InvalidConfigError("tombstone.column applies to typed topics; a bytes topic's tombstone is a "
                                     "record with a null value", key="tombstone.column")
        return
    if config.compact and not key_columns:
        raise InvalidConfigError("cleanup.policy=compact keeps the latest record per key: a typed topic needs key "
                                 "columns to be compacted (create it with key columns)", key="cleanup.policy")
    if not column or schema is None:
        return
    if column in key_columns:
        raise InvalidConfigError(f"tombstone.column {column!r} is a key column; name a boolean value column",
                                 key="tombstone.column")
    index = schema.get_field_index(column)
    if index < 0:
        raise InvalidConfigError(f"tombstone.column {column!r} is not a column of the topic "
                                 f"(columns: {', '.join(schema.names)})", key="tombstone.column")
    if not pa.types.is_boolean(schema.field(index).type):
        raise InvalidConfigError(f"tombstone.column {column!r} must be a boolean column, it is "
                                 f"{schema.field(index).type}", key="tombstone.column")


def _column(data: pa.RecordBatch | pa.Table, name: str) -> pa.Array[Any]:
    column = data.column(name)
    if isinstance(column, pa.ChunkedArray):
        combined: pa.Array[Any] = column.combine_chunks()
        return combined
    return column


def _as_bytes(array: pa.Array[Any]) -> pa.Array[Any]:
    """The bytes of each value of a key column (module docstring), nulls kept."""
    kind = array.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return array.cast(pa.binary())
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return array.cast(pa.string()).cast(pa.binary())
    if pa.types.is_fixed_size_binary(kind):
        return array.cast(pa.binary())
    if pa.types.is_temporal(kind):
        width = pa.int32() if kind.bit_width == 32 else pa.int64()
        return array.cast(width).cast(pa.string()).cast(pa.binary())
    try:
        return array.cast(pa.string()).cast(pa.binary())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise SchemaMismatchError(f"a key column of type {kind} cannot be a compaction key") from None


def _prefixed(values: pa.Array[Any]) -> list[pa.Array[Any]]:
    """``[length prefixes, values with nulls as b""]`` of one encoded key column."""
    # pc.call_function: pyarrow-stubs 20 types binary_length for concrete array classes only
    measured: pa.Array[Any] = pc.call_function("binary_length", [values])
    lengths = measured.fill_null(_NULL_LENGTH).to_numpy(zero_copy_only=False).astype("<i4")
    prefix = pa.FixedSizeBinaryArray.from_buffers(pa.binary(4), len(values), [None, pa.py_buffer(lengths.tobytes())])
    return [prefix.cast(pa.binary()), values.fill_null(b"")]


def record_keys(data: pa.RecordBatch | pa.Table, *, kind: str, key_columns: Sequence[str] = (),
                schema: pa.Schema | None = None) -> pa.Array[Any]:
    """The compaction key of every row (binary; null where a bytes record has no key).

    ``data`` holds the topic's columns (at least the key columns); ``schema`` is the
    topic's (typed topics: key columns are cast to its types first).  Raises
    ``SchemaMismatchError`` when a key column is missing or cannot be encoded."""
    if kind == "bytes":
        return _column(data, "key").cast(pa.binary())
    if not key_columns:
        raise SchemaMismatchError("a typed topic without key columns has no compaction key")
    parts: list[pa.Array[Any]] = []
    for name in key_columns:
        if name not in data.schema.names:
            raise SchemaMismatchError(f"key column {name!r} is missing")
        column = _column(data, name)
        if schema is not None and schema.get_field_index(name) >= 0:
            target = schema.field(name).type
            if not column.type.equals(target):
                column = column.cast(target)
        parts.extend(_prefixed(_as_bytes(column)))
    if not len(data):
        return pa.nulls(0, pa.binary())
    joined: pa.Array[Any] = pc.call_function("binary_join_element_wise", [*parts, b""])
    return joined


def has_keys(keys: pa.Array[Any]) -> npt.NDArray[np.bool_]:
    """Which rows have a key (a bytes record with a null key has none)."""
    if not keys.null_count:
        return np.ones(len(keys), dtype=bool)
    return np.asarray(keys.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def tombstones(data: pa.RecordBatch | pa.Table, *, kind: str, tombstone_column: str = "") -> npt.NDArray[np.bool_]:
    """Which rows are tombstones (module docstring), as a numpy bool array."""
    n = len(data)
    if kind == "bytes":
        values = _column(data, "value")
        if not values.null_count:
            return np.zeros(n, dtype=bool)
        return np.asarray(values.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if not tombstone_column or tombstone_column not in data.schema.names:
        return np.zeros(n, dtype=bool)
    marks = _column(data, tombstone_column)
    if not pa.types.is_boolean(marks.type):
        return np.zeros(n, dtype=bool)
    return np.asarray(marks.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
