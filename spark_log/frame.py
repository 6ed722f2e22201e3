"""The frame: spark-log's unit of storage and transfer.

A frame is a fixed 64-byte little-endian header followed by one Arrow IPC
record-batch message (encapsulated: continuation marker, flatbuffer metadata, body).
The schema is not repeated; it is known by ``schema_id``.  Compression is Arrow IPC
body compression, done once by the producer; brokers store and serve the bytes as
they came and only rewrite ``base_offset`` and ``partition_leader_epoch``, which lie
outside the CRC (as in Kafka), so the rewrite never recomputes it.  The one exception is
a ``LogAppendTime`` topic: the leader rewrites the timestamps and the attribute bit, and
recomputes the CRC (``leader_header``).

This module is the only place that knows the byte layout below: brokers stamp headers
with ``set_offset_and_epoch`` / ``leader_header`` and slice bodies with ``frame_body``.

    offset size field
    0      8    base_offset              int64   offset of the first record
    8      4    frame_length             int32   bytes of the whole frame, header included
    12     4    partition_leader_epoch   int32   epoch of the leader that appended it
    16     2    magic                    b"SL"
    18     1    version                  uint8   = 1
    19     1    reserved                 uint8   = 0
    20     4    crc                      uint32  CRC-32C of bytes [24, frame_length)
    24     2    attributes               uint16  bits 0-2 codec, 4 transactional,
                                                 5 control, 6 log-append-time
    26     2    producer_epoch           int16   -1 without an idempotent producer
    28     4    record_count             int32
    32     8    first_timestamp          int64   ms since the epoch, record 0
    40     8    max_timestamp            int64   ms since the epoch, max over records
    48     8    producer_id              int64   -1 without an idempotent producer
    56     4    base_sequence            int32   -1 without an idempotent producer
    60     4    schema_id                int32
    64     ...  Arrow IPC record batch message

Record ``i`` of a frame has offset ``base_offset + i``.
"""
from __future__ import annotations

import enum
import struct
import time
from dataclasses import dataclass
from typing import Iterator, Literal

import crc32c as _crc32c
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from .errors import CorruptRecordError, InvalidRequestError

__all__ = [
    "HEADER_SIZE",
    "MAGIC",
    "Codec",
    "FrameHeader",
    "encode_batch",
    "decode_batch",
    "parse_header",
    "verify_frame",
    "iter_frames",
    "set_offset_and_epoch",
    "leader_header",
    "frame_body",
]

MAGIC = b"SL"
VERSION = 1
HEADER_SIZE = 64
_HEADER = struct.Struct("<qii2sBBIHhiqqqii")
assert _HEADER.size == HEADER_SIZE
_BASE_OFFSET = struct.Struct("<q")  # at 0
_EPOCH = struct.Struct("<i")  # at 12
_EPOCH_AT = 12
_CRC = struct.Struct("<I")  # at 20
_CRC_AT = 20
_CRC_START = 24
_ATTRIBUTES = struct.Struct("<H")  # at 24
_ATTRIBUTES_AT = 24
_TIMESTAMPS = struct.Struct("<qq")  # first_timestamp, max_timestamp at 32
_TIMESTAMPS_AT = 32

ATTR_CODEC_MASK = 0x07
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_LOG_APPEND_TIME = 0x40


class Codec(enum.IntEnum):
    NONE = 0
    LZ4 = 1
    ZSTD = 2

    @classmethod
    def parse(cls, name: "str | Codec | None") -> "Codec":
        if isinstance(name, Codec):
            return name
        text = (name or "none").lower()
        mapping = {"none": cls.NONE, "uncompressed": cls.NONE, "lz4": cls.LZ4, "zstd": cls.ZSTD}
        if text not in mapping:
            raise InvalidRequestError(f"unknown compression {name!r}; use 'lz4', 'zstd' or 'none'")
        return mapping[text]

    @property
    def arrow_name(self) -> Literal["lz4", "zstd"] | None:
        names: dict[Codec, Literal["lz4", "zstd"] | None] = {Codec.NONE: None, Codec.LZ4: "lz4", Codec.ZSTD: "zstd"}
        return names[self]


