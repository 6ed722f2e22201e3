"""Produce requests as ``ProduceHandler`` reads them, with the records left where they came.

A protobuf ``ProduceRequest`` copies every partition's records when it is parsed, and again
on each read of the field (``perf`` of an RF=3 run: 4% of a broker's CPU in those copies).
The data listener therefore reads its two produce requests itself: ``PB_PRODUCE``'s
protobuf bytes with ``parse_produce_request`` (the ``ProduceRequest`` message of
``broker.proto``, read field by field as the protobuf encoding defines it), and
``PRODUCE``'s own framing into the same ``ProduceView``; each entry's records are a view of
the request's buffer.  gRPC's ``Produce`` passes its protobuf message: both have the shape
of ``ProduceRequestLike``.

Parsing follows protobuf's rules where a request can rely on them: fields in any order,
the last value of a repeated scalar wins, unknown fields are skipped, absent fields are
zero (proto3), ``int32`` values are the low 32 bits of their varint.  Anything that is not
a well-formed encoding (a truncated varint or field, a field number 0, a group, a known
field with another wire type, a string that is not UTF-8) raises ``InvalidRequestError``.

Thread-safety: pure functions; the views are as safe as the buffer under them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from spark_log.errors import InvalidRequestError

__all__ = ["ProduceEntryLike", "ProduceRequestLike", "ProduceEntry", "ProduceView", "parse_produce_request"]


class ProduceEntryLike(Protocol):
    """One partition's records: ``pb.PartitionRecords`` or ``ProduceEntry``."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def records(self) -> bytes | memoryview: ...

    @property
    def current_leader_epoch(self) -> int: ...


class ProduceRequestLike(Protocol):
    """A produce request: ``pb.ProduceRequest`` or ``ProduceView``."""

    @property
    def acks(self) -> int: ...

    @property
    def timeout_ms(self) -> int: ...

    @property
    def transactional_id(self) -> str: ...

    @property
    def partitions(self) -> Sequence[ProduceEntryLike]: ...


@dataclass(frozen=True, slots=True)
class ProduceEntry:
    topic: str
    partition: int
    records: memoryview
    current_leader_epoch: int = 0


@dataclass(frozen=True, slots=True)
class ProduceView:
    acks: int
    timeout_ms: int
    transactional_id: str
    partitions: tuple[ProduceEntry, ...]


_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    """The varint at ``at`` and the position after it."""
    value = shift = 0
    end = len(data)
    while True:
        if at >= end:
            raise InvalidRequestError("malformed ProduceRequest: a varint runs past the end")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift >= 70:
            raise InvalidRequestError("malformed ProduceRequest: a varint longer than 10 bytes")


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _fields(data: memoryview) -> list[tuple[int, int | memoryview]]:
    """``(field number, value)`` of every field of one message: varints as ints,
    length-delimited fields as views.  Fixed-width fields are skipped unless their number is
    one both messages know (1 to 4: none of them is fixed-width), which is refused."""
    out: list[tuple[int, int | memoryview]] = []
    at, end = 0, len(data)
    while at < end:
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if not 0 < number < 1 << 29:
            raise InvalidRequestError(f"malformed ProduceRequest: field number {number}")
        if wire == _VARINT:
            value, at = _varint(data, at)
            out.append((number, value))
        elif wire == _LEN:
            length, at = _varint(data, at)
            if length > end - at:
                raise InvalidRequestError("malformed ProduceRequest: a field runs past the end")
            out.append((number, data[at: at + length]))
            at += length
        elif wire in (_I64, _I32):
            if number <= 4:
                raise InvalidRequestError(f"malformed ProduceRequest: field {number} is fixed-width")
            at += 8 if wire == _I64 else 4
            if at > end:
                raise InvalidRequestError("malformed ProduceRequest: a field runs past the end")
        else:
            raise InvalidRequestError(f"malformed ProduceRequest: wire type {wire}")
    return out


def _varint_field(number: int, value: int | memoryview) -> int:
    """A known ``int32`` field's value (``_int32``); a field of another wire type is refused."""
    if not isinstance(value, int):
        raise InvalidRequestError(f"malformed ProduceRequest: field {number} is length-delimited, not a varint")
    return _int32(value)


def _bytes_field(number: int, value: int | memoryview) -> memoryview:
    """A known ``bytes`` or ``string`` field's view; a field of another wire type is refused."""
    if not isinstance(value, memoryview):
        raise InvalidRequestError(f"malformed ProduceRequest: field {number} is a varint, not length-delimited")
    return value


def _text(number: int, value: int | memoryview) -> str:
    try:
        return str(_bytes_field(number, value), "utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequestError(f"malformed ProduceRequest: a string is not UTF-8: {exc}") from None


def _entry(data: memoryview) -> ProduceEntry:
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


def parse_produce_request(data: memoryview) -> ProduceView:
    """``data`` (a serialised ``ProduceRequest``) read as the module docstring says; each
    entry's records a view of ``data``.  Raises ``InvalidRequestError``."""
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
            entries.append(_entry(_bytes_field(number, value)))
    return ProduceView(acks, timeout_ms, transactional_id, tuple(entries))
