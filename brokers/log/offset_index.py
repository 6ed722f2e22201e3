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

import os
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

__all__ = ["OffsetIndex"]

ENTRY_BYTES = 8
_MAX_U32 = 2**32 - 1


class OffsetIndex:
    """Sparse ``offset -> position`` map for the segment starting at ``base_offset``."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._offsets = array("q")  # absolute offsets
        self._positions = array("q")
        self._written = 0  # entries already in the file
        self._synced = 0  # entries known to be fsynced

    def __len__(self) -> int:
        return len(self._offsets)

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
        index._offsets = array("q", (base_offset + r for r in rel))
        index._positions = array("q", pos)
        index._written = index._synced = len(index._offsets)
        return index

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ignored unless it lies after the last one (and after the start)."""
        relative = offset - self.base_offset
        if relative <= 0 or position <= 0 or relative > _MAX_U32 or position > _MAX_U32:
            return
        if self._offsets and (offset <= self._offsets[-1] or position <= self._positions[-1]):
            return
        self._offsets.append(offset)
        self._positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last entry ``(offset, position)`` at or before ``offset`` (the segment start if none)."""
        i = bisect_right(self._offsets, offset)
        if i == 0:
            return self.base_offset, 0
        return self._offsets[i - 1], self._positions[i - 1]

    def last(self) -> tuple[int, int]:
        """The last entry, or the implicit segment start."""
        if not self._offsets:
            return self.base_offset, 0
        return self._offsets[-1], self._positions[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset`` (in memory and in the file)."""
        i = bisect_right(self._offsets, offset - 1)
        if i == len(self._offsets):
            return
        del self._offsets[i:]
        del self._positions[i:]
        self._synced = min(self._synced, i)
        if self._written > i:
            self._written = i
            if self.path.exists():
                os.truncate(self.path, i * ENTRY_BYTES)

    def reset(self) -> None:
        """Forget every entry and empty the file (before a rebuild)."""
        self._offsets = array("q")
        self._positions = array("q")
        self._written = self._synced = 0
        self.path.write_bytes(b"")

    def write(self, *, fsync: bool) -> None:
        """Append the entries not yet in the file; fsync it when asked."""
        pending = len(self._offsets) - self._written
        if pending == 0 and (not fsync or self._synced == len(self._offsets)):
            return
        values = array("I")
        for i in range(self._written, len(self._offsets)):
            values.append(self._offsets[i] - self.base_offset)
            values.append(self._positions[i])
        if sys.byteorder != "little":
            values.byteswap()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, values.tobytes(), self._written * ENTRY_BYTES)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._written = len(self._offsets)
        if fsync:
            self._synced = self._written

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
