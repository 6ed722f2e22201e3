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

Thread-safety: a pure function of its input.
"""
from __future__ import annotations

from typing import NamedTuple

from google.protobuf.message import DecodeError

from .errors import CorruptRecordError
from .proto import broker_pb2 as pb

__all__ = ["FetchAnswer", "FetchedPartition", "parse_fetch_response", "encode_produce_request"]

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


def _varint(buf: bytes | memoryview, at: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= end or shift > 63:
            raise CorruptRecordError("malformed fetch response: a varint runs past its message")
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
    raise CorruptRecordError(f"malformed fetch response: wire type {wire}")


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
