"""The frame: spark-log's unit of storage and transfer.

A frame is a little-endian header followed by one Arrow IPC record-batch message
(encapsulated: continuation marker, flatbuffer metadata, body).  The schema is not
repeated; it is known by ``schema_id``.  Compression is Arrow IPC body compression, done
once by the producer; brokers store and serve the bytes as they came and only rewrite
``base_offset`` and ``partition_leader_epoch``, which lie outside the CRC (as in Kafka), so
the rewrite never recomputes it.  The one exception is a ``LogAppendTime`` topic: the
leader rewrites the timestamps and the attribute bit, and recomputes the CRC
(``leader_header``).

This module is the only place that knows the byte layout below: brokers stamp headers
with ``set_offset_and_epoch`` / ``leader_header``, slice bodies with ``frame_body``, peek
at headers with ``peek`` and read record offsets with ``record_offsets``.

Two versions share the first 64 bytes:

    offset size field
    0      8    base_offset              int64   offset of the first record (v2: the first offset covered)
    8      4    frame_length             int32   bytes of the whole frame, header included
    12     4    partition_leader_epoch   int32   epoch of the leader that appended it
    16     2    magic                    b"SL"
    18     1    version                  uint8   1 (dense) or 2 (rows carry offsets)
    19     1    reserved                 uint8   = 0
    20     4    crc                      uint32  CRC-32C of bytes [24, frame_length)
    24     2    attributes               uint16  bits 0-2 codec, 4 transactional,
                                                 5 control, 6 log-append-time
    26     2    producer_epoch           int16   -1 without an idempotent producer
    28     4    record_count             int32   records stored in the frame
    32     8    first_timestamp          int64   ms since the epoch, first stored record
    40     8    max_timestamp            int64   ms since the epoch, max over records
    48     8    producer_id              int64   -1 without an idempotent producer
    56     4    base_sequence            int32   -1 without an idempotent producer
    60     4    schema_id                int32

Version 1 (``VERSION_DENSE``, what producers write and the leader appends): the Arrow
message starts at byte 64, ``record_count >= 1``, and record ``i`` has offset
``base_offset + i``; the frame covers offsets ``[base_offset, base_offset + record_count)``.

Version 2 (``VERSION_OFFSETS``, written by compaction): rows carry their own offsets,
as Kafka's record batches keep per-record offset deltas and the batch's last offset delta:

    64     4    last_offset_delta        int32   the frame covers [base_offset, base_offset + last_offset_delta]
    68     4    reserved                 int32   = 0
    72     4*n  offset deltas            uint32  record i has offset base_offset + delta[i]; strictly
                                                 increasing, each <= last_offset_delta (n = record_count)
    ...         zero padding to a multiple of 8 bytes, then the Arrow message (none when n = 0)

A v2 frame covers the same offsets as the frame(s) it was cleaned from, so frames still
tile the offset space (each starts where the previous one ended) and a log never has a
gap *between* frames: compaction's gaps are rows missing *inside* a frame's range.
``record_count`` may be 0 in v2: such a frame holds no records.  With ``producer_id >= 0``
it says "this frame's records were removed but its producer information stays" (the
producer's id, epoch and sequences ``base_sequence .. base_sequence + last_offset_delta``,
as Kafka keeps an emptied batch of an active producer); with ``producer_id = -1`` it only
fills the offsets of frames that compaction removed whole.  Sequences follow offsets in
both versions: the record at offset ``base_offset + d`` has sequence ``base_sequence + d``.

Control frames (attribute bit 5) carry broker records, never user data: one row of
``CONTROL_SCHEMA`` (``type`` int16, ``payload`` binary), schema id -1, uncompressed
(``encode_control`` / ``decode_control``).  ``ControlType`` numbers them: 0 and 1 are kept
for transaction markers (abort, commit, as Kafka's control record types), 16 is a
compaction plan (``brokers/log/cleaner/plan.py``).  Consumers skip control frames; a
producer may not send them.

Readers accept both versions (old frames stay readable as they are); a v1 frame is a v2
frame whose deltas are ``0 .. record_count - 1``.  ``peek``/``parse_header`` refuse any other
version.
"""
from __future__ import annotations

