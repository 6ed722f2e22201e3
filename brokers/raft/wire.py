"""Raft messages to and from protobuf (``spark_log/proto/raft.proto``).

Entries cross the wire as frames (``codec.py``); everything else maps field by field.
``from_proto`` raises ``InvalidRequestError`` for a message without a body.
"""
from __future__ import annotations

from spark_log.errors import InvalidRequestError
from spark_log.proto import raft_pb2 as pb

from . import messages as m
from .codec import decode_entries, encode_entries

__all__ = ["to_proto", "from_proto"]


def _sid(value: m.SnapshotId | None, target: pb.SnapshotId) -> None:
    if value is not None:
        target.end_offset = value.end_offset
        target.epoch = value.epoch


def _from_sid(owner: object, name: str) -> m.SnapshotId | None:
    if not owner.HasField(name):  # type: ignore[attr-defined]
        return None
    value = getattr(owner, name)
    return m.SnapshotId(value.end_offset, value.epoch)


def to_proto(message: m.Message) -> pb.RaftMessage:
    out = pb.RaftMessage(src=message.src, dst=message.dst)
    match message:
        case m.VoteRequest():
            out.vote_request.CopyFrom(pb.VoteRequest(epoch=message.epoch, last_epoch=message.last_epoch,
                                                     end_offset=message.end_offset, pre_vote=message.pre_vote))
        case m.VoteResponse():
            body = pb.VoteResponse(epoch=message.epoch, granted=message.granted, pre_vote=message.pre_vote)
            if message.leader_id is not None:
                body.leader_id = message.leader_id
            out.vote_response.CopyFrom(body)
        case m.BeginQuorumEpoch():
            out.begin_quorum_epoch.CopyFrom(pb.BeginQuorumEpoch(epoch=message.epoch, leader_id=message.leader_id))
        case m.BeginQuorumEpochResponse():
            answer = pb.BeginQuorumEpochResponse(epoch=message.epoch)
            if message.leader_id is not None:
                answer.leader_id = message.leader_id
            out.begin_quorum_epoch_response.CopyFrom(answer)
        case m.FetchRequest():
            out.fetch_request.CopyFrom(pb.FetchRequest(epoch=message.epoch, fetch_offset=message.fetch_offset,
                                                       last_fetched_epoch=message.last_fetched_epoch))
        case m.FetchResponse():
            fetch = pb.FetchResponse(epoch=message.epoch, fetch_offset=message.fetch_offset,
                                     last_fetched_epoch=message.last_fetched_epoch,
                                     records=encode_entries(message.entries),
                                     high_watermark=message.high_watermark, not_leader=message.not_leader)
            if message.leader_id is not None:
                fetch.leader_id = message.leader_id
            if message.diverging is not None:
                _sid(message.diverging, fetch.diverging)
            if message.snapshot_id is not None:
                _sid(message.snapshot_id, fetch.snapshot_id)
            out.fetch_response.CopyFrom(fetch)
        case m.FetchSnapshotRequest():
            request = pb.FetchSnapshotRequest(epoch=message.epoch)
            _sid(message.snapshot_id, request.snapshot_id)
            out.fetch_snapshot_request.CopyFrom(request)
        case m.FetchSnapshotResponse():
            response = pb.FetchSnapshotResponse(epoch=message.epoch)
            if message.leader_id is not None:
                response.leader_id = message.leader_id
            if message.snapshot is not None:
                _sid(message.snapshot.snapshot_id, response.snapshot_id)
                response.data = message.snapshot.data
            out.fetch_snapshot_response.CopyFrom(response)
        case _:
            raise TypeError(f"not a Raft message: {message!r}")
    return out


def from_proto(raw: pb.RaftMessage) -> m.Message:
    src, dst = raw.src, raw.dst
    kind = raw.WhichOneof("body")
    if kind == "vote_request":
        v = raw.vote_request
        return m.VoteRequest(src, dst, v.epoch, v.last_epoch, v.end_offset, v.pre_vote)
    if kind == "vote_response":
        r = raw.vote_response
        return m.VoteResponse(src, dst, r.epoch, r.granted, r.pre_vote,
                              r.leader_id if r.HasField("leader_id") else None)
    if kind == "begin_quorum_epoch":
        b = raw.begin_quorum_epoch
        return m.BeginQuorumEpoch(src, dst, b.epoch, b.leader_id)
    if kind == "begin_quorum_epoch_response":
        a = raw.begin_quorum_epoch_response
        return m.BeginQuorumEpochResponse(src, dst, a.epoch, a.leader_id if a.HasField("leader_id") else None)
    if kind == "fetch_request":
        f = raw.fetch_request
        return m.FetchRequest(src, dst, f.epoch, f.fetch_offset, f.last_fetched_epoch)
    if kind == "fetch_response":
        f2 = raw.fetch_response
        return m.FetchResponse(
            src, dst, f2.epoch, f2.leader_id if f2.HasField("leader_id") else None,
            f2.fetch_offset, f2.last_fetched_epoch, tuple(decode_entries(f2.records)) if f2.records else (),
            f2.high_watermark, _from_sid(f2, "diverging"), _from_sid(f2, "snapshot_id"), f2.not_leader,
        )
    if kind == "fetch_snapshot_request":
        s = raw.fetch_snapshot_request
        sid = _from_sid(s, "snapshot_id") or m.SnapshotId(0, 0)
        return m.FetchSnapshotRequest(src, dst, s.epoch, sid)
    if kind == "fetch_snapshot_response":
        s2 = raw.fetch_snapshot_response
        sid2 = _from_sid(s2, "snapshot_id")
        snapshot = m.Snapshot(sid2, s2.data) if sid2 is not None else None
        return m.FetchSnapshotResponse(src, dst, s2.epoch, s2.leader_id if s2.HasField("leader_id") else None,
                                       snapshot)
    raise InvalidRequestError("Raft message without a body")
