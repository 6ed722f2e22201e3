"""The sparse offset index of one segment: ``<base offset>.index``.

Byte layout: a sequence of 8-byte little-endian entries, no header:

    offset size field
    0      4    relative_offset   uint32  frame base offset - segment base offset
    4      4    position          uint32  byte position of that frame in the .log file

Entries are strictly increasing in both fields.  The index is sparse: an entry is added
for a frame when at least ``index_interval_bytes`` were appended since the previous
entry (0 means every frame).  The segment start ``(base_offset, 0)`` is implicit and
never stored.  Entries live in memory (an ``array``) and reach the file on ``write``,
called when the log flushes, rolls or closes.

Indexes are derived data: rebuilt, never trusted, after a crash.  Below the recovery
point the file is loaded and sanity-checked (size a multiple of 8, strictly increasing,
positions inside the data file); anything odd makes ``load`` return None and the
segment rebuilds the index from the data file.  The segment also checks each entry it
uses against the frame header it points at (``Segment.locate``).

Thread-safety: none; caller holds the partition lock.
"""
from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from .index_file import IndexFile

__all__ = ["OffsetIndex"]

ENTRY_BYTES = 8
_MAX_U32 = 2**32 - 1


class OffsetIndex(IndexFile):
    """Sparse ``offset -> position`` map for the segment starting at ``base_offset``."""

    ENTRY_BYTES = ENTRY_BYTES

    def _offsets(self) -> array[int]:
        return self._first

    @classmethod
    def load(cls, path: Path, base_offset: int, *, data_size: int) -> "OffsetIndex | None":
        """The index in ``path``, or None when it is missing or fails the sanity checks."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        if len(raw) % ENTRY_BYTES:
            return None
        values = array("I")
        values.frombytes(raw)
        if sys.byteorder != "little":
            values.byteswap()
        index = cls(path, base_offset)
        rel, pos = values[0::2], values[1::2]
        previous_rel, previous_pos = 0, 0
        for r, p in zip(rel, pos):
            if r <= previous_rel or p <= previous_pos or p >= data_size:
                return None
            previous_rel, previous_pos = r, p
        index._first = array("q", (base_offset + r for r in rel))
        index._second = array("q", pos)
        index._loaded()
        return index

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ignored unless it lies after the last one (and after the start)."""
        relative = offset - self.base_offset
        if relative <= 0 or position <= 0 or relative > _MAX_U32 or position > _MAX_U32:
            return
        if self._first and (offset <= self._first[-1] or position <= self._second[-1]):
            return
        self._push(offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last entry ``(offset, position)`` at or before ``offset`` (the segment start if none)."""
        i = bisect_right(self._first, offset)
        if i == 0:
            return self.base_offset, 0
        return self._first[i - 1], self._second[i - 1]

    def last(self) -> tuple[int, int]:
        """The last entry, or the implicit segment start."""
        if not self._first:
            return self.base_offset, 0
        return self._first[-1], self._second[-1]

    def _encode(self, start: int, stop: int) -> bytes:
        values = array("I")
        for i in range(start, stop):
            values.append(self._first[i] - self.base_offset)
            values.append(self._second[i])
        if sys.byteorder != "little":
            values.byteswap()
        return values.tobytes()