import enum
import struct
import time
from dataclasses import dataclass
from typing import Any, Iterator, Literal, NamedTuple, Sequence

import crc32c as _crc32c
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from .arrays import binary_array, int16_array, timestamp_ms_array, to_numpy
from .errors import CorruptRecordError, InvalidRequestError
from .unfilled import unfilled_bytearray

__all__ = [
    "HEADER_SIZE",
    "V2_HEADER_SIZE",
    "MAGIC",
    "VERSION",
    "VERSION_DENSE",
    "VERSION_OFFSETS",
    "Codec",
    "DAMAGED_MESSAGE_ERRORS",
    "FrameHeader",
    "Peek",
    "encode_batch",
    "encode_message",
    "with_append_time",
    "encode_v2",
    "decode_batch",
    "parse_header",
    "peek",
    "verify_frame",
    "iter_frames",
    "record_offsets",
    "set_offset_and_epoch",
    "with_producer",
    "leader_header",
    "frame_body",
    "ipc_message",
    "read_message",
    "ControlType",
    "CONTROL_SCHEMA",
    "encode_control",
    "decode_control",
    "encode_marker",
    "marker_of",
]

MAGIC = b"SL"
VERSION_DENSE = 1
VERSION_OFFSETS = 2
VERSION = VERSION_DENSE  # what producers write
HEADER_SIZE = 64  # the v1 header, and the part both versions share
V2_HEADER_SIZE = 72  # the v2 header before its offset deltas
PEEK_SIZE = V2_HEADER_SIZE  # bytes ``peek`` needs (every frame is at least this long)
MIN_FRAME_SIZE = HEADER_SIZE + 8
_HEADER = struct.Struct("<qii2sBBIHhiqqqii")
assert _HEADER.size == HEADER_SIZE
_V2_EXTENSION = struct.Struct("<ii")  # last_offset_delta, reserved at 64
_PEEK = struct.Struct("<qii2sBB")  # base_offset, frame_length, epoch, magic, version, reserved
_PEEK_TAIL = struct.Struct("<iqqq")  # at byte 28: record_count, first_timestamp, max_timestamp, producer_id
_PEEK_TAIL_AT = 28
_PEEK_ATTRIBUTES = struct.Struct("<H")  # at 24
_LAST_DELTA = struct.Struct("<i")  # at 64 in v2
_LAST_DELTA_AT = 64
_BASE_OFFSET = struct.Struct("<q")  # at 0
_EPOCH = struct.Struct("<i")  # at 12
_EPOCH_AT = 12
_CRC = struct.Struct("<I")  # at 20
_CRC_AT = 20
_CRC_START = 24
_PRODUCER = struct.Struct("<qi")  # producer_id, base_sequence at 48
_PRODUCER_AT = 48
_LENGTH = struct.Struct("<i")  # frame_length at 8
_LENGTH_AT = 8
_ATTRIBUTES = struct.Struct("<H")  # at 24
_ATTRIBUTES_AT = 24
_TIMESTAMPS = struct.Struct("<qq")  # first_timestamp, max_timestamp at 32
_TIMESTAMPS_AT = 32
_MAX_DELTA = 2**31 - 1

ATTR_CODEC_MASK = 0x07
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_LOG_APPEND_TIME = 0x40


def _deltas_bytes(count: int) -> int:
    """Bytes of a v2 frame's offset deltas, padded to a multiple of 8."""
    return (4 * count + 7) & ~7


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
    """A parsed header (either version; see the module docstring).  ``last_offset_delta``
    is ``record_count - 1`` for v1 frames (and ignored when a v1 header is built by hand)."""

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
    version: int = VERSION_DENSE
    last_offset_delta: int = -1

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
    def span(self) -> int:
        """How many offsets the frame covers: ``[base_offset, base_offset + span)``."""
        return self.record_count if self.version == VERSION_DENSE else self.last_offset_delta + 1

    @property
    def last_offset(self) -> int:
        """The last offset the frame covers (its last record's, unless compaction removed it)."""
        return self.base_offset + self.span - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.span

    @property
    def last_sequence(self) -> int:
        return -1 if self.base_sequence < 0 else self.base_sequence + self.span - 1

    @property
    def body_start(self) -> int:
        """Where the Arrow message starts, relative to the frame."""
        if self.version == VERSION_DENSE:
            return HEADER_SIZE
        return V2_HEADER_SIZE + _deltas_bytes(self.record_count)


