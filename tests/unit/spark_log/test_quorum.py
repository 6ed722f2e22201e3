"""The client side of DescribeQuorum: the wire answer to ``QuorumDescription`` (roles, lag,
unknowns) and ``spark-log cluster quorum``'s text and JSON."""
from __future__ import annotations

from spark_log._cli_quorum import replication_lines, status_lines, to_json
from spark_log._quorum import from_pb
from spark_log.proto import quorum_pb2 as pb

NOW = 1_800_000_000_000


def _answer() -> pb.DescribeQuorumResponse:
    return pb.DescribeQuorumResponse(
        leader_id=2, leader_epoch=7, high_watermark=95, leader_address="127.0.0.1:9093",
        voters=[pb.ReplicaState(node_id=2, log_end_offset=100, last_fetch_timestamp_ms=NOW,
                                last_caught_up_timestamp_ms=NOW),
                pb.ReplicaState(node_id=1, log_end_offset=90, last_fetch_timestamp_ms=NOW - 30,
                                last_caught_up_timestamp_ms=NOW - 500),
                pb.ReplicaState(node_id=3, log_end_offset=-1, last_fetch_timestamp_ms=-1,
                                last_caught_up_timestamp_ms=-1)],
        observers=[pb.ReplicaState(node_id=9, log_end_offset=100, last_fetch_timestamp_ms=NOW - 10,
                                   last_caught_up_timestamp_ms=NOW - 10)])


def test_roles_lag_and_unknowns() -> None:
    d = from_pb(_answer())
    assert [(r.node_id, r.role, r.log_end_offset, r.lag) for r in d.replicas] == [
        (2, "leader", 100, 0), (1, "follower", 90, 10), (3, "follower", None, None), (9, "observer", 100, 0)]
    assert d.voters[2].last_fetch_timestamp_ms is None and d.voters[2].last_caught_up_timestamp_ms is None
    assert d.max_lag == 10 and (d.leader_id, d.leader_epoch, d.high_watermark) == (2, 7, 95)


def test_status_and_replication_text() -> None:
    d = from_pb(_answer())
    status = dict(line.split(":", 1) for line in status_lines(d))
    assert {k: v.strip() for k, v in status.items()} == {
        "LeaderId": "2", "LeaderAddress": "127.0.0.1:9093", "LeaderEpoch": "7", "HighWatermark": "95",
        "MaxFollowerLag": "10", "MaxFollowerLagTimeMs": "-",  # voter 3 was never caught up
        "CurrentVoters": "[1,2,3]", "CurrentObservers": "[9]"}
    rows = [line.split() for line in replication_lines(d)]
    assert rows[0] == ["NodeId", "LogEndOffset", "Lag", "LastFetch", "LastCaughtUp", "Status"]
    assert rows[1:] == [["2", "100", "0", "0", "ms", "ago", "0", "ms", "ago", "Leader"],
                        ["1", "90", "10", "30", "ms", "ago", "500", "ms", "ago", "Follower"],
                        ["3", "-", "-", "-", "-", "Follower"],
                        ["9", "100", "0", "10", "ms", "ago", "10", "ms", "ago", "Observer"]]


def test_json_keeps_unknowns_as_null() -> None:
    described = to_json(from_pb(_answer()))
    assert described["voters"][2] == {"node_id": 3, "role": "follower", "log_end_offset": None, "lag": None,
                                      "last_fetch_timestamp_ms": None, "last_caught_up_timestamp_ms": None}
    assert described["max_follower_lag"] == 10 and described["max_follower_lag_time_ms"] is None
    no_unknowns = pb.DescribeQuorumResponse()
    no_unknowns.CopyFrom(_answer())
    del no_unknowns.voters[2]
    assert to_json(from_pb(no_unknowns))["max_follower_lag_time_ms"] == 500
