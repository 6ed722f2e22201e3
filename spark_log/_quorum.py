"""``Admin.describe_quorum``: the metadata quorum's Raft state (Kafka's DescribeQuorum).

The answer comes from the Raft leader (any broker forwards the request to it: quorum.proto),
which alone knows how far each replica of the metadata log got.  Roles: ``leader``,
``follower`` (a voter that is not the leader) and ``observer`` (a node that fetches the
metadata log without a vote: a broker-only node).  ``lag`` is the leader's log end offset
minus the replica's (None when the replica did not fetch in the leader's epoch, e.g. right
after an election or while it is down).  Timestamps are the leader's wall clock in ms since
the Unix epoch, as Kafka's ``kafka-metadata-quorum describe --replication`` shows them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .proto import quorum_pb2 as pb

__all__ = ["QuorumDescription", "QuorumReplica", "describe"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumReplica:
    """One replica of the metadata log as the leader sees it.  ``log_end_offset``, ``lag``,
    ``last_fetch_timestamp_ms``, ``last_caught_up_timestamp_ms``: None when unknown (no fetch
    in this epoch; never caught up)."""

    node_id: int
    role: str  # "leader" | "follower" | "observer"
    log_end_offset: int | None
    lag: int | None
    last_fetch_timestamp_ms: int | None
    last_caught_up_timestamp_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumDescription:
    """The quorum now: its leader and epoch, the high watermark (commit index: every
    metadata record below it is committed), the voters (the leader first) and observers."""

    leader_id: int
    leader_epoch: int
    leader_address: str
    high_watermark: int
    voters: tuple[QuorumReplica, ...]
    observers: tuple[QuorumReplica, ...]

    @property
    def replicas(self) -> tuple[QuorumReplica, ...]:
        """Voters, then observers."""
        return self.voters + self.observers

    @property
    def max_lag(self) -> int | None:
        """The largest lag of a voter that fetched in this epoch (None: no voter did)."""
        lags = [v.lag for v in self.voters if v.lag is not None]
        return max(lags) if lags else None


def _optional(value: int) -> int | None:
    return None if value < 0 else value


def from_pb(response: pb.DescribeQuorumResponse) -> QuorumDescription:
    leader_end = next((r.log_end_offset for r in response.voters if r.node_id == response.leader_id), -1)

    def replica(r: pb.ReplicaState, role: str) -> QuorumReplica:
        end = _optional(r.log_end_offset)
        return QuorumReplica(node_id=r.node_id, role=role, log_end_offset=end,
                             lag=None if end is None or leader_end < 0 else max(0, leader_end - end),
                             last_fetch_timestamp_ms=_optional(r.last_fetch_timestamp_ms),
                             last_caught_up_timestamp_ms=_optional(r.last_caught_up_timestamp_ms))

    return QuorumDescription(
        leader_id=response.leader_id, leader_epoch=response.leader_epoch, leader_address=response.leader_address,
        high_watermark=response.high_watermark,
        voters=tuple(replica(v, "leader" if v.node_id == response.leader_id else "follower") for v in response.voters),
        observers=tuple(replica(o, "observer") for o in response.observers))


def describe(call: Callable[[str, Any], Any]) -> QuorumDescription:
    """``call(method, request)``: one ``Quorum`` RPC through any broker, retried."""
    return from_pb(call("DescribeQuorum", pb.DescribeQuorumRequest()))