@dataclass(frozen=True, slots=True)
class FrameHeader:
    base_offset: int
    frame_length: int
    partition_leader_epoch: int
    crc: int
    attributes: int
    producer_epoch: int
    record_count: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    base_sequence: int
    schema_id: int

    @property
    def codec(self) -> Codec:
        return Codec(self.attributes & ATTR_CODEC_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count

    @property
    def last_sequence(self) -> int:
        return -1 if self.base_sequence < 0 else self.base_sequence + self.record_count - 1


def crc32c(data: bytes | bytearray | memoryview) -> int:
    return int(_crc32c.crc32c(data))


_WRITE_OPTIONS = {codec: ipc.IpcWriteOptions(compression=codec.arrow_name) for codec in Codec}


def _ipc_message(batch: pa.RecordBatch, codec: Codec) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, batch.schema, options=_WRITE_OPTIONS[codec]) as writer:
        writer.write_batch(batch)
    reader = ipc.MessageReader.open_stream(sink.getvalue())
    reader.read_next_message()  # the schema: known by id, not stored
    return reader.read_next_message().serialize()


def _timestamps(batch: pa.RecordBatch, default_ms: int) -> tuple[int, int]:
    index = batch.schema.get_field_index("timestamp")
    if index < 0 or batch.num_rows == 0 or not pa.types.is_timestamp(batch.schema.field(index).type):
        return default_ms, default_ms
    column = batch.column(index).cast(pa.timestamp("ms")).cast(pa.int64())
    first = column[0].as_py()
    largest = pc.max(column).as_py()
    first = default_ms if first is None else first
    return first, default_ms if largest is None else max(largest, first)


