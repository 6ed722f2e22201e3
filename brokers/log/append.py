"""Checking the frames of one append request and preparing them for the file.

``validate`` walks the request once, per frame (never per record): each frame must be
whole and pass ``spark_log.frame.verify_frame`` (magic, version, length, CRC-32C), and
no frame may exceed ``max_message_bytes``.  Anything wrong raises the typed error
(``CorruptRecordError``, ``RecordTooLargeError``, ``InvalidRequestError``) before a
byte is written, so a request is appended whole or not at all.

``stamp_as_leader`` turns validated frames into write buffers without copying the
bodies: per frame one 64-byte header copy (base offset and leader epoch rewritten,
fields outside the CRC) followed by a memoryview of the untouched rest.  With
``LogAppendTime`` the header's timestamps become the broker's time, the attribute bit is
set and the CRC recomputed (the only case that touches the CRC).

Thread-safety: pure functions over the caller's buffers.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c as _crc32c

from spark_log.errors import CorruptRecordError, InvalidRequestError, RecordTooLargeError
from spark_log.frame import ATTR_LOG_APPEND_TIME, HEADER_SIZE, FrameHeader, set_offset_and_epoch, verify_frame

__all__ = ["Checked", "validate", "stamp_as_leader", "check_follower"]

Buffer = bytes | bytearray | memoryview
_CRC_START = 24
_ATTRIBUTES_AT = 24
_TIMESTAMPS_AT = 32


@dataclass(frozen=True, slots=True)
class Checked:
    """One validated frame of a request: where it lies and its header."""

    position: int
    header: FrameHeader


def validate(data: Buffer, *, max_message_bytes: int | None) -> tuple[memoryview, list[Checked]]:
    """Validate every frame of ``data``; return a byte view of it and the frames in order."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidRequestError(f"frames must be bytes-like, not {type(data).__name__}")
    view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
    if len(view) == 0:
        raise InvalidRequestError("an append needs at least one frame")
    frames: list[Checked] = []
    position = 0
    end = len(view)
    while position < end:
        header = verify_frame(view, position)
        if max_message_bytes is not None and header.frame_length > max_message_bytes:
            raise RecordTooLargeError(
                f"frame {len(frames)} at byte {position} is {header.frame_length} bytes; "
                f"max.message.bytes is {max_message_bytes}",
                frame_bytes=header.frame_length,
                max_message_bytes=max_message_bytes,
            )
        frames.append(Checked(position, header))
        position += header.frame_length
    return view, frames


def stamp_as_leader(
    view: memoryview,
    frames: list[Checked],
    *,
    first_offset: int,
    epoch: int,
    append_time_ms: int | None,
) -> tuple[list[Buffer], list[tuple[int, int, int, int]]]:
    """Write buffers and ``(base, next, length, max_timestamp)`` per frame, offsets from ``first_offset``.

    ``append_time_ms`` set means LogAppendTime: every frame's timestamps become it."""
    buffers: list[Buffer] = []
    infos: list[tuple[int, int, int, int]] = []
    offset = first_offset
    for checked in frames:
        header, at = checked.header, checked.position
        head = bytearray(view[at: at + HEADER_SIZE])
        set_offset_and_epoch(head, offset, epoch)
        body = view[at + HEADER_SIZE: at + header.frame_length]
        max_ts = header.max_timestamp
        if append_time_ms is not None:
            max_ts = append_time_ms
            struct.pack_into("<H", head, _ATTRIBUTES_AT, header.attributes | ATTR_LOG_APPEND_TIME)
            struct.pack_into("<qq", head, _TIMESTAMPS_AT, append_time_ms, append_time_ms)
            crc = int(_crc32c.crc32c(body, _crc32c.crc32c(bytes(head[_CRC_START:]))))
            struct.pack_into("<I", head, 20, crc)
        buffers.append(head)
        buffers.append(body)
        infos.append((offset, offset + header.record_count, header.frame_length, max_ts))
        offset += header.record_count
    return buffers, infos


def check_follower(
    frames: list[Checked], *, expected_offset: int, latest_epoch: int | None
) -> list[tuple[int, int, int, int]]:
    """Check a follower's frames are dense from ``expected_offset`` with non-decreasing
    epochs not below ``latest_epoch``; return ``(base, next, length, max_timestamp)`` each.

    Raises ``CorruptRecordError`` for frames out of sequence and ``InvalidRequestError``
    for an epoch that goes back (the follower must truncate first)."""
    infos: list[tuple[int, int, int, int]] = []
    expected = expected_offset
    floor = -1 if latest_epoch is None else latest_epoch
    for i, checked in enumerate(frames):
        header = checked.header
        if i and header.base_offset != expected:
            raise CorruptRecordError(
                f"frame {i} at byte {checked.position} has base offset {header.base_offset}, expected {expected}"
            )
        if header.partition_leader_epoch < floor:
            raise InvalidRequestError(
                f"frame {i} has leader epoch {header.partition_leader_epoch}, below the log's latest epoch "
                f"{floor}; truncate the log to the divergence point first"
            )
        floor = header.partition_leader_epoch
        infos.append((header.base_offset, header.next_offset, header.frame_length, header.max_timestamp))
        expected = header.next_offset
    return infos
