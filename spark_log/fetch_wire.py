"""Fetch answers read and Produce requests written without copying their record bytes.

The generated ``FetchResponse.FromString`` copies every partition's ``records`` into the
message, and reading the field copies it again into a new ``bytes``: two copies of
everything a consumer or a follower fetches.  ``parse_fetch_response`` walks the wire
bytes of the response instead (protobuf's encoding, fields in any order), parses each
``FetchPartitionResult`` without its payload (the small fields, through the generated
class) and hands the payload (``records``, field 8, or ``arrow_stream``, field 9) out as a
read-only ``memoryview`` of the response bytes.  The result is what the generated parser
would give (tests compare both); a malformed response raises ``CorruptRecordError``.

``encode_produce_request`` is the other direction: a serialised ``ProduceRequest`` built
with one copy of its frames (the generated message would copy them in, then out again).
``parse_produce_request`` reads one back as the brokers' data listener receives it, into a
``ProduceView`` whose records are views of the request (the generated parser copies each
partition's records in, and each read of the field copies them out again).  It follows
protobuf's rules where a request can rely on them: fields in any order, the last value of
a repeated scalar wins, unknown fields skipped, absent fields zero (proto3), ``int32`` as the
varint's low 32 bits.  What is not a well-formed encoding (a truncated varint or field, a
field number 0, a group, a known field of another wire type, a string that is not UTF-8)
raises ``InvalidRequestError``.

Thread-safety: pure functions of their input; the views are as safe as the buffer under them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from google.protobuf.message import DecodeError

from .errors import CorruptRecordError, InvalidRequestError
from .proto import broker_pb2 as pb

__all__ = ["FetchAnswer", "FetchedPartition", "parse_fetch_response", "encode_produce_request", "ProduceEntry",
           "ProduceView", "parse_produce_request", "put_varint"]

_RECORDS = 8
_ARROW_STREAM = 9
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class FetchedPartition(NamedTuple):
    """One partition's answer: its small fields, and its payload as a view (or None)."""

    result: pb.FetchPartitionResult  # records and arrow_stream left empty
    records: memoryview | None
    arrow_stream: memoryview | None


class FetchAnswer(NamedTuple):
    partitions: list[FetchedPartition]
    throttle_time_ms: int


class _Malformed(Exception):
    """Not a well-formed protobuf encoding; the public readers raise their own typed error."""