class Peek(NamedTuple):
    """The header fields a storage scan needs, read without building a ``FrameHeader``."""

    base_offset: int
    length: int
    epoch: int
    record_count: int
    max_timestamp: int
    next_offset: int
    attributes: int
    producer_id: int


def crc32c(data: bytes | bytearray | memoryview) -> int:
    return int(_crc32c.crc32c(data))


# use_threads=False (the default here): Arrow would hand each buffer's compression to its thread
# pool, which for a 16 KiB frame costs 5x the compression itself (80 us of CPU against 15), and
# on the small machines spark-log runs on the pool only competes with the process's own threads.
_WRITE_OPTIONS = {(codec, threads): ipc.IpcWriteOptions(compression=codec.arrow_name, use_threads=threads)
                  for codec in Codec for threads in (True, False)}
_READ_OPTIONS = ipc.IpcReadOptions(use_threads=False)
_SCHEMA_MESSAGES: dict[pa.Schema, bytes] = {}
_SCHEMA_LENGTHS: dict[tuple[pa.Schema, "Codec"], int] = {}
_EOS_SIZE = 8  # the IPC stream's end marker: continuation token and a zero length


def ipc_message(batch: pa.RecordBatch, codec: Codec, *, use_threads: bool = False) -> pa.Buffer:
    """``batch`` as one encapsulated Arrow IPC record-batch message (schema not included),
    its body compressed with ``codec``: the part of a frame after its header.  ``use_threads``
    True lets Arrow compress the buffers on its thread pool (only worth it for large frames
    on an idle machine; see ``_WRITE_OPTIONS``)."""
    if codec == Codec.NONE:
        return batch.serialize()  # the same bytes as the stream writer's message, 20x cheaper
    sink = pa.BufferOutputStream()
    options = _WRITE_OPTIONS[codec, use_threads]
    with ipc.new_stream(sink, batch.schema, options=options) as writer:
        writer.write_batch(batch)
    stream = sink.getvalue()
    # the stream is: the schema's message, the batch's message, the 8-byte end marker; the
    # schema's message is as long as in an empty stream of the same schema (cached), so the
    # batch's message is a zero-copy slice (a MessageReader parse and re-serialise cost 2x
    # the compression itself for a 16 KiB frame)
    key = (batch.schema, codec)
    start = _SCHEMA_LENGTHS.get(key)
    if start is None:
        empty = pa.BufferOutputStream()
        ipc.new_stream(empty, batch.schema, options=options).close()
        start = _SCHEMA_LENGTHS[key] = empty.getvalue().size - _EOS_SIZE
        if len(_SCHEMA_LENGTHS) > 256:  # topics' schemas: a handful; never unbounded
            _SCHEMA_LENGTHS.clear()
    return stream.slice(start, stream.size - _EOS_SIZE - start)


# What ``read_message`` raises for a damaged message: pyarrow's own errors, and its
# ArrowMemoryError when a damaged buffer length asks for more memory than there is.  Its
# callers report any of them as CorruptRecordError.
DAMAGED_MESSAGE_ERRORS = (pa.ArrowInvalid, pa.ArrowIOError, pa.ArrowMemoryError, OSError, StopIteration)


