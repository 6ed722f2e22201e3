"""Raft messages survive the trip through protobuf (raft.proto) unchanged; entries
travel as spark-log frames (codec.py), one frame per run of same-epoch entries."""
from __future__ import annotations

import pytest

from brokers.raft import messages as m
from brokers.raft.codec import decode_entries, encode_entries
from brokers.raft.wire import from_proto, to_proto
from spark_log.errors import CorruptRecordError, InvalidRequestError
from spark_log.frame import iter_frames
from spark_log.proto import raft_pb2

ENTRIES = (m.Entry(5, 2, b"a"), m.Entry(6, 2, b""), m.Entry(7, 2, b"lc", control=True), m.Entry(8, 3, b"\x00" * 300))

MESSAGES: list[m.Message] = [
    m.VoteRequest(1, 2, 4, 3, 17, pre_vote=True),
    m.VoteRequest(1, 2, 4, 3, 17),
    m.VoteResponse(2, 1, 4, True, False, None),
    m.VoteResponse(2, 1, 4, False, True, 3),
    m.BeginQuorumEpoch(1, 3, 4, 1),
    m.BeginQuorumEpochResponse(3, 1, 5, None),
    m.BeginQuorumEpochResponse(3, 1, 5, 2),
    m.FetchRequest(3, 1, 4, 10, 2),
    m.FetchResponse(1, 3, 4, 1, 5, 2, ENTRIES, 7),
    m.FetchResponse(1, 3, 4, 1, 10, 2, (), 7, diverging=m.SnapshotId(6, 1)),
    m.FetchResponse(1, 3, 4, 1, 0, 0, (), 7, snapshot_id=m.SnapshotId(100, 3)),
    m.FetchResponse(2, 9, 4, None, 0, 0, not_leader=True),
    m.FetchSnapshotRequest(3, 1, 4, m.SnapshotId(100, 3)),
    m.FetchSnapshotResponse(1, 3, 4, 1, m.Snapshot(m.SnapshotId(100, 3), b"state")),
    m.FetchSnapshotResponse(2, 3, 4, None, None),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda x: type(x).__name__)
def test_round_trip(message: m.Message) -> None:
    raw = to_proto(message).SerializeToString()
    assert from_proto(raft_pb2.RaftMessage.FromString(raw)) == message


def test_entries_are_frames_grouped_by_epoch_and_control_flag() -> None:
    data = encode_entries(ENTRIES)
    headers = [h for _, h in iter_frames(data)]
    assert [(h.base_offset, h.record_count, h.partition_leader_epoch, h.is_control) for h in headers] == [
        (5, 2, 2, False), (7, 1, 2, True), (8, 1, 3, False)]
    assert decode_entries(data) == list(ENTRIES)


def test_damaged_frames_are_refused() -> None:
    data = bytearray(encode_entries(ENTRIES[:1]))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decode_entries(bytes(data))


def test_a_message_without_a_body_is_refused() -> None:
    with pytest.raises(InvalidRequestError):
        from_proto(raft_pb2.RaftMessage(src=1, dst=2))
