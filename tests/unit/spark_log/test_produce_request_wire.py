"""spark_log.fetch_wire.parse_produce_request: the data listener's own reading of a
serialised ``ProduceRequest``, checked against protobuf's parser on the same bytes."""
from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log.fetch_wire import ProduceView, encode_produce_request, parse_produce_request, put_varint
from spark_log.errors import InvalidRequestError
from spark_log.proto import broker_pb2 as pb

int32 = st.integers(-(2**31), 2**31 - 1)
entries = st.builds(pb.PartitionRecords, topic=st.text(max_size=12), partition=int32, records=st.binary(max_size=64),
                    current_leader_epoch=int32)
requests = st.builds(pb.ProduceRequest, acks=int32, timeout_ms=int32, transactional_id=st.text(max_size=12),
                     partitions=st.lists(entries, max_size=4))


def _as_tuple(request: Any) -> tuple[Any, ...]:
    return (request.acks, request.timeout_ms, request.transactional_id,
            [(e.topic, e.partition, bytes(e.records), e.current_leader_epoch) for e in request.partitions])


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _varint(value: int) -> bytes:
    return put_varint(value & ((1 << 64) - 1))  # a negative int32 is its 64-bit two's complement


@settings(max_examples=300, deadline=None)
@given(requests)
def test_reads_what_protobuf_reads(request: pb.ProduceRequest) -> None:
    data = request.SerializeToString()
    view = parse_produce_request(memoryview(data))
    assert isinstance(view, ProduceView)
    assert _as_tuple(view) == _as_tuple(pb.ProduceRequest.FromString(data))
    for entry in view.partitions:  # the records are views of the request, not copies
        assert isinstance(entry.records, memoryview) and entry.records.obj is data


@settings(max_examples=200, deadline=None)
@given(requests, st.data())
def test_any_cut_is_read_as_protobuf_reads_it_or_refused(request: pb.ProduceRequest, data: st.DataObject) -> None:
    """A request cut short: protobuf's parser either refuses it (so must this one, with a
    typed error) or reads it (a cut at a field boundary), and then this one reads the same."""
    whole = request.SerializeToString()
    cut = whole[: data.draw(st.integers(0, len(whole)))]
    try:
        expected = _as_tuple(pb.ProduceRequest.FromString(cut))
    except DecodeError:
        with pytest.raises(InvalidRequestError, match="malformed ProduceRequest"):
            parse_produce_request(memoryview(cut))
    else:
        assert _as_tuple(parse_produce_request(memoryview(cut))) == expected


def test_reads_back_what_the_producer_encodes() -> None:
    data = encode_produce_request(acks=-1, timeout_ms=30_000, transactional_id="tx",
                                  entries=[("a", 0, b"frames-0"), ("b", 7, b"frames-1")])
    assert _as_tuple(parse_produce_request(memoryview(data))) == (
        -1, 30_000, "tx", [("a", 0, b"frames-0", -1), ("b", 7, b"frames-1", -1)])


def test_unknown_fields_are_skipped_and_the_last_scalar_wins() -> None:
    entry = pb.PartitionRecords(topic="t", partition=3, records=b"frames", current_leader_epoch=-1).SerializeToString()
    data = (_key(1, 0) + _varint(1) + _key(9, 0) + _varint(12345) + _key(10, 2) + _varint(3) + b"abc"
            + _key(11, 1) + b"8 bytes!" + _key(12, 5) + b"four" + _key(4, 2) + _varint(len(entry)) + entry
            + _key(1, 0) + _varint(-1) + _key(2, 0) + _varint(500))
    expected = pb.ProduceRequest.FromString(data)
    assert _as_tuple(parse_produce_request(memoryview(data))) == _as_tuple(expected) == (
        -1, 500, "", [("t", 3, b"frames", -1)])


@pytest.mark.parametrize("data, reason", [
    (_key(0, 0) + _varint(1), "field number 0"),
    (_key(1, 3), "wire type 3"),
    (_key(1, 2) + _varint(1) + b"x", "is length-delimited, not a varint"),
    (_key(4, 0) + _varint(7), "is a varint, not length-delimited"),
    (_key(2, 5) + b"four", "is fixed-width"),
    (_key(3, 2) + _varint(2) + b"\xff\xfe", "not UTF-8"),
    (_key(1, 0) + b"\xff" * 11, "a varint runs past its message"),
    (_key(4, 2) + _varint(100) + b"short", "runs past the end"),
])
def test_malformed_requests_are_refused_with_the_reason(data: bytes, reason: str) -> None:
    with pytest.raises(InvalidRequestError, match=reason):
        parse_produce_request(memoryview(data))
