"""What the sparse indexes of a segment share: two parallel columns of int64 in memory,
the first of them absolute offsets in increasing order, persisted as fixed-size entries
appended to one file.

Subclasses (``OffsetIndex``: offset -> position, ``TimeIndex``: timestamp -> offset) say
which column holds the offsets and how a run of entries is encoded (``_encode``); this
class keeps the file in step: ``write`` appends the entries not yet written (and fsyncs
when asked), ``truncate_to`` cuts both memory and file, ``reset`` empties both.

Thread-safety: none; caller holds the partition lock.
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from array import array
from bisect import bisect_left
from pathlib import Path

from . import files
from .durable import fsync_fd

__all__ = ["IndexFile"]


class IndexFile(ABC):
    ENTRY_BYTES: int  # set by subclasses

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._first = array("q")
        self._second = array("q")
        self._written = 0  # entries already in the file
        self._synced = 0  # entries known to be fsynced

    def __len__(self) -> int:
        return len(self._first)

    @abstractmethod
    def _offsets(self) -> array[int]:
        """The column of absolute offsets (increasing)."""

    @abstractmethod
    def _encode(self, start: int, stop: int) -> bytes:
        """Entries ``[start, stop)`` in the file's byte layout."""

    def _push(self, first: int, second: int) -> None:
        self._first.append(first)
        self._second.append(second)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset`` (in memory and in the file)."""
        keep = bisect_left(self._offsets(), offset)
        if keep == len(self._first):
            return
        del self._first[keep:]
        del self._second[keep:]
        self._synced = min(self._synced, keep)
        if self._written > keep:
            self._written = keep
            if self.path.exists():
                files.truncate(self.path, keep * self.ENTRY_BYTES)

    def reset(self) -> None:
        """Forget every entry and empty the file (before a rebuild)."""
        self._first = array("q")
        self._second = array("q")
        self._written = self._synced = 0
        files.write_bytes(self.path, b"")

    def write(self, *, fsync: bool) -> None:
        """Append the entries not yet in the file; fsync it when asked."""
        count = len(self._first)
        if count == self._written and (not fsync or self._synced == count):
            return
        data = self._encode(self._written, count)
        fd = files.open_fd(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            files.pwrite(fd, data, self._written * self.ENTRY_BYTES)
            if fsync:
                fsync_fd(fd)
        finally:
            files.close(fd)
        self._written = count
        if fsync:
            self._synced = count

    def _loaded(self) -> None:
        """Mark every in-memory entry as already in the (fsynced) file."""
        self._written = self._synced = len(self._first)

    def delete(self) -> None:
        files.unlink(self.path, missing_ok=True)
