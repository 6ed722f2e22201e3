"""A 64-bit hash of every value of a binary array, vectorised with numpy (no per-row Python).

The offset map looks keys up by one of these hashes (a sorted array and
``numpy.searchsorted``, built on the first lookup, instead of a hash table rebuilt for every
frame), comparing the keys themselves on every hit; its folds group the keys themselves.

The hash (not a contract: only the cleaner's memory uses it): ``h = seed' ^ length``; for
every 8-byte little-endian block ``b`` (the last one zero-padded) ``h = mix(h ^ mix(b +
block index))``; then ``mix(h)``, where ``mix`` is splitmix64's finaliser.  The cost is
(rows x longest key / 8) numpy element operations.  Nulls hash as the empty value.

Thread-safety: pure function.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["hash64"]

_SEED = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _blocks(data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64],
            lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """Every value zero-padded to a multiple of 8 bytes, as rows of little-endian uint64."""
    n = len(lengths)
    width = max(8, int((int(lengths.max()) + 7) // 8) * 8)
    if n and int(lengths.min()) == int(lengths.max()) and bool(np.all(np.diff(starts) == lengths[0])):
        size = int(lengths[0])  # equal lengths, back to back (the common case): no scatter
        matrix = np.zeros((n, width), dtype=np.uint8)
        matrix[:, :size] = data[int(starts[0]): int(starts[0]) + n * size].reshape(n, size)
    else:
        matrix = np.zeros((n, width), dtype=np.uint8)
        rows = np.repeat(np.arange(n), lengths)
        positions = np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        matrix[rows, positions] = data[np.repeat(starts, lengths) + positions]
    return matrix.view("<u8")


def hash64(keys: pa.Array[Any], seed: int = 0) -> npt.NDArray[np.uint64]:
    """The hash of every value of a binary (or large binary) array; ``seed`` picks one of a
    family of independent hashes (two seeds: a 128-bit hash)."""
    array = keys.fill_null(b"") if keys.null_count else keys
    if not (pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)):
        array = array.cast(pa.binary())
    n = len(array)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offset_type = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    offsets_buffer, data_buffer = array.buffers()[1:3]
    assert offsets_buffer is not None
    raw = np.frombuffer(memoryview(offsets_buffer), dtype=offset_type)[array.offset: array.offset + n + 1]
    offsets: npt.NDArray[np.int64] = np.asarray(raw, dtype=np.int64)
    data: npt.NDArray[np.uint8] = (np.frombuffer(memoryview(data_buffer), dtype=np.uint8) if data_buffer is not None
                                   else np.zeros(0, np.uint8))
    starts: npt.NDArray[np.int64] = offsets[:-1]
    lengths: npt.NDArray[np.int64] = offsets[1:] - starts
    blocks = _blocks(data, starts, lengths)
    start = np.uint64((int(_SEED) + seed * int(_M1)) & 0xFFFFFFFFFFFFFFFF)
    h = start ^ lengths.astype(np.uint64)
    with np.errstate(over="ignore"):
        for j in range(blocks.shape[1]):
            mixed = _mix(h ^ _mix(blocks[:, j] + np.uint64(j)))
            h = np.where(lengths > 8 * j, mixed, h) if j else mixed
        return _mix(h)
