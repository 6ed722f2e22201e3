"""Choosing a partition for a record: Kafka's murmur2 key hash, scalar and vectorised.

Contract (stable across processes, platforms and spark-log versions; tests pin the values):

- A record with a key goes to ``(murmur2(key_bytes) & 0x7fffffff) % num_partitions``, the
  same function and seed as Kafka's default partitioner, so a bytes key lands in the same
  partition number as it would in Kafka with the same partition count.
- Key bytes: ``bytes`` as given; ``str`` as UTF-8.  For typed topics with ``key_columns``
  every key column is cast to its text (UTF-8; binary stays binary), nulls become the empty
  string, and several columns are joined with ``\\x1f`` before hashing.
- A record without a key (``None``, or every key column null) uses sticky partitioning: one
  partition is used until the caller calls ``StickyPartitioner.next(...)`` (the producer does
  so when it ships a batch), so small records fill whole batches instead of being spread thin.

``murmur2_array`` hashes a whole Arrow binary/string array with numpy, without a Python loop
over rows: it walks 4-byte blocks column-wise, so its cost is (rows x longest key / 4) numpy
element operations.
"""
from __future__ import annotations

import random
import threading
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from .arrays import binary_array, to_numpy

__all__ = ["murmur2", "murmur2_array", "partition_for_key", "partitions_for_keys", "key_array", "StickyPartitioner"]

_KEY_SEPARATOR = binary_array([b"\x1f"])[0]  # scalars made from arrays: pa.scalar imports pandas
_EMPTY_KEY = binary_array([b""])[0]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit int, as Java returns it."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    blocks = length // 4
    for i in range(blocks):
        k = int.from_bytes(data[4 * i: 4 * i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length & 3
    base = blocks * 4
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes | str, num_partitions: int) -> int:
    data = key.encode() if isinstance(key, str) else bytes(key)
    return (murmur2(data) & 0x7FFFFFFF) % num_partitions


def murmur2_array(keys: pa.Array[Any] | pa.ChunkedArray[Any]) -> npt.NDArray[np.uint32]:
    """murmur2 of every value of a binary/string array as uint32 (nulls hash as b"")."""
    array: pa.Array[Any]
    if isinstance(keys, pa.ChunkedArray):
        # pyarrow-stubs 20 types ChunkedArray.chunk(i) as a ChunkedArray; it is an Array
        array = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)  # type: ignore[assignment]
    else:
        array = keys
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        array = array.cast(pa.large_binary() if pa.types.is_large_string(array.type) else pa.binary())
    if not (pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)):
        raise TypeError(f"murmur2_array needs binary or string keys, got {array.type}")
    if array.null_count:
        array = array.fill_null(b"")
    n = len(array)
    offset_type = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    value_offsets, values = array.buffers()[1:3]
    assert value_offsets is not None  # a binary array always has its offsets buffer
    offsets = np.frombuffer(memoryview(value_offsets), dtype=offset_type)[array.offset: array.offset + n + 1].astype(np.int64)
    data = np.frombuffer(memoryview(values), dtype=np.uint8) if values is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1]
    lengths = (offsets[1:] - starts).astype(np.int64)
    m = np.uint32(_M)
    h = (np.uint32(_SEED) ^ lengths.astype(np.uint32)).astype(np.uint32)
    nblocks = lengths // 4
    padded = np.concatenate([data, np.zeros(4, np.uint8)])
    with np.errstate(over="ignore"):
        for j in range(int(nblocks.max()) if n else 0):
            live = nblocks > j
            pos = np.where(live, starts + 4 * j, 0)
            k = (padded[pos].astype(np.uint32) | (padded[pos + 1].astype(np.uint32) << 8)
                 | (padded[pos + 2].astype(np.uint32) << 16) | (padded[pos + 3].astype(np.uint32) << 24))
            k = k * m
            k ^= k >> np.uint32(24)
            k = k * m
            mixed = (h * m) ^ k
            h = np.where(live, mixed, h)
        tail = lengths & 3
        base = starts + nblocks * 4
        b0 = padded[np.where(tail >= 1, base, 0)].astype(np.uint32)
        b1 = padded[np.where(tail >= 2, base + 1, 0)].astype(np.uint32)
        b2 = padded[np.where(tail >= 3, base + 2, 0)].astype(np.uint32)
        h = np.where(tail == 3, h ^ (b2 << np.uint32(16)), h)
        h = np.where(tail >= 2, h ^ (b1 << np.uint32(8)), h)
        h = np.where(tail >= 1, (h ^ b0) * m, h)
        h ^= h >> np.uint32(13)
        h = h * m
        h ^= h >> np.uint32(15)
    return h.astype(np.uint32)


def key_array(table: pa.Table | pa.RecordBatch, key_columns: list[str] | tuple[str, ...]) -> tuple[pa.Array[Any], npt.NDArray[np.bool_]]:
    """The hashable key bytes of every row and a boolean mask of rows that have a key."""
    columns: list[pa.Array[Any]] = []
    present = np.zeros(table.num_rows, dtype=bool)
    for name in key_columns:
        found = table.column(name)
        column: pa.Array[Any] = found.combine_chunks() if isinstance(found, pa.ChunkedArray) else found
        present |= to_numpy(column.is_valid())
        if not (pa.types.is_binary(column.type) or pa.types.is_string(column.type)
                or pa.types.is_large_binary(column.type) or pa.types.is_large_string(column.type)):
            column = column.cast(pa.string())
        column = column.cast(pa.binary()) if pa.types.is_string(column.type) else column
        columns.append(column.fill_null(_EMPTY_KEY.cast(column.type)) if column.null_count else column)
    if len(columns) == 1:
        return columns[0], present
    joined: pa.Array[Any] = pc.binary_join_element_wise(*[c.cast(pa.binary()) for c in columns], _KEY_SEPARATOR)
    return joined, present


def partitions_for_keys(keys: pa.Array[Any], num_partitions: int) -> npt.NDArray[np.int32]:
    """Partition of every key (int32 array), without a per-row Python loop."""
    hashed = murmur2_array(keys).astype(np.int64) & 0x7FFFFFFF
    return (hashed % num_partitions).astype(np.int32)


class StickyPartitioner:
    """The partition for records without a key: one per topic until ``next`` is called.

    Thread-safe.  ``rng`` is injected so tests are deterministic.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._current: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int) -> int:
        current = self._current.get(topic)  # the per-record path: a dict read, atomic, no lock
        if current is not None and current < num_partitions:
            return current
        with self._lock:
            current = self._current.get(topic)
            if current is None or current >= num_partitions:
                current = self._rng.randrange(num_partitions)
                self._current[topic] = current
            return current

    def next(self, topic: str, num_partitions: int, previous: int | None = None) -> int:
        """Move ``topic`` to another partition (only if it is still on ``previous``, when given)."""
        with self._lock:
            current = self._current.get(topic)
            if previous is not None and current is not None and current != previous:
                return current
            if num_partitions <= 1:
                choice = 0
            else:
                choice = self._rng.randrange(num_partitions - 1)
                if current is not None and choice >= current:
                    choice += 1
            self._current[topic] = choice
            return choice
