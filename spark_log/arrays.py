"""Arrow arrays built from their buffers, without ``pa.array``.

``pa.array`` on anything but an Arrow object first asks pyarrow's pandas shim whether the
input is a pandas object, and that imports pandas (about 300 modules: 0.3 s of CPU, more on
a loaded machine) the first time in a process.  A client that never touches pandas paid it
on its first ``send`` and its first ``poll_arrow``, and every ``spark-log produce`` paid it.
These builders make the same arrays from their buffers (checked equal to ``pa.array``'s in
the tests) and leave pandas alone.

Thread-safety: pure functions.
"""
from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["to_numpy", "repeated_string", "repeated_int32", "binary_array", "int64_array", "int32_array", "int16_array", "bool_array", "timestamp_ms_array"]

_BINARY = pa.binary()
_INT64 = pa.int64()
_INT32 = pa.int32()
_INT16 = pa.int16()
_BOOL = pa.bool_()
_TIMESTAMP_MS = pa.timestamp("ms")
_MAX_BINARY_BYTES = 2**31 - 1


def _buffer(array: npt.NDArray[Any]) -> pa.Buffer:
    return pa.py_buffer(array.data)


def binary_array(values: Sequence[bytes | None]) -> pa.Array[Any]:
    """``pa.array(values, pa.binary())`` for a list of ``bytes`` and ``None``; other input
    (str, ...) goes to ``pa.array``, which converts or refuses it as before.  Once pandas
    is loaded (by the user, or Spark) ``pa.array`` costs nothing more and is faster."""
    if "pandas" in sys.modules:
        return pa.array(values, _BINARY)
    return binary_from_buffers(values)


def binary_from_buffers(values: Sequence[bytes | None]) -> pa.Array[Any]:
    """``binary_array``'s own builder (module docstring)."""
    n = len(values)
    valid = None
    present: Sequence[Any] = values
    try:
        try:
            data = b"".join(values)  # type: ignore[arg-type]
        except TypeError:  # None among them (tombstones), or another type
            valid = np.array(values, dtype=object) != None  # noqa: E711 (elementwise, not identity)
            present = [v for v in values if v is not None]
            data = b"".join(present)
        lengths = np.fromiter(map(len, present), np.int64, len(present))
    except TypeError:  # str or another type: pa.array's conversion and errors
        return pa.array(values, _BINARY)
    if len(data) != int(lengths.sum()) or len(data) > _MAX_BINARY_BYTES:
        return pa.array(values, _BINARY)  # views of wider items; too large: pa.array decides
    nulls = 0
    if valid is not None:
        nulls = n - len(present)
        full = np.zeros(n, np.int64)
        full[valid] = lengths
        lengths = full
    offsets = np.zeros(n + 1, np.int32)
    if n:
        np.cumsum(lengths, out=offsets[1:], dtype=np.int32)
    validity = None if valid is None else _buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(_BINARY, n, [validity, _buffer(offsets), pa.py_buffer(data)], null_count=nulls)


def _numeric(values: npt.ArrayLike, dtype: type[np.generic], type_: pa.DataType) -> pa.Array[Any]:
    array = np.ascontiguousarray(values, dtype=dtype)
    return pa.Array.from_buffers(type_, len(array), [None, _buffer(array)], null_count=0)


def int64_array(values: npt.ArrayLike) -> pa.Array[Any]:
    """``pa.array(values, pa.int64())`` for numbers (no nulls)."""
    return _numeric(values, np.int64, _INT64)


def int16_array(values: npt.ArrayLike) -> pa.Array[Any]:
    """``pa.array(values, pa.int16())`` for numbers (no nulls)."""
    return _numeric(values, np.int16, _INT16)


def int32_array(values: npt.ArrayLike) -> pa.Array[Any]:
    """``pa.array(values, pa.int32())`` for numbers (no nulls)."""
    return _numeric(values, np.int32, _INT32)


def timestamp_ms_array(values: npt.ArrayLike) -> pa.Array[Any]:
    """Milliseconds since the epoch as ``timestamp[ms]`` (no nulls)."""
    return _numeric(values, np.int64, _TIMESTAMP_MS)


def bool_array(values: npt.ArrayLike) -> pa.Array[Any]:
    """``pa.array(values, pa.bool_())`` for booleans (no nulls)."""
    flags = np.asarray(values, dtype=np.bool_)
    return pa.Array.from_buffers(_BOOL, len(flags), [None, _buffer(np.packbits(flags, bitorder="little"))],
                                 null_count=0)


_NUMPY_OF: dict[pa.DataType, Any] = {
    pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
    pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
    pa.float32(): np.float32, pa.float64(): np.float64,
}


def to_numpy(array: pa.Array[Any] | pa.ChunkedArray[Any]) -> npt.NDArray[Any]:
    """``array.to_numpy(zero_copy_only=False)`` without pandas for the arrays a client reads
    (numbers and booleans without nulls; a read-only view where Arrow's would be one);
    anything else goes to Arrow's conversion."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    dtype = _NUMPY_OF.get(array.type)
    buffers = array.buffers()
    if array.null_count == 0 and len(buffers) == 2 and buffers[1] is not None:
        n, at = len(array), array.offset
        if dtype is not None:
            return np.frombuffer(memoryview(buffers[1]), dtype=dtype, count=n, offset=at * np.dtype(dtype).itemsize)
        if array.type == _BOOL:
            bits = np.frombuffer(memoryview(buffers[1]), dtype=np.uint8, count=(at + n + 7) // 8)
            return np.unpackbits(bits, bitorder="little", count=at + n)[at:].astype(np.bool_)
    return np.asarray(array.to_numpy(zero_copy_only=False))


def repeated_string(text: str, n: int) -> pa.Array[Any]:
    """``text`` ``n`` times as a string array (a topic column)."""
    data = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(pa.string(), n, [None, _buffer(offsets), pa.py_buffer(data * n)], null_count=0)


def repeated_int32(value: int, n: int) -> pa.Array[Any]:
    """``value`` ``n`` times as an int32 array (a partition column)."""
    return _numeric(np.full(n, value, dtype=np.int32), np.int32, _INT32)
