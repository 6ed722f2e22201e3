"""Byte arrays their caller fills, made without zeroing them first.

``bytearray(n)`` writes ``n`` zeros before a ``recv_into`` (or a copy) overwrites every one
of them: for the megabytes of a produce request, a follower's fetch answer or a consumer's
fetch answer that fill is a second pass over the memory, about 7% of a broker's CPU at RF=3
(``perf``: ``memset`` under ``bytearray.__init__``).  ``unfilled_bytearray(n)`` makes the
same ``bytearray`` with CPython's ``PyByteArray_FromStringAndSize(NULL, n)``, which leaves
the bytes as the allocator gave them.  The caller must write all ``n`` before anyone reads
them (a receive that ends early drops the array), or it would hand out stale memory.  Small
arrays, and Pythons without that call, are zeroed as ``bytearray`` does.

Thread-safety: pure function.
"""
from __future__ import annotations

import ctypes
from typing import Callable

__all__ = ["unfilled_bytearray"]

_SMALL = 64 * 1024  # below this the zero fill costs less than the foreign call


def _uninitialized() -> Callable[[None, int], bytearray] | None:
    try:
        make = ctypes.pythonapi.PyByteArray_FromStringAndSize
    except (AttributeError, ValueError):  # not CPython
        return None
    make.restype = ctypes.py_object
    make.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
    return make


_MAKE = _uninitialized()


def unfilled_bytearray(size: int) -> bytearray:
    """A ``bytearray`` of ``size`` bytes whose contents are undefined until the caller writes
    them (module docstring).  Raises ``ValueError`` for a negative size and ``MemoryError`` as
    ``bytearray`` does."""
    if size < 0:
        raise ValueError(f"a buffer size must not be negative, got {size}")
    if size < _SMALL or _MAKE is None:
        return bytearray(size)
    return _MAKE(None, size)
