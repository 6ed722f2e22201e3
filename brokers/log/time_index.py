"""The sparse time index of one segment: ``<base offset>.timeindex``.

Byte layout: a sequence of 12-byte little-endian entries, no header:

    offset size field
    0      8    timestamp         int64   max frame timestamp (ms) up to and including ...
    8      4    relative_offset   uint32  ... the frame with this base offset (minus segment base)

An entry ``(T, O)`` promises: every frame of the segment up to and including the frame
at offset ``O`` has ``max_timestamp <= T``.  Entries are added together with offset
index entries (so ``O`` always has an exact offset index entry), and only when ``T``
grew, so both fields are strictly increasing.  ``lookup(target)`` returns the ``O`` of
the last entry with ``T < target``: no frame before it can answer "first frame whose
max timestamp is >= target", so the scan may start there.

Derived data, like the offset index: sanity-checked on load (size a multiple of 12, both
fields strictly increasing, offsets inside the segment), rebuilt after a crash or when
odd.  Entries live in memory and reach the file on ``write``.

Thread-safety: none; caller holds the partition lock.
"""
from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from pathlib import Path

from .index_file import IndexFile

__all__ = ["TimeIndex"]

_ENTRY = struct.Struct("<qI")
ENTRY_BYTES = _ENTRY.size
_MAX_U32 = 2**32 - 1


class TimeIndex(IndexFile):
    """Sparse ``max timestamp -> offset`` map for the segment starting at ``base_offset``."""

    ENTRY_BYTES = ENTRY_BYTES

    def _offsets(self) -> array[int]:
        return self._second

    @classmethod
    def load(cls, path: Path, base_offset: int, *, next_offset: int) -> "TimeIndex | None":
        """The index in ``path``, or None when missing or failing the sanity checks.

        ``next_offset`` bounds the offsets (entries must point inside the segment)."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        if len(raw) % ENTRY_BYTES:
            return None
        index = cls(path, base_offset)
        previous_ts: int | None = None
        previous_offset = base_offset - 1
        for timestamp, relative in _ENTRY.iter_unpack(raw):
            offset = base_offset + relative
            if (previous_ts is not None and timestamp <= previous_ts) or offset <= previous_offset or offset >= next_offset:
                return None
            index._push(timestamp, offset)
            previous_ts, previous_offset = timestamp, offset
        index._loaded()
        return index

    @property
    def max_timestamp(self) -> int | None:
        """The largest indexed timestamp (None when empty)."""
        return self._first[-1] if self._first else None

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add ``(timestamp, offset)`` when both are larger than the last entry's."""
        relative = offset - self.base_offset
        if relative < 0 or relative > _MAX_U32:
            return
        if self._first and (timestamp <= self._first[-1] or offset <= self._second[-1]):
            return
        self._push(timestamp, offset)

    def lookup(self, target_ms: int) -> int | None:
        """Offset of the last entry whose timestamp is < ``target_ms`` (None: start of segment)."""
        i = bisect_left(self._first, target_ms)
        return None if i == 0 else self._second[i - 1]

    def _encode(self, start: int, stop: int) -> bytes:
        return b"".join(_ENTRY.pack(self._first[i], self._second[i] - self.base_offset) for i in range(start, stop))
