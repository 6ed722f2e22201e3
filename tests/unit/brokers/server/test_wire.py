"""The hand-assembled Fetch answer parses back to exactly the intended FetchResponse."""
from __future__ import annotations

from brokers.server.wire import ARROW_STREAM, RECORDS, encode_fetch_response
from spark_log.proto import broker_pb2 as pb


def test_fetch_response_round_trips_through_protobuf() -> None:
    data = bytes(range(256)) * 1000
    with_records = pb.FetchPartitionResult(topic="t", partition=1, high_watermark=5, next_fetch_offset=5)
    failed = pb.FetchPartitionResult(topic="u", partition=0, high_watermark=-1)
    failed.error.code, failed.error.message, failed.error.leader_address = 9, "not leader", "127.0.0.1:1"
    pushed = pb.FetchPartitionResult(topic="v", partition=2, preferred_read_replica=-1)
    raw = encode_fetch_response([(with_records, RECORDS, memoryview(data)[:200_000]), (failed, RECORDS, None),
                                 (pushed, ARROW_STREAM, b"xyz")])
    parsed = pb.FetchResponse.FromString(raw)
    expected = pb.FetchResponse()
    expected.partitions.add().CopyFrom(with_records)
    expected.partitions[0].records = data[:200_000]
    expected.partitions.add().CopyFrom(failed)
    expected.partitions.add().CopyFrom(pushed)
    expected.partitions[2].arrow_stream = b"xyz"
    assert parsed == expected
    assert encode_fetch_response([]) == b"" and pb.FetchResponse.FromString(b"") == pb.FetchResponse()
