"""One segment: a data file plus its sparse offset and time indexes.

Files (``base`` is the segment's base offset, the first offset it holds, zero-padded to
20 digits as in Kafka):

    <base>.log        the frames, back to back, exactly as spark_log.frame lays them out
    <base>.index      OffsetIndex (8-byte entries: uint32 relative offset, uint32 position)
    <base>.timeindex  TimeIndex (12-byte entries: int64 max timestamp, uint32 relative offset)

A segment holds whole frames that tile the offsets: the first frame's base offset is
``base_offset`` and each frame starts at the previous frame's next offset (the end of its
offset range; a compacted, version-2 frame may hold fewer records than it covers).  Positions
are uint32, so a segment never grows past 4 GiB (the log rolls before).

Opening:
- ``Segment.create``: a new, empty segment (stale files of that name are removed).
- ``Segment.open_trusted``: for segments below the recovery point (flushed data).  The
  indexes are loaded if sane, otherwise rebuilt from frame headers; the frames after
  the last index entry are walked to find the end, the next offset and the largest
  timestamp.  Raises ``CorruptRecordError`` when that walk does not end exactly at the
  end of the file; the caller then recovers the segment instead.
- ``Segment.recover``: validates every frame (CRC, sequence, epochs), rebuilds both
  indexes, and truncates the file at the first torn, corrupt or out-of-sequence frame
  (the torn-tail rule).  Indexes are derived data: rebuilt, never trusted, after a crash.

Reads return file bytes (``os.pread``), never decoded.  An index entry is checked
against the frame header it points at each time it is used; a mismatch rebuilds the
indexes from the data file (or raises ``CorruptRecordError`` if the data is damaged).

Thread-safety: none; caller holds the partition lock.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator, Sequence

from spark_log.errors import CorruptRecordError, StorageError
from spark_log.frame import PEEK_SIZE, verify_frame

from . import files
from .durable import fsync_fd
from .offset_index import OffsetIndex
from .scan import Peek, ScanStop, peek, peek_headers, verify_frames
from .time_index import TimeIndex

__all__ = ["Segment", "FrameInfo", "segment_name", "MAX_SEGMENT_BYTES"]

MAX_SEGMENT_BYTES = 2**32 - 1
NO_TIMESTAMP = -(2**63)

# (base_offset, next_offset, length, max_timestamp) of one frame being appended
FrameInfo = tuple[int, int, int, int]
Buffer = bytes | bytearray | memoryview


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


def _pwrite_all(fd: int, buffers: Sequence[Buffer], position: int) -> None:
    """Write all ``buffers`` at ``position`` (pwritev, looping over partial writes)."""
    pending = list(buffers)
    while pending:
        batch = pending[:_IOV_MAX]
        written = files.pwritev(fd, batch, position)
        position += written
        consumed = 0
        while consumed < len(batch) and written >= len(batch[consumed]):
            written -= len(batch[consumed])
            consumed += 1
        pending = pending[consumed:]
        if written:
            pending[0] = memoryview(pending[0]).cast("B")[written:]


class Segment:
    """A data file and its indexes; see the module docstring for layout and rules."""

    def __init__(self, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / segment_name(base_offset, ".log")
        self.offset_index = OffsetIndex(directory / segment_name(base_offset, ".index"), base_offset)
        self.time_index = TimeIndex(directory / segment_name(base_offset, ".timeindex"), base_offset)
        self._interval = index_interval_bytes
        self._fd = files.open_fd(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP  # largest frame max_timestamp, NO_TIMESTAMP if empty
        self.first_append_ms: int | None = None  # clock.monotonic_ms of the first append (roll by age)
        self.dirty = False  # bytes written since the last fsync
        self.new_file = False  # created since the directory was last fsynced
        self._now_ms = now_ms
        self._since_index = 0
        self._max_so_far = NO_TIMESTAMP

    # --- opening ---------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int) -> "Segment":
        for suffix in (".log", ".index", ".timeindex"):
            files.unlink(directory / segment_name(base_offset, suffix), missing_ok=True)
        segment = cls(directory, base_offset, index_interval_bytes=index_interval_bytes, now_ms=now_ms)
        segment.new_file = True
        return segment

    @classmethod
    def open_trusted(cls, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int) -> "Segment":
        segment = cls(directory, base_offset, index_interval_bytes=index_interval_bytes, now_ms=now_ms)
        try:
            file_size = os.fstat(segment._fd).st_size
            loaded = OffsetIndex.load(segment.offset_index.path, base_offset, data_size=file_size)
            if loaded is not None:
                segment.offset_index = loaded
            try:
                segment._load_tail(file_size)
            except CorruptRecordError:
                if loaded is None:
                    raise
                loaded = None  # a bad index entry, or bad data: walk from the start to find out
                segment.offset_index = OffsetIndex(segment.offset_index.path, base_offset)
                segment._load_tail(file_size)
            times = TimeIndex.load(segment.time_index.path, base_offset, next_offset=segment.next_offset)
            if loaded is None or times is None:
                segment.rebuild_indexes()
            else:
                segment.time_index = times
                segment.max_timestamp = max(segment.max_timestamp, times.max_timestamp or NO_TIMESTAMP)
        except BaseException:
            segment.close()
            raise
        if segment.size:
            segment.first_append_ms = now_ms
        return segment

    def _load_tail(self, file_size: int) -> None:
        """Walk the frames after the last index entry up to ``file_size`` (see open_trusted)."""
        entry_offset, position = self.offset_index.last()
        self._since_index = 0
        self.next_offset = entry_offset
        for header in peek_headers(self._fd, position, file_size):
            if header.base_offset != self.next_offset:
                raise CorruptRecordError(
                    f"{self.log_path.name}: frame at byte {header.position} has offset "
                    f"{header.base_offset}, expected {self.next_offset}"
                )
            self.next_offset = header.next_offset
            self.max_timestamp = max(self.max_timestamp, header.max_timestamp)
            self._since_index += header.length
        self.size = file_size
        self._max_so_far = self.max_timestamp

    def recover(self, on_frame: Callable[[Peek], None] | None = None) -> ScanStop | None:
        """Validate every frame, rebuild the indexes, truncate at the first bad frame.

        ``on_frame`` sees each valid frame in order (the log feeds the epoch cache).
        Returns where and why the file was truncated, or None if it was clean.
        """
        file_size = os.fstat(self._fd).st_size
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_counters()
        stop: list[ScanStop] = []
        for header in verify_frames(self._fd, 0, file_size, expected_offset=self.base_offset, stop=stop):
            self._index_frame(header.base_offset, header.next_offset, header.length, header.max_timestamp)
            if on_frame is not None:
                on_frame(header)
        if stop:
            files.ftruncate(self._fd, self.size)
            fsync_fd(self._fd)
            return stop[0]
        return None

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from the frame headers of ``[0, size)``.

        Built aside and swapped in only when the walk succeeds; on damaged data it raises
        ``CorruptRecordError`` and changes nothing (size, offsets and indexes stay)."""
        offsets = OffsetIndex(self.offset_index.path, self.base_offset)
        times = TimeIndex(self.time_index.path, self.base_offset)
        expected, since, max_so_far = self.base_offset, 0, NO_TIMESTAMP
        for header in peek_headers(self._fd, 0, self.size):
            if header.base_offset != expected:
                raise CorruptRecordError(
                    f"{self.log_path.name}: frame at byte {header.position} has offset "
                    f"{header.base_offset}, expected {expected}"
                )
            max_so_far = max(max_so_far, header.max_timestamp)
            if header.position > 0 and since >= self._interval:
                offsets.append(header.base_offset, header.position)
                times.maybe_append(max_so_far, header.base_offset)
                since = 0
            since += header.length
            expected = header.next_offset
        files.write_bytes(offsets.path, b"")  # the new objects write from entry 0 on
        files.write_bytes(times.path, b"")
        self.offset_index, self.time_index = offsets, times
        self._since_index, self._max_so_far = since, max_so_far

    def _reset_counters(self) -> None:
        self.size = 0
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self._max_so_far = NO_TIMESTAMP
        self._since_index = 0

    def _index_frame(self, base: int, next_offset: int, length: int, max_ts: int,
                     limits: tuple[int, int] | None = None) -> None:
        """Account one frame appended at ``self.size`` (index entries per the interval; with
        ``limits``, (offset index, time index) entries at most: a full index takes no more,
        lookups scan further)."""
        self._max_so_far = max(self._max_so_far, max_ts)
        if self.size > 0 and self._since_index >= self._interval and (
                limits is None or (len(self.offset_index) < limits[0] and len(self.time_index) < limits[1])):
            self.offset_index.append(base, self.size)
            self.time_index.maybe_append(self._max_so_far, base)
            self._since_index = 0
        self._since_index += length
        self.size += length
        self.next_offset = next_offset
        self.max_timestamp = self._max_so_far

    # --- appending -------------------------------------------------------------------

    def append(self, buffers: Sequence[Buffer], frames: Sequence[FrameInfo], *, now_ms: int,
               index_limits: tuple[int, int] | None = None) -> None:
        """Write ``buffers`` (whole frames, described by ``frames``) at the end of the file.

        On an OS error the file is cut back to its old size and ``StorageError`` raised.
        """
        start = self.size
        total = sum(length for _, _, length, _ in frames)
        if start + total > MAX_SEGMENT_BYTES:
            raise StorageError(f"{self.log_path.name}: append would pass the 4 GiB segment limit")
        try:
            _pwrite_all(self._fd, buffers, start)
        except OSError as exc:
            try:
                files.ftruncate(self._fd, start)
            except OSError:
                pass
            raise StorageError(f"{self.log_path.name}: write failed: {exc.strerror}") from exc
        for base, next_offset, length, max_ts in frames:
            self._index_frame(base, next_offset, length, max_ts, index_limits)
        if self.first_append_ms is None:
            self.first_append_ms = now_ms
        self.dirty = True

    # --- reading ---------------------------------------------------------------------

    def locate(self, offset: int) -> Peek | None:
        """The header of the frame that holds ``offset`` (None if ``offset`` is past the end)."""
        if offset >= self.next_offset:
            return None
        for attempt in (0, 1):
            entry_offset, position = self.offset_index.lookup(max(offset, self.base_offset))
            try:
                return self._scan_to(offset, entry_offset, position)
            except CorruptRecordError:
                if attempt or position == 0:
                    raise
            self.rebuild_indexes()  # a wrong entry, or damaged data (then this raises)
        raise AssertionError("unreachable")

    def _scan_to(self, offset: int, expected: int, position: int) -> Peek:
        for header in peek_headers(self._fd, position, self.size):
            if header.base_offset != expected:
                raise CorruptRecordError(
                    f"{self.log_path.name}: frame at byte {header.position} has offset "
                    f"{header.base_offset}, expected {expected}"
                )
            if header.next_offset > offset:
                return header
            expected = header.next_offset
        raise CorruptRecordError(f"{self.log_path.name}: offset {offset} not found before byte {self.size}")

    def read(self, position: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of the file from ``position`` (never past the last frame)."""
        return os.pread(self._fd, max(0, min(max_bytes, self.size - position)), position)

    def read_frames(self, first: Peek, *, max_bytes: int, limit: int, verify: bool) -> tuple[bytes | memoryview, int]:
        """Whole frames from ``first`` (a located header): up to ``max_bytes`` but at least
        ``first``, none with base offset >= ``limit``.  Returns ``(data, next_offset)``.

        Headers are checked (magic, frames tiling the offsets), CRCs too with ``verify``.  Damage ends
        the data before the damaged frame; ``CorruptRecordError`` if ``first`` is damaged."""
        data = self.read(first.position, max(max_bytes, first.length))
        at, expected = 0, first.base_offset
        try:
            while len(data) - at >= PEEK_SIZE:
                header = peek(data, at, first.position + at)
                if header.base_offset != expected:
                    raise CorruptRecordError(
                        f"{self.log_path.name}: frame at byte {first.position + at} has offset "
                        f"{header.base_offset}, expected {expected}"
                    )
                if header.base_offset >= limit or at + header.length > len(data):
                    break
                if verify:
                    verify_frame(memoryview(data)[at: at + header.length])
                at += header.length
                expected = header.next_offset
        except CorruptRecordError:
            if at == 0:
                raise
        if at == 0:
            raise CorruptRecordError(f"{self.log_path.name}: no whole frame at byte {first.position}")
        return (data if at == len(data) else memoryview(data)[:at]), expected

    def headers_from(self, position: int) -> Iterator[Peek]:
        """Frame headers from ``position`` (a frame boundary) to the end."""
        return peek_headers(self._fd, position, self.size)

    def find_timestamp(self, target_ms: int) -> int | None:
        """Base offset of the first frame whose max timestamp is >= ``target_ms``, or None."""
        if self.max_timestamp < target_ms:
            return None
        start = self.time_index.lookup(target_ms)
        position = 0
        if start is not None:
            header = self.locate(start)
            if header is None or header.base_offset != start or header.max_timestamp >= target_ms:
                self.rebuild_indexes()  # the time index entry broke its promise: walk from the start
            else:
                position = header.position
        for header in peek_headers(self._fd, position, self.size):
            if header.max_timestamp >= target_ms:
                return header.base_offset
        return None

    # --- changing --------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every frame whose last offset is >= ``offset`` (whole frames only).

        The new end is the base offset of the frame that held ``offset``.  fsyncs the file,
        so truncated records cannot come back after a crash."""
        header = self.locate(offset)
        if header is None:
            return
        files.ftruncate(self._fd, header.position)
        fsync_fd(self._fd)
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        indexed_max = self.time_index.max_timestamp
        self.max_timestamp = NO_TIMESTAMP if indexed_max is None else indexed_max
        self._load_tail(header.position)
        if self.size == 0:
            self.first_append_ms = None

    def flush(self) -> None:
        """fsync the data file if anything was written since the last flush."""
        if self.dirty:
            fsync_fd(self._fd)
            self.dirty = False

    def write_indexes(self, *, fsync: bool) -> None:
        self.offset_index.write(fsync=fsync)
        self.time_index.write(fsync=fsync)

    def close(self) -> None:
        if self._fd >= 0:
            files.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        """Close and remove all three files."""
        self.close()
        self.delete_files()

    def delete_files(self) -> None:
        """Remove all three files; the open descriptor still reads the data until ``close``."""
        files.unlink(self.log_path, missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()

    def __repr__(self) -> str:
        return f"Segment({self.base_offset}..{self.next_offset}, {self.size} bytes)"