def read_message(body: pa.Buffer, schema: pa.Schema, codec: Codec) -> pa.RecordBatch:
    """The record batch in an encapsulated IPC message (a frame's body) of ``schema``.

    Uncompressed: zero-copy (``ipc.read_record_batch``).  Compressed: read as a stream
    behind the schema's message with ``use_threads=False`` (``read_record_batch`` has no
    options and decompresses each buffer on Arrow's thread pool: 60 us of CPU for a 16 KiB
    frame instead of 10; the one copy of the compressed bytes costs less than that).
    Raises one of ``DAMAGED_MESSAGE_ERRORS`` for a damaged message."""
    if codec == Codec.NONE:
        return ipc.read_record_batch(body, schema)
    head = _SCHEMA_MESSAGES.get(schema)
    if head is None:
        head = _SCHEMA_MESSAGES[schema] = schema.serialize().to_pybytes()
        if len(_SCHEMA_MESSAGES) > 256:  # topics' schemas: a handful; never unbounded
            _SCHEMA_MESSAGES.clear()
    stream = unfilled_bytearray(len(head) + body.size)  # one copy of the body behind the schema (each byte written)
    view = memoryview(stream)  # a bytearray's own slice assignment from a view copies the view first
    view[:len(head)] = head
    view[len(head):] = memoryview(body).cast("B")
    view.release()
    reader = ipc.open_stream(pa.py_buffer(stream), options=_READ_OPTIONS)
    batch = reader.read_next_batch()
    return batch


_TIMESTAMP_MS = pa.timestamp("ms")


def _timestamps(batch: pa.RecordBatch, default_ms: int) -> tuple[int, int]:
    index = batch.schema.get_field_index("timestamp")
    if index < 0 or batch.num_rows == 0 or not pa.types.is_timestamp(batch.schema.field(index).type):
        return default_ms, default_ms
    column = batch.column(index)
    if column.type == _TIMESTAMP_MS and not column.null_count:  # the common case, without casts
        values = to_numpy(column.view(pa.int64()))
        return int(values[0]), int(values.max())
    column = column.cast(pa.timestamp("ms")).cast(pa.int64())
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
    """Encode one record batch as a version-1 (dense) frame.

    Timestamps come from a ``timestamp`` column when the batch has one (bytes topics),
    otherwise every record gets ``timestamp_ms`` (default: now).  Raises
    ``InvalidRequestError`` for an empty batch or an unknown compression name.
    """
    if batch.num_rows == 0:
        raise InvalidRequestError("a frame must hold at least one record")
    codec = Codec.parse(compression)
    now = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
    first_ts, max_ts = _timestamps(batch, now)
    return encode_message(ipc_message(batch, codec), codec=codec, record_count=batch.num_rows,
                          first_timestamp=first_ts, max_timestamp=max_ts, schema_id=schema_id,
                          base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                          producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                          transactional=transactional, control=control)


