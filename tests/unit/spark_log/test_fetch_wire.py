"""``parse_fetch_response`` reads what the generated parser reads, without copying payloads."""
from __future__ import annotations

import os

import pytest

from brokers.server.wire import ARROW_STREAM, RECORDS, encode_fetch_response
from spark_log.fetch_wire import parse_fetch_response
from spark_log.errors import CorruptRecordError
from spark_log.proto import broker_pb2 as pb


def _results() -> list[pb.FetchPartitionResult]:
    full = pb.FetchPartitionResult(topic="t", partition=3, high_watermark=10, last_stable_offset=9,
                                   log_start_offset=-1, log_end_offset=12, next_fetch_offset=10,
                                   preferred_read_replica=-1)
    full.aborted_transactions.add(producer_id=7, first_offset=1, last_offset=4)
    errored = pb.FetchPartitionResult(topic="ü", partition=0, high_watermark=-1)
    errored.error.code = 3
    errored.error.message = "not leader"
    diverging = pb.FetchPartitionResult(topic="t", partition=1)
    diverging.diverging_epoch.epoch = 4
    diverging.diverging_epoch.end_offset = 77
    return [full, errored, diverging]


def _check(data: bytes) -> None:
    expected = pb.FetchResponse.FromString(data)
    got = parse_fetch_response(data)
    assert got.throttle_time_ms == expected.throttle_time_ms
    assert len(got.partitions) == len(expected.partitions)
    for (result, records, stream), want in zip(got.partitions, expected.partitions):
        assert bytes(records or b"") == want.records
        assert bytes(stream or b"") == want.arrow_stream
        rest = pb.FetchPartitionResult()
        rest.CopyFrom(want)
        rest.ClearField("records")
        rest.ClearField("arrow_stream")
        assert result == rest
        for view in (records, stream):
            assert view is None or (isinstance(view, memoryview) and view.readonly and view.obj is data)


def test_the_generated_serialiser_s_bytes() -> None:
    results = _results()
    results[0].records = os.urandom(70_000)
    results[2].arrow_stream = b"arrow"
    for throttle in (0, 5, -1):
        _check(pb.FetchResponse(partitions=results, throttle_time_ms=throttle).SerializeToString())


def test_the_brokers_hand_assembled_bytes() -> None:
    results = _results()
    parts = [(results[0], RECORDS, os.urandom(300)), (results[1], RECORDS, None),
             (results[2], ARROW_STREAM, memoryview(b"stream"))]
    _check(encode_fetch_response(parts, throttle_time_ms=12))
    _check(encode_fetch_response([]))


def test_a_truncated_response_is_refused() -> None:
    data = encode_fetch_response([(_results()[0], RECORDS, os.urandom(1000))])
    for cut in (1, 5, 500, len(data) - 1):
        with pytest.raises(CorruptRecordError):
            parse_fetch_response(data[:cut])


def test_a_hand_encoded_produce_request_parses_as_the_generated_one() -> None:
    from spark_log.fetch_wire import encode_produce_request

    entries = [("t", 0, os.urandom(70_000)), ("ü", 5, b"x")]
    data = encode_produce_request(acks=-1, timeout_ms=30_000, transactional_id="tx", entries=entries)
    expected = pb.ProduceRequest(acks=-1, timeout_ms=30_000, transactional_id="tx", partitions=[
        pb.PartitionRecords(topic=t, partition=p, records=r, current_leader_epoch=-1) for t, p, r in entries])
    assert pb.ProduceRequest.FromString(data) == expected
    assert pb.ProduceRequest.FromString(encode_produce_request(acks=1, timeout_ms=1, transactional_id="",
                                                               entries=[])) == pb.ProduceRequest(acks=1, timeout_ms=1)
