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

import os
import struct
from array import array
from bisect import bisect_left
from pathlib import Path

__all__ = ["TimeIndex"]

_ENTRY = struct.Struct("<qI")
ENTRY_BYTES = _ENTRY.size
_MAX_U32 = 2**32 - 1


class TimeIndex:
    """Sparse ``max timestamp -> offset`` map for the segment starting at ``base_offset``."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._timestamps = array("q")
        self._offsets = array("q")  # absolute
        self._written = 0
        self._synced = 0  # entries known to be fsynced

    def __len__(self) -> int:
        return len(self._offsets)

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
            index._timestamps.append(timestamp)
            index._offsets.append(offset)
            previous_ts, previous_offset = timestamp, offset
        index._written = index._synced = len(index._offsets)
        return index

    @property
    def max_timestamp(self) -> int | None:
        """The largest indexed timestamp (None when empty)."""
        return self._timestamps[-1] if self._timestamps else None

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add ``(timestamp, offset)`` when both are larger than the last entry's."""
        relative = offset - self.base_offset
        if relative < 0 or relative > _MAX_U32:
            return
        if self._timestamps and (timestamp <= self._timestamps[-1] or offset <= self._offsets[-1]):
            return
        self._timestamps.append(timestamp)
        self._offsets.append(offset)

    def lookup(self, target_ms: int) -> int | None:
        """Offset of the last entry whose timestamp is < ``target_ms`` (None: start of segment)."""
        i = bisect_left(self._timestamps, target_ms)
        return None if i == 0 else self._offsets[i - 1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset`` (in memory and in the file)."""
        keep = len(self._offsets)
        while keep and self._offsets[keep - 1] >= offset:
            keep -= 1
        if keep == len(self._offsets):
            return
        del self._offsets[keep:]
        del self._timestamps[keep:]
        self._synced = min(self._synced, keep)
        if self._written > keep:
            self._written = keep
            if self.path.exists():
                os.truncate(self.path, keep * ENTRY_BYTES)

    def reset(self) -> None:
        """Forget every entry and empty the file (before a rebuild)."""
        self._timestamps = array("q")
        self._offsets = array("q")
        self._written = self._synced = 0
        self.path.write_bytes(b"")

    def write(self, *, fsync: bool) -> None:
        """Append the entries not yet in the file; fsync it when asked."""
        pending = len(self._offsets) - self._written
        if pending == 0 and (not fsync or self._synced == len(self._offsets)):
            return
        data = b"".join(
            _ENTRY.pack(self._timestamps[i], self._offsets[i] - self.base_offset)
            for i in range(self._written, len(self._offsets))
        )
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, self._written * ENTRY_BYTES)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._written = len(self._offsets)
        if fsync:
            self._synced = self._written

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
