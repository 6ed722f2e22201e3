"""Walking the frames of a data file without decoding them.

Two walkers over an open file descriptor, both per-frame (never per-record) work:

- ``peek_headers(fd, start, end)``: header fields only, read in 64 KiB chunks; the CRC is
  not checked.  Used to find a frame from a sparse index entry and to load a segment
  that lies below the recovery point (trusted, already flushed data).
- ``read_frames(fd, start, end)``: every frame read whole (in chunks of up to 8 MiB, or
  ``chunk_bytes``), CRC-checked unless ``verify=False``, yielded with its header (the
  cleaner's reads); raises at the first damage.
- ``verify_frames(fd, start, end)``: every frame read whole and checked with
  ``spark_log.frame.verify_frame`` (magic, version, length, CRC-32C).  Used by crash
  recovery.  It stops at the first frame that is torn, corrupt or out of sequence and
  reports why, so the caller can truncate there.

``Peek`` holds the header fields the log needs, read by ``spark_log.frame.peek`` (the byte
layout is frame.py's alone; both frame versions, so ``next_offset`` is where the frame's
offset range ends, records removed by compaction or not).  Frames tile the offset space:
each frame starts at the previous frame's ``next_offset`` in both versions, so the walkers
treat any other base offset as damage.

Thread-safety: the functions keep no state; concurrent use of one fd is safe with pread.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator

from spark_log import frame
from spark_log.errors import CorruptRecordError
from spark_log.frame import PEEK_SIZE, verify_frame

__all__ = ["Peek", "peek", "peek_headers", "verify_frames", "read_frames", "ScanStop"]

_CHUNK = 64 * 1024
_VERIFY_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Peek:
    """The header fields of one frame at ``position`` in a data file."""

    position: int
    base_offset: int
    length: int
    epoch: int
    record_count: int  # records stored (0 for a v2 frame whose records compaction removed)
    max_timestamp: int
    next_offset: int  # the end of the frame's offset range
    attributes: int = 0
    producer_id: int = -1

    @property
    def end(self) -> int:
        return self.position + self.length


def peek(buf: bytes | bytearray | memoryview, at: int, position: int) -> Peek:
    """Header fields of the frame whose header starts at ``buf[at:]`` (file ``position``).

    Checks magic, version, a possible length and record count (``spark_log.frame.peek``);
    not the CRC, and not that the whole frame is in ``buf``.  Raises ``CorruptRecordError``.
    """
    fields = frame.peek(buf, at, position)
    return Peek(position, fields.base_offset, fields.length, fields.epoch, fields.record_count,
                fields.max_timestamp, fields.next_offset, fields.attributes, fields.producer_id)


def peek_headers(fd: int, start: int, end: int) -> Iterator[Peek]:
    """Yield the header of every frame in ``[start, end)`` of the file, in order.

    Reads 64 KiB at a time (many small frames per read); after a frame longer than that, only
    the next header (a cleaned segment's or a producer's big frames: reading 64 KiB for every
    header would read the whole file).  Raises ``CorruptRecordError`` on a bad header or a
    frame that runs past ``end``.
    """
    position = start
    chunk = b""
    chunk_at = start
    big = False  # the last frame was longer than a chunk
    while position < end:
        at = position - chunk_at
        if at < 0 or len(chunk) - at < PEEK_SIZE:
            chunk = os.pread(fd, min(PEEK_SIZE if big else _CHUNK, end - position), position)
            chunk_at, at = position, 0
        header = peek(chunk, at, position)
        big = header.length >= _CHUNK
        if header.end > end:
            raise CorruptRecordError(
                f"frame at byte {position} (offset {header.base_offset}) runs past the end of the data ({end})"
            )
        yield header
        position = header.end


@dataclass(frozen=True, slots=True)
class ScanStop:
    """Where and why ``verify_frames`` stopped before ``end`` (None when it did not)."""

    position: int
    reason: str


def verify_frames(
    fd: int, start: int, end: int, *, expected_offset: int, stop: list[ScanStop]
) -> Iterator[Peek]:
    """Yield every whole, valid, in-sequence frame of ``[start, end)``.

    A frame is valid when ``verify_frame`` accepts it (CRC included), it ends at or before
    ``end``, its base offset is the previous frame's next offset (``expected_offset`` for
    the first) and its leader epoch does not go down.  At the first frame that is not,
    the walk ends and a ``ScanStop`` is appended to ``stop``; everything yielded before
    it is a clean prefix.
    """
    position = start
    expected = expected_offset
    last_epoch = -(2**31)
    chunk: bytes = b""
    chunk_at = start
    while position < end:
        at = position - chunk_at
        if len(chunk) - at < PEEK_SIZE:
            chunk = os.pread(fd, min(_VERIFY_CHUNK, end - position), position)
            chunk_at, at = position, 0
        try:
            header = peek(chunk, at, position)
            if header.end > end:
                raise CorruptRecordError(f"torn frame at byte {position}: {end - position} of {header.length} bytes")
            if len(chunk) - at < header.length:
                chunk = os.pread(fd, max(header.length, min(_VERIFY_CHUNK, end - position)), position)
                chunk_at, at = position, 0
                if len(chunk) < header.length:
                    raise CorruptRecordError(f"torn frame at byte {position}: file ends inside it")
            verify_frame(memoryview(chunk)[at: at + header.length])
        except CorruptRecordError as exc:
            stop.append(ScanStop(position, exc.message))
            return
        if header.base_offset != expected:
            stop.append(ScanStop(position, f"frame at byte {position} has offset {header.base_offset}, expected {expected}"))
            return
        if header.epoch < last_epoch:
            stop.append(ScanStop(position, f"frame at byte {position} has epoch {header.epoch} below {last_epoch}"))
            return
        last_epoch = header.epoch
        expected = header.next_offset
        yield header
        position = header.end


def read_frames(fd: int, start: int, end: int, *, chunk_bytes: int = _VERIFY_CHUNK,
                verify: bool = True) -> Iterator[tuple[Peek, memoryview]]:
    """Yield ``(header, frame bytes)`` for every frame of ``[start, end)``, each whole and
    (``verify``) CRC-checked; the view is valid until the next item.  Raises
    ``CorruptRecordError`` at the first torn or damaged frame (without ``verify``: a bad
    header) or one that does not start where the previous ended."""
    position = start
    expected: int | None = None
    chunk = memoryview(b"")
    chunk_at = start
    while position < end:
        at = position - chunk_at
        if len(chunk) - at < PEEK_SIZE:
            chunk = memoryview(os.pread(fd, min(chunk_bytes, end - position), position))
            chunk_at, at = position, 0
        header = peek(chunk, at, position)
        if header.end > end:
            raise CorruptRecordError(f"torn frame at byte {position}: {end - position} of {header.length} bytes")
        if len(chunk) - at < header.length:
            chunk = memoryview(os.pread(fd, max(header.length, min(chunk_bytes, end - position)), position))
            chunk_at, at = position, 0
            if len(chunk) < header.length:
                raise CorruptRecordError(f"torn frame at byte {position}: the file ends inside it")
        if expected is not None and header.base_offset != expected:
            raise CorruptRecordError(f"frame at byte {position} has offset {header.base_offset}, expected {expected}")
        view = chunk[at: at + header.length]
        if verify:
            verify_frame(view)
        yield header, view
        expected = header.next_offset
        position = header.end