def _varint(buf: bytes | memoryview, at: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= end or shift > 63:
            raise _Malformed("a varint runs past its message")
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _skip(buf: bytes | memoryview, wire: int, at: int, end: int) -> int:
    """Where the field whose value starts at ``at`` ends."""
    if wire == _VARINT:
        return _varint(buf, at, end)[1]
    if wire == _I64:
        return at + 8
    if wire == _I32:
        return at + 4
    if wire == _LEN:
        size, at = _varint(buf, at, end)
        return at + size
    raise _Malformed(f"wire type {wire}")


def _partition(view: memoryview, start: int, end: int) -> FetchedPartition:
    payloads: dict[int, memoryview] = {}
    rest: list[memoryview] = []
    at = start
    while at < end:
        field_start = at
        key, at = _varint(view, at, end)
        field, wire = key >> 3, key & 7
        if wire == _LEN and field in (_RECORDS, _ARROW_STREAM):
            size, at = _varint(view, at, end)
            if at + size > end:
                raise CorruptRecordError("malformed fetch response: a payload runs past its partition")
            payloads[field] = view[at: at + size]
            at += size
            continue
        at = _skip(view, wire, at, end)
        if at > end:
            raise CorruptRecordError("malformed fetch response: a field runs past its partition")
        rest.append(view[field_start: at])
    try:
        result = pb.FetchPartitionResult.FromString(b"".join(rest))
    except DecodeError as exc:
        raise CorruptRecordError(f"malformed fetch response: {exc}") from None
    return FetchedPartition(result, payloads.get(_RECORDS), payloads.get(_ARROW_STREAM))


def parse_fetch_response(data: bytes) -> FetchAnswer:
    """The partitions and throttle time of a serialised ``FetchResponse`` (module docstring)."""
    try:
        return _fetch_response(data)
    except _Malformed as exc:
        raise CorruptRecordError(f"malformed fetch response: {exc}") from None


def _fetch_response(data: bytes) -> FetchAnswer:
    view = memoryview(data).toreadonly()
    end = len(view)
    partitions: list[FetchedPartition] = []
    throttle = 0
    at = 0
    while at < end:
        key, at = _varint(view, at, end)
        field, wire = key >> 3, key & 7
        if field == 1 and wire == _LEN:
            size, at = _varint(view, at, end)
            if at + size > end:
                raise CorruptRecordError("malformed fetch response: a partition runs past the response")
            partitions.append(_partition(view, at, at + size))
            at += size
        elif field == 2 and wire == _VARINT:
            value, at = _varint(view, at, end)
            throttle = value - (1 << 64) if value >= 1 << 63 else value
        else:
            at = _skip(view, wire, at, end)
    if at != end:
        raise CorruptRecordError("malformed fetch response: its last field runs past its end")
    return FetchAnswer(partitions, throttle)


@dataclass(frozen=True, slots=True)
class ProduceEntry:
    """One partition's records of a produce request, as a view of the request."""

    topic: str
    partition: int
    records: memoryview
    current_leader_epoch: int = 0


@dataclass(frozen=True, slots=True)
class ProduceView:
    """A produce request whose entries' records are views of the request."""

    acks: int
    timeout_ms: int
    transactional_id: str
    partitions: tuple[ProduceEntry, ...]


def parse_produce_request(data: memoryview) -> ProduceView:
    """``data`` (a serialised ``ProduceRequest``) read as the module docstring says; each
    entry's records a view of ``data``.  Raises ``InvalidRequestError``."""
    try:
        data = data.cast("B") if data.format != "B" or data.ndim != 1 else data
        acks = timeout_ms = 0
        transactional_id = ""
        entries: list[ProduceEntry] = []
        for number, value in _fields(data):
            if number == 1:
                acks = _varint_field(number, value)
            elif number == 2:
                timeout_ms = _varint_field(number, value)
            elif number == 3:
                transactional_id = _text(number, value)
            elif number == 4:
                entries.append(_produce_entry(_bytes_field(number, value)))
        return ProduceView(acks, timeout_ms, transactional_id, tuple(entries))
    except _Malformed as exc:
        raise InvalidRequestError(f"malformed ProduceRequest: {exc}") from None


def _produce_entry(data: memoryview) -> ProduceEntry:
    topic, partition, records, epoch = "", 0, data[0:0], 0
    for number, value in _fields(data):
        if number == 1:
            topic = _text(number, value)
        elif number == 2:
            partition = _varint_field(number, value)
        elif number == 3:
            records = _bytes_field(number, value)
        elif number == 4:
            epoch = _varint_field(number, value)
    return ProduceEntry(topic, partition, records, epoch)


def _fields(data: memoryview) -> list[tuple[int, int | memoryview]]:
    """``(field number, value)`` of every field of one produce message: varints as ints,
    length-delimited fields as views.  Fixed-width fields are skipped unless their number is
    one both messages know (1 to 4: none of them is fixed-width), which is refused."""
    out: list[tuple[int, int | memoryview]] = []
    at, end = 0, len(data)
    while at < end:
        key, at = _varint(data, at, end)
        number, wire = key >> 3, key & 7
        if not 0 < number < 1 << 29:
            raise _Malformed(f"field number {number}")
        if wire == _VARINT:
            value, at = _varint(data, at, end)
            out.append((number, value))
        elif wire == _LEN:
            length, at = _varint(data, at, end)
            if length > end - at:
                raise _Malformed("a field runs past the end")
            out.append((number, data[at: at + length]))
            at += length
        elif wire in (_I64, _I32):
            if number <= 4:
                raise _Malformed(f"field {number} is fixed-width")
            at = _skip(data, wire, at, end)
            if at > end:
                raise _Malformed("a field runs past the end")
        else:
            raise _Malformed(f"wire type {wire}")
    return out


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _varint_field(number: int, value: int | memoryview) -> int:
    """A known ``int32`` field's value (``_int32``); a field of another wire type is refused."""
    if not isinstance(value, int):
        raise _Malformed(f"field {number} is length-delimited, not a varint")
    return _int32(value)


def _bytes_field(number: int, value: int | memoryview) -> memoryview:
    """A known ``bytes`` or ``string`` field's view; a field of another wire type is refused."""
    if not isinstance(value, memoryview):
        raise _Malformed(f"field {number} is a varint, not length-delimited")
    return value


def _text(number: int, value: int | memoryview) -> str:
    try:
        return str(_bytes_field(number, value), "utf-8")
    except UnicodeDecodeError as exc:
        raise _Malformed(f"a string is not UTF-8: {exc}") from None


def put_varint(value: int) -> bytes:
    """Protobuf's base-128 varint of ``value`` (the brokers' hand-encoded answers use it too)."""
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


_PARTITIONS = (4 << 3) | _LEN  # ProduceRequest.partitions
_FRAMES = (3 << 3) | _LEN  # PartitionRecords.records


def encode_produce_request(*, acks: int, timeout_ms: int, transactional_id: str,
                           entries: list[tuple[str, int, bytes]]) -> bytes:
    """A serialised ``ProduceRequest`` of ``entries`` ``(topic, partition, frames)`` (each
    with ``current_leader_epoch`` -1), what ``ProduceRequest.SerializeToString`` would give
    up to field order (protobuf readers accept any order; tests parse it back)."""
    chunks: list[bytes] = [pb.ProduceRequest(acks=acks, timeout_ms=timeout_ms,
                                             transactional_id=transactional_id).SerializeToString()]
    for topic, partition, frames in entries:
        head = pb.PartitionRecords(topic=topic, partition=partition, current_leader_epoch=-1).SerializeToString()
        size = put_varint(len(frames))
        inner = len(head) + 1 + len(size) + len(frames)
        chunks += [put_varint(_PARTITIONS), put_varint(inner), head, put_varint(_FRAMES), size, frames]
    return b"".join(chunks)