def encode_batch(
    batch: pa.RecordBatch,
    *,
    schema_id: int = 0,
    compression: "str | Codec | None" = Codec.LZ4,
    timestamp_ms: int | None = None,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """Encode one record batch as a frame.

    Timestamps come from a ``timestamp`` column when the batch has one (bytes topics),
    otherwise every record gets ``timestamp_ms`` (default: now).  Raises
    ``InvalidRequestError`` for an empty batch or an unknown compression name.
    """
    if batch.num_rows == 0:
        raise InvalidRequestError("a frame must hold at least one record")
    codec = Codec.parse(compression)
    now = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
    first_ts, max_ts = _timestamps(batch, now)
    message = _ipc_message(batch, codec)
    attributes = int(codec)
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    frame = bytearray(HEADER_SIZE + message.size)
    frame[HEADER_SIZE:] = memoryview(message)
    _HEADER.pack_into(
        frame, 0, base_offset, len(frame), partition_leader_epoch, MAGIC, VERSION, 0, 0,
        attributes, producer_epoch, batch.num_rows, first_ts, max_ts, producer_id,
        base_sequence, schema_id,
    )
    crc = crc32c(memoryview(frame)[_CRC_START:])
    _CRC.pack_into(frame, _CRC_AT, crc)
    return bytes(frame)


def parse_header(buf: bytes | bytearray | memoryview, position: int = 0) -> FrameHeader:
    """Parse the header at ``position`` (without checking the CRC).

    Raises ``CorruptRecordError`` for a truncated header, bad magic or version, or a
    length that is impossible or runs past the end of ``buf``.
    """
    available = len(buf) - position
    if available < HEADER_SIZE:
        raise CorruptRecordError(f"truncated frame at byte {position}: {available} of {HEADER_SIZE} header bytes")
    fields = _HEADER.unpack_from(buf, position)
    (base_offset, length, epoch, magic, version, _reserved, crc, attributes, producer_epoch,
     count, first_ts, max_ts, producer_id, base_sequence, schema_id) = fields
    if magic != MAGIC or version != VERSION:
        raise CorruptRecordError(f"bad magic or version at byte {position}: {magic!r} v{version}")
    if length < HEADER_SIZE + 8 or count < 1:
        raise CorruptRecordError(f"impossible frame at byte {position}: length {length}, records {count}")
    if length > available:
        raise CorruptRecordError(f"truncated frame at byte {position}: {available} of {length} bytes")
    if attributes & ATTR_CODEC_MASK not in (0, 1, 2):
        raise CorruptRecordError(f"unknown codec in frame at byte {position}")
    return FrameHeader(base_offset, length, epoch, crc, attributes, producer_epoch, count,
                       first_ts, max_ts, producer_id, base_sequence, schema_id)


def verify_frame(buf: bytes | bytearray | memoryview, position: int = 0) -> FrameHeader:
    """``parse_header`` plus the CRC check over the frame's protected bytes."""
    header = parse_header(buf, position)
    view = memoryview(buf)[position + _CRC_START: position + header.frame_length]
    actual = crc32c(view)
    if actual != header.crc:
        raise CorruptRecordError(
            f"CRC mismatch in frame at byte {position} (offset {header.base_offset}): "
            f"stored {header.crc:#010x}, computed {actual:#010x}"
        )
    return header


def iter_frames(buf: bytes | bytearray | memoryview, *, verify: bool = True) -> Iterator[tuple[int, FrameHeader]]:
    """Yield ``(position, header)`` for every frame in ``buf``, which must hold whole frames."""
    position = 0
    end = len(buf)
    check = verify_frame if verify else parse_header
    while position < end:
        header = check(buf, position)
        yield position, header
        position += header.frame_length


def set_offset_and_epoch(frame: bytearray | memoryview, base_offset: int, epoch: int, position: int = 0) -> None:
    """Rewrite a frame's base offset and leader epoch in place (the CRC stays valid)."""
    _BASE_OFFSET.pack_into(frame, position, base_offset)
    _EPOCH.pack_into(frame, position + _EPOCH_AT, epoch)


def frame_body(buf: bytes | bytearray | memoryview, header: FrameHeader, position: int = 0) -> memoryview:
    """The Arrow IPC message of the frame at ``position`` (everything after its header),
    as a view of ``buf`` (no copy).  ``header`` is that frame's parsed header."""
    return memoryview(buf)[position + HEADER_SIZE: position + header.frame_length]


def leader_header(buf: bytes | bytearray | memoryview, header: FrameHeader, position: int = 0, *,
                  base_offset: int, epoch: int, append_time_ms: int | None = None) -> bytearray:
    """A copy of the header of the frame at ``position`` as a leader writes it: base offset
    and leader epoch set (outside the CRC).  With ``append_time_ms`` (a ``LogAppendTime``
    topic) both timestamps become it, the log-append-time attribute bit is set and the CRC
    is recomputed over the new header's protected bytes and the unchanged body; the frame
    is then ``leader_header(...) + frame_body(...)``.  ``header`` is the frame's parsed
    (already verified) header; ``buf`` is not modified."""
    head = bytearray(memoryview(buf)[position: position + HEADER_SIZE])
    _BASE_OFFSET.pack_into(head, 0, base_offset)
    _EPOCH.pack_into(head, _EPOCH_AT, epoch)
    if append_time_ms is not None:
        _ATTRIBUTES.pack_into(head, _ATTRIBUTES_AT, header.attributes | ATTR_LOG_APPEND_TIME)
        _TIMESTAMPS.pack_into(head, _TIMESTAMPS_AT, append_time_ms, append_time_ms)
        crc = _crc32c.crc32c(frame_body(buf, header, position), _crc32c.crc32c(bytes(head[_CRC_START:])))
        _CRC.pack_into(head, _CRC_AT, int(crc))
    return head


def decode_batch(frame: "bytes | bytearray | memoryview | pa.Buffer", schema: pa.Schema, *, verify: bool = False) -> pa.RecordBatch:
    """Decode a frame's records with ``schema``; zero-copy for uncompressed frames.

    Raises ``CorruptRecordError`` when the frame or its Arrow message is damaged, and
    ``SchemaMismatchError``-worthy problems surface as ``CorruptRecordError`` too (the
    caller chose the schema by the frame's id).
    """
    buffer = frame if isinstance(frame, pa.Buffer) else pa.py_buffer(frame)
    view = memoryview(buffer)
    header = verify_frame(view) if verify else parse_header(view)
    body = buffer.slice(HEADER_SIZE, header.frame_length - HEADER_SIZE)
    try:
        batch = ipc.read_record_batch(body, schema)
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        raise CorruptRecordError(f"frame at offset {header.base_offset} does not hold a valid Arrow batch: {exc}") from None
    if batch.num_rows != header.record_count:
        raise CorruptRecordError(
            f"frame at offset {header.base_offset} claims {header.record_count} records, holds {batch.num_rows}"
        )
    return batch