def encode_message(
    message: "pa.Buffer | bytes",
    *,
    codec: Codec,
    record_count: int,
    first_timestamp: int,
    max_timestamp: int,
    schema_id: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """A version-1 frame around ``message`` (``ipc_message`` of ``record_count`` records
    compressed with ``codec``, or ``bytes_message.encode``'s same bytes), for callers that know the records' timestamps already
    (the producer keeps them as Python ints): ``encode_batch`` without reading them back."""
    attributes = int(codec)
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    head = bytearray(HEADER_SIZE)  # the header alone, then one copy of header + message into the frame
    body = memoryview(message)
    _HEADER.pack_into(
        head, 0, base_offset, HEADER_SIZE + body.nbytes, partition_leader_epoch, MAGIC, VERSION_DENSE, 0, 0,
        attributes, producer_epoch, record_count, first_timestamp, max_timestamp, producer_id,
        base_sequence, schema_id,
    )
    crc = _crc32c.crc32c(body, _crc32c.crc32c(memoryview(head)[_CRC_START:]))
    _CRC.pack_into(head, _CRC_AT, int(crc))
    return b"".join((head, body))


def encode_v2(
    *,
    base_offset: int,
    last_offset_delta: int,
    deltas: "npt.NDArray[np.integer] | Sequence[int]",
    message: "bytes | bytearray | memoryview | pa.Buffer | None",
    partition_leader_epoch: int,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    first_timestamp: int,
    max_timestamp: int,
    schema_id: int = -1,
) -> bytes:
    """A version-2 frame (rows carry offsets; module docstring) with its CRC.

    ``deltas`` are the records' offsets minus ``base_offset`` (strictly increasing, each
    in ``[0, last_offset_delta]``); ``message`` is their Arrow IPC message (``ipc_message``,
    or a v1 frame's ``frame_body`` when every record stays), None when ``deltas`` is empty.
    ``attributes`` must describe ``message`` (its codec).  Raises ``InvalidRequestError``
    for deltas that break those rules or a message that does not match them."""
    offsets = np.asarray(deltas, dtype=np.int64)
    count = int(offsets.size)
    if not 0 <= last_offset_delta <= _MAX_DELTA:
        raise InvalidRequestError(f"last_offset_delta must be within [0, 2**31), got {last_offset_delta}")
    if count and (int(offsets[0]) < 0 or int(offsets[-1]) > last_offset_delta
                  or (count > 1 and bool(np.any(np.diff(offsets) <= 0)))):
        raise InvalidRequestError("offset deltas must be strictly increasing within [0, last_offset_delta]")
    if (message is None) != (count == 0):
        raise InvalidRequestError("a v2 frame has an Arrow message exactly when it holds records")
    body = memoryview(message) if message is not None else memoryview(b"")
    start = V2_HEADER_SIZE + _deltas_bytes(count)
    head = bytearray(start)  # header and deltas, then one copy of them and the body into the frame
    head[V2_HEADER_SIZE: V2_HEADER_SIZE + 4 * count] = offsets.astype("<u4").tobytes()
    _HEADER.pack_into(
        head, 0, base_offset, start + body.nbytes, partition_leader_epoch, MAGIC, VERSION_OFFSETS, 0, 0,
        attributes, producer_epoch, count, first_timestamp, max_timestamp, producer_id,
        base_sequence, schema_id,
    )
    _V2_EXTENSION.pack_into(head, HEADER_SIZE, last_offset_delta, 0)
    crc = _crc32c.crc32c(body, _crc32c.crc32c(memoryview(head)[_CRC_START:]))
    _CRC.pack_into(head, _CRC_AT, int(crc))
    return b"".join((head, body))


def _bad(position: int, what: str) -> CorruptRecordError:
    return CorruptRecordError(f"impossible frame at byte {position}: {what}")


def parse_header(buf: bytes | bytearray | memoryview, position: int = 0) -> FrameHeader:
    """Parse the header at ``position`` (without checking the CRC), either version.

    Raises ``CorruptRecordError`` for a truncated header, bad magic or version, or a
    length that is impossible or runs past the end of ``buf``.
    """
    available = len(buf) - position
    if available < HEADER_SIZE:
        raise CorruptRecordError(f"truncated frame at byte {position}: {available} of {HEADER_SIZE} header bytes")
    fields = _HEADER.unpack_from(buf, position)
    (base_offset, length, epoch, magic, version, _reserved, crc, attributes, producer_epoch,
     count, first_ts, max_ts, producer_id, base_sequence, schema_id) = fields
    if magic != MAGIC or version not in (VERSION_DENSE, VERSION_OFFSETS):
        raise CorruptRecordError(f"bad magic or version at byte {position}: {magic!r} v{version}")
    if version == VERSION_DENSE:
        if length < MIN_FRAME_SIZE or count < 1:
            raise _bad(position, f"length {length}, records {count}")
        last_delta = count - 1
    else:
        if available < V2_HEADER_SIZE:
            raise CorruptRecordError(f"truncated frame at byte {position}: {available} of {V2_HEADER_SIZE} header bytes")
        last_delta, reserved = _V2_EXTENSION.unpack_from(buf, position + HEADER_SIZE)
        body_start = V2_HEADER_SIZE + _deltas_bytes(max(count, 0))
        if (count < 0 or last_delta < count - 1 or last_delta < 0 or reserved != 0
                or length < (body_start + 8 if count else V2_HEADER_SIZE) or (not count and length != V2_HEADER_SIZE)):
            raise _bad(position, f"v2 length {length}, records {count}, last offset delta {last_delta}")
    if length > available:
        raise CorruptRecordError(f"truncated frame at byte {position}: {available} of {length} bytes")
    if attributes & ATTR_CODEC_MASK not in (0, 1, 2):
        raise CorruptRecordError(f"unknown codec in frame at byte {position}")
    return FrameHeader(base_offset, length, epoch, crc, attributes, producer_epoch, count,
                       first_ts, max_ts, producer_id, base_sequence, schema_id, version, last_delta)


def peek(buf: bytes | bytearray | memoryview, at: int, position: int) -> Peek:
    """The storage fields of the frame whose header starts at ``buf[at:]`` (file
    ``position``, for messages), without the CRC and without needing the whole frame in
    ``buf`` (``PEEK_SIZE`` bytes are always enough; ``HEADER_SIZE`` for version 1).  Checks magic, version, a possible length and
    record count.  Raises ``CorruptRecordError``."""
    available = len(buf) - at
    if available < HEADER_SIZE:
        raise CorruptRecordError(f"truncated frame header at byte {position}")
    base, length, epoch, magic, version, _reserved = _PEEK.unpack_from(buf, at)
    count, _first_ts, max_ts, producer_id = _PEEK_TAIL.unpack_from(buf, at + _PEEK_TAIL_AT)
    (attributes,) = _PEEK_ATTRIBUTES.unpack_from(buf, at + _ATTRIBUTES_AT)
    if magic != MAGIC or version not in (VERSION_DENSE, VERSION_OFFSETS) or length < V2_HEADER_SIZE:
        raise CorruptRecordError(
            f"bad frame header at byte {position}: magic {magic!r} v{version}, length {length}, records {count}")
    if version == VERSION_DENSE:
        if count < 1 or length < MIN_FRAME_SIZE:
            raise CorruptRecordError(f"bad frame header at byte {position}: v1 length {length}, records {count}")
        return Peek(base, length, epoch, count, max_ts, base + count, attributes, producer_id)
    if available < PEEK_SIZE:
        raise CorruptRecordError(f"truncated frame header at byte {position}")
    (last_delta,) = _LAST_DELTA.unpack_from(buf, at + _LAST_DELTA_AT)
    if count < 0 or last_delta < 0 or last_delta < count - 1 or length < V2_HEADER_SIZE + _deltas_bytes(count):
        raise CorruptRecordError(
            f"bad frame header at byte {position}: v2 length {length}, records {count}, last offset delta {last_delta}")
    return Peek(base, length, epoch, count, max_ts, base + last_delta + 1, attributes, producer_id)


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


def record_offsets(buf: bytes | bytearray | memoryview, header: FrameHeader, position: int = 0) -> npt.NDArray[np.int64]:
    """The offset of every record of the frame at ``position`` (int64, ascending): dense
    for v1, ``base_offset + delta[i]`` for v2.  Raises ``CorruptRecordError`` for v2 deltas
    that are not strictly increasing within the frame's range."""
    count = header.record_count
    if header.version == VERSION_DENSE:
        return np.arange(header.base_offset, header.base_offset + count, dtype=np.int64)
    start = position + V2_HEADER_SIZE
    deltas = np.frombuffer(buf, dtype="<u4", count=count, offset=start).astype(np.int64)
    if count and (int(deltas[-1]) > header.last_offset_delta or (count > 1 and bool(np.any(np.diff(deltas) <= 0)))):
        raise CorruptRecordError(f"frame at offset {header.base_offset} has offset deltas out of order or range")
    deltas += header.base_offset
    return deltas


def set_offset_and_epoch(frame: bytearray | memoryview, base_offset: int, epoch: int, position: int = 0) -> None:
    """Rewrite a frame's base offset and leader epoch in place (the CRC stays valid)."""
    _BASE_OFFSET.pack_into(frame, position, base_offset)
    _EPOCH.pack_into(frame, position + _EPOCH_AT, epoch)


def with_producer(frame: bytes | bytearray | memoryview, producer_id: int, base_sequence: int) -> bytes:
    """A copy of the (version-1) frame ``frame`` whose records carry ``producer_id`` and
    sequences from ``base_sequence`` (CRC recomputed): a producer re-stamps frames it could
    not deliver under a producer id the broker forgot (KIP-360; ``Producer``)."""
    out = bytearray(frame)
    _PRODUCER.pack_into(out, _PRODUCER_AT, producer_id, base_sequence)
    length = _LENGTH.unpack_from(out, _LENGTH_AT)[0]
    _CRC.pack_into(out, _CRC_AT, int(_crc32c.crc32c(memoryview(out)[_CRC_START:length])))
    return bytes(out)


def frame_body(buf: bytes | bytearray | memoryview, header: FrameHeader, position: int = 0) -> memoryview:
    """The Arrow IPC message of the frame at ``position`` (everything after its header and,
    in v2, its offset deltas), as a view of ``buf`` (no copy; empty for a v2 frame without
    records).  ``header`` is that frame's parsed header."""
    return memoryview(buf)[position + header.body_start: position + header.frame_length]


def leader_header(buf: bytes | bytearray | memoryview, header: FrameHeader, position: int = 0, *,
                  base_offset: int, epoch: int, append_time_ms: int | None = None) -> bytearray:
    """A copy of the header of the (version-1) frame at ``position`` as a leader writes it:
    base offset and leader epoch set (outside the CRC).  With ``append_time_ms`` (a
    ``LogAppendTime`` topic) both timestamps become it, the log-append-time attribute bit is
    set and the CRC is recomputed over the new header's protected bytes and the unchanged
    body; the frame is then ``leader_header(...) + frame_body(...)``.  ``header`` is the
    frame's parsed (already verified) header; ``buf`` is not modified."""
    head = bytearray(memoryview(buf)[position: position + HEADER_SIZE])
    _BASE_OFFSET.pack_into(head, 0, base_offset)
    _EPOCH.pack_into(head, _EPOCH_AT, epoch)
    if append_time_ms is not None:
        _ATTRIBUTES.pack_into(head, _ATTRIBUTES_AT, header.attributes | ATTR_LOG_APPEND_TIME)
        _TIMESTAMPS.pack_into(head, _TIMESTAMPS_AT, append_time_ms, append_time_ms)
        crc = _crc32c.crc32c(frame_body(buf, header, position), _crc32c.crc32c(bytes(head[_CRC_START:])))
        _CRC.pack_into(head, _CRC_AT, int(crc))
    return head


def with_append_time(batch: pa.RecordBatch, append_time_ms: int) -> pa.RecordBatch:
    """``batch`` (a bytes topic's frame, whose ``timestamp`` column is each record's) with
    every record's timestamp ``append_time_ms``: in a ``LogAppendTime`` topic the leader
    stamps only the frame's header (its bytes are stored as the producer sent them), so the
    column keeps the producer's CreateTime, and a reader takes the header's (Kafka's
    consumers do the same with a batch's LogAppendTime attribute)."""
    at = batch.schema.get_field_index("timestamp")
    if at < 0:
        return batch
    stamps = timestamp_ms_array(np.full(batch.num_rows, append_time_ms, dtype=np.int64))
    return batch.set_column(at, batch.schema.field(at), stamps.cast(batch.schema.field(at).type))


def decode_batch(frame: "bytes | bytearray | memoryview | pa.Buffer", schema: pa.Schema, *, verify: bool = False) -> pa.RecordBatch:
    """Decode a frame's records with ``schema``; zero-copy for uncompressed frames.  A v2
    frame without records decodes to an empty batch (``record_offsets`` gives the offsets).

    Raises ``CorruptRecordError`` when the frame or its Arrow message is damaged, and
    ``SchemaMismatchError``-worthy problems surface as ``CorruptRecordError`` too (the
    caller chose the schema by the frame's id).
    """
    buffer = frame if isinstance(frame, pa.Buffer) else pa.py_buffer(frame)
    view = memoryview(buffer)
    header = verify_frame(view) if verify else parse_header(view)
    if header.record_count == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    start = header.body_start
    body = buffer.slice(start, header.frame_length - start)
    try:
        batch = read_message(body, schema, header.codec)
    except DAMAGED_MESSAGE_ERRORS as exc:
        raise CorruptRecordError(f"frame at offset {header.base_offset} does not hold a valid Arrow batch: {exc}") from None
    if batch.num_rows != header.record_count:
        raise CorruptRecordError(
            f"frame at offset {header.base_offset} claims {header.record_count} records, holds {batch.num_rows}"
        )
    return batch


class ControlType(enum.IntEnum):
    """What a control frame carries (its ``type`` column)."""

    ABORT = 0  # a transaction's abort marker (encode_marker)
    COMMIT = 1  # a transaction's commit marker (encode_marker)
    COMPACTION_PLAN = 16  # the leader's compaction plan (brokers/log/cleaner/plan.py)
    TIERED = 17  # the Delta tier holds [start, end) of the partition (brokers/partition/tiering.py)


_CONTROL_FIELDS: list["pa.Field[Any]"] = [pa.field("type", pa.int16(), nullable=False),
                                           pa.field("payload", pa.binary(), nullable=False)]
CONTROL_SCHEMA = pa.schema(_CONTROL_FIELDS)
CONTROL_SCHEMA_ID = -1


def encode_control(control_type: int, payload: bytes, *, timestamp_ms: int, base_offset: int = 0,
                   partition_leader_epoch: int = -1) -> bytes:
    """A version-1 control frame holding one ``(type, payload)`` row (module docstring)."""
    batch = pa.record_batch([int16_array([control_type]), binary_array([payload])],
                            schema=CONTROL_SCHEMA)
    return encode_batch(batch, schema_id=CONTROL_SCHEMA_ID, compression=Codec.NONE, timestamp_ms=timestamp_ms,
                        base_offset=base_offset, partition_leader_epoch=partition_leader_epoch, control=True)


def decode_control(buf: bytes | bytearray | memoryview, header: FrameHeader, position: int = 0) -> tuple[int, bytes]:
    """``(type, payload)`` of the control frame at ``position``.  Raises ``CorruptRecordError``
    when it is not a control frame of ``CONTROL_SCHEMA`` with one row."""
    if not header.is_control or header.schema_id != CONTROL_SCHEMA_ID or header.record_count != 1:
        raise CorruptRecordError(f"frame at offset {header.base_offset} is not a control record")
    batch = decode_batch(memoryview(buf)[position: position + header.frame_length], CONTROL_SCHEMA)
    kind, payload = batch.column(0)[0].as_py(), batch.column(1)[0].as_py()
    if not isinstance(kind, int) or not isinstance(payload, bytes):
        raise CorruptRecordError(f"control frame at offset {header.base_offset} is damaged")
    return kind, payload


_MARKER_PAYLOAD = struct.Struct("<i")  # the coordinator epoch that wrote the marker


def encode_marker(commit: bool, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                  timestamp_ms: int) -> bytes:
    """A transaction marker: a control frame (also flagged transactional) of type COMMIT or
    ABORT, carrying the producer's id and epoch in its header (as Kafka's control batches),
    and the writing coordinator's epoch as its payload.  Only brokers write it.
    ``InvalidRequestError`` for an epoch a frame cannot hold (an int16 producer epoch, an
    int32 coordinator epoch)."""
    if not 0 <= producer_epoch <= 32_767 or not 0 <= coordinator_epoch < 2**31:
        raise InvalidRequestError(f"a transaction marker needs a producer epoch in [0, 32767] and a coordinator "
                                  f"epoch in [0, 2**31), got {producer_epoch} and {coordinator_epoch}")
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    batch = pa.record_batch([int16_array([int(kind)]), binary_array([_MARKER_PAYLOAD.pack(coordinator_epoch)])],
                            schema=CONTROL_SCHEMA)
    return encode_batch(batch, schema_id=CONTROL_SCHEMA_ID, compression=Codec.NONE, timestamp_ms=timestamp_ms,
                        producer_id=producer_id, producer_epoch=producer_epoch, transactional=True, control=True)


def marker_of(buf: bytes | bytearray | memoryview, header: FrameHeader, position: int = 0) -> bool | None:
    """For a transaction marker at ``position``: True (commit) or False (abort); None for any
    other frame (data, or another control record such as a compaction plan)."""
    if not (header.is_control and header.is_transactional) or header.record_count != 1:
        return None
    kind, _ = decode_control(buf, header, position)
    if kind == ControlType.COMMIT:
        return True
    if kind == ControlType.ABORT:
        return False
    return None
