"""Checking the frames of one append request, and preparing them for the file.

``check_frames`` walks a request once, per frame (never per record): each frame must be
whole and pass ``spark_log.frame.verify_frame`` (magic, version, length, CRC-32C), no
frame may exceed ``max_message_bytes``, and an optional ``rule`` (the produce path's
control-frame, schema and Arrow-body checks) must accept it.  Anything wrong raises the
typed error (``CorruptRecordError``, ``RecordTooLargeError``, ``InvalidRequestError``, or
whatever ``rule`` raises) before a byte is written, so a request is appended whole or not
at all.  What passed is a ``CheckedFrames``: only ``check_frames`` makes one, so holding
one means every check above was done, once; ``PartitionLog.append_as_leader`` trusts it
and verifies nothing again.

``stamp_as_leader`` turns checked frames into write buffers without copying the bodies:
per frame one 64-byte header copy (``spark_log.frame.leader_header``: base offset and
leader epoch rewritten, and with ``LogAppendTime`` the timestamps, attribute bit and CRC)
followed by a view of the untouched body.  The byte layout is ``spark_log.frame``'s alone.

``check_follower`` checks what a follower copies from its leader (frames tiling the offsets, epochs
that do not go back); the follower path verifies the CRC of every frame too (through
``check_frames`` without a size limit): follower and recovery checks are not the leader's.

Thread-safety: pure functions over the caller's buffers; a ``CheckedFrames`` is immutable
(it keeps a view of the caller's buffer, which must not change until it is appended).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from spark_log.errors import CorruptRecordError, InvalidRequestError, RecordTooLargeError
from spark_log.frame import VERSION_DENSE, FrameHeader, frame_body, leader_header, verify_frame

__all__ = ["Checked", "CheckedFrames", "FrameRule", "check_frames", "stamp_as_leader", "check_follower"]

Buffer = bytes | bytearray | memoryview
FrameRule = Callable[[memoryview, int, FrameHeader], None]
"""An extra per-frame check ``rule(view, position, header)``: raises a typed error to refuse."""

FrameInfo = tuple[int, int, int, int]
"""``(base offset, next offset, frame length, max timestamp)`` of a frame as written."""

_KEY = object()  # only check_frames holds it: nothing else can make CheckedFrames


class Checked(NamedTuple):
    """One checked frame of a request: where it lies and its header."""

    position: int
    header: FrameHeader


class CheckedFrames:
    """Whole frames that passed ``check_frames`` (module docstring).  Immutable.

    ``view`` is the request's bytes, ``frames`` each frame's position and header in order,
    ``max_message_bytes`` the limit they were checked against (None: none)."""

    __slots__ = ("view", "frames", "max_message_bytes")

    view: memoryview
    frames: tuple[Checked, ...]
    max_message_bytes: int | None

    def __init__(self, key: object, view: memoryview, frames: tuple[Checked, ...], max_message_bytes: int | None) -> None:
        if key is not _KEY:
            raise TypeError("CheckedFrames are made by brokers.log.append.check_frames only")
        object.__setattr__(self, "view", view)
        object.__setattr__(self, "frames", frames)
        object.__setattr__(self, "max_message_bytes", max_message_bytes)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CheckedFrames are immutable")

    @property
    def headers(self) -> list[FrameHeader]:
        return [checked.header for checked in self.frames]

    @property
    def record_count(self) -> int:
        return sum(checked.header.record_count for checked in self.frames)

    def __len__(self) -> int:
        """Bytes of the request."""
        return len(self.view)

    def __repr__(self) -> str:
        return f"CheckedFrames({len(self.frames)} frames, {len(self.view)} bytes)"


def check_frames(data: Buffer, *, max_message_bytes: int | None, rule: FrameRule | None = None,
                 topic: str | None = None, explicit_offsets: bool = False) -> CheckedFrames:
    """Check every frame of ``data`` (module docstring); ``topic`` only names it in errors.

    Version-2 frames (rows carrying their own offsets, written by compaction) are accepted
    only with ``explicit_offsets`` (a follower copying its leader): a leader assigns
    offsets, so what it appends must be dense version-1 frames.  Raises
    ``InvalidRequestError`` (not bytes-like, empty, or a version-2 frame without
    ``explicit_offsets``), ``CorruptRecordError`` (torn, damaged, bad magic/version/CRC),
    ``RecordTooLargeError`` (a frame above ``max_message_bytes``), or what ``rule`` raises."""
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
        if header.version != VERSION_DENSE and not explicit_offsets:
            raise InvalidRequestError(
                f"frame {len(frames)} at byte {position} is a version-{header.version} frame (rows with their own "
                "offsets): only compaction writes those; producers send version-1 frames")
        if max_message_bytes is not None and header.frame_length > max_message_bytes:
            raise RecordTooLargeError(
                f"frame {len(frames)} at byte {position} is {header.frame_length} bytes; "
                f"max.message.bytes is {max_message_bytes}" + (f" (topic {topic!r})" if topic else ""),
                frame_bytes=header.frame_length,
                max_message_bytes=max_message_bytes,
            )
        if rule is not None:
            rule(view, position, header)
        frames.append(Checked(position, header))
        position += header.frame_length
    return CheckedFrames(_KEY, view, tuple(frames), max_message_bytes)


def stamp_as_leader(
    checked: CheckedFrames,
    *,
    first_offset: int,
    epoch: int,
    append_time_ms: int | None,
) -> tuple[list[Buffer], list[FrameInfo]]:
    """Write buffers and a ``FrameInfo`` per frame, offsets from ``first_offset``.

    ``append_time_ms`` set means LogAppendTime: every frame's timestamps become it."""
    view = checked.view
    buffers: list[Buffer] = []
    infos: list[FrameInfo] = []
    offset = first_offset
    for frame in checked.frames:
        header, at = frame.header, frame.position
        buffers.append(leader_header(view, header, at, base_offset=offset, epoch=epoch, append_time_ms=append_time_ms))
        buffers.append(frame_body(view, header, at))
        max_ts = header.max_timestamp if append_time_ms is None else append_time_ms
        infos.append((offset, offset + header.record_count, header.frame_length, max_ts))
        offset += header.record_count
    return buffers, infos


def check_follower(checked: CheckedFrames, *, expected_offset: int, latest_epoch: int | None) -> list[FrameInfo]:
    """Check a follower's frames tile the offsets from ``expected_offset`` (each starts where
    the previous one's offset range ends, in either frame version) with non-decreasing
    epochs not below ``latest_epoch``; return a ``FrameInfo`` each.

    Raises ``CorruptRecordError`` for frames out of sequence and ``InvalidRequestError``
    for an epoch that goes back (the follower must truncate first)."""
    infos: list[FrameInfo] = []
    expected = expected_offset
    floor = -1 if latest_epoch is None else latest_epoch
    for i, frame in enumerate(checked.frames):
        header = frame.header
        if i and header.base_offset != expected:
            raise CorruptRecordError(
                f"frame {i} at byte {frame.position} has base offset {header.base_offset}, expected {expected}"
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
