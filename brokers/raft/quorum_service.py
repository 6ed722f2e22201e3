"""DescribeQuorum (quorum.proto): the metadata quorum's Raft state, as its leader sees it.

Two services on the node's gRPC server (``add_to_server``):

- ``Quorum`` on every node, for clients (``Admin.describe_quorum``; the authorizer wants
  DESCRIBE on the cluster).  The Raft leader answers from its own replication progress;
  any other node (a follower voter or a broker-only observer) forwards the request to
  the leader's ``QuorumController`` through its ``ControllerClient`` (which follows
  NOT_CONTROLLER hints and retries while an election runs) and returns that answer.
- ``QuorumController`` on voters, for nodes (CLUSTER_ACTION): the leader answers, any
  other voter fails with NOT_CONTROLLER naming the leader's address.

The leader's answer converts the core's ages (``brokers.raft.quorum_info``) into
wall-clock timestamps with the node's clock.  Every ``SparkLogError`` leaves through
``errors.abort`` so the client re-raises the same typed error.

Thread-safety: called from the server's worker threads; the raft node serialises.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

import grpc

from spark_log import errors
from spark_log.clock import Clock
from spark_log.proto import quorum_pb2 as pb
from spark_log.proto import quorum_pb2_grpc as pb_grpc

from .driver import RaftNode
from .quorum_info import QuorumInfo, ReplicaProgress

__all__ = ["QuorumServicer", "QuorumControllerServicer", "add_to_server", "encode"]

T = TypeVar("T")


def encode(info: QuorumInfo, *, wall_ms: int, leader_address: str) -> pb.DescribeQuorumResponse:
    """The wire form of ``info`` taken at ``wall_ms`` (ms since the epoch): ages become timestamps."""
    def replica(p: ReplicaProgress) -> pb.ReplicaState:
        return pb.ReplicaState(
            node_id=p.node_id,
            log_end_offset=-1 if p.log_end_offset is None else p.log_end_offset,
            last_fetch_timestamp_ms=-1 if p.last_fetch_age_ms is None else wall_ms - p.last_fetch_age_ms,
            last_caught_up_timestamp_ms=-1 if p.last_caught_up_age_ms is None else wall_ms - p.last_caught_up_age_ms,
        )

    return pb.DescribeQuorumResponse(leader_id=info.leader_id, leader_epoch=info.epoch,
                                     high_watermark=info.high_watermark, leader_address=leader_address,
                                     voters=[replica(v) for v in info.voters],
                                     observers=[replica(o) for o in info.observers])


def _guard(context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
    return errors.guard(context, "DescribeQuorum", fn, lambda _, exc: errors.SparkLogError(
        f"internal error describing the quorum: {exc!r}"))


class QuorumControllerServicer(pb_grpc.QuorumControllerServicer):
    """The leader's own answer (voters only)."""

    def __init__(self, raft: RaftNode, clock: Clock) -> None:
        self.raft = raft
        self.clock = clock

    def describe(self) -> pb.DescribeQuorumResponse:
        """This node's answer if it leads; ``NotControllerError`` (with the leader's address) if not."""
        info = self.raft.describe_quorum()
        return encode(info, wall_ms=self.clock.wall_ms(), leader_address=self.raft.voters.get(info.leader_id, ""))

    def DescribeQuorum(self, request: pb.DescribeQuorumRequest, context: Any) -> pb.DescribeQuorumResponse:  # noqa: N802
        return _guard(context, self.describe)


class QuorumServicer(pb_grpc.QuorumServicer):
    """Clients' entry (every node): answer as the leader, else forward to it."""

    def __init__(self, raft: RaftNode, clock: Clock, forward: Callable[[], pb.DescribeQuorumResponse]) -> None:
        self.local = QuorumControllerServicer(raft, clock)
        self.forward = forward

    def DescribeQuorum(self, request: pb.DescribeQuorumRequest, context: Any) -> pb.DescribeQuorumResponse:  # noqa: N802
        def answer() -> pb.DescribeQuorumResponse:
            if self.local.raft.is_leader:
                try:
                    return self.local.describe()
                except errors.NotControllerError:
                    pass  # it lost the leadership a moment ago: ask the new leader
            return self.forward()

        return _guard(context, answer)


def add_to_server(server: grpc.Server, raft: RaftNode, clock: Clock, *, voter: bool,
                  forward: Callable[[], pb.DescribeQuorumResponse]) -> None:
    """Register ``Quorum`` (and, on a voter, ``QuorumController``) before the server starts."""
    pb_grpc.add_QuorumServicer_to_server(QuorumServicer(raft, clock, forward), server)
    if voter:
        pb_grpc.add_QuorumControllerServicer_to_server(QuorumControllerServicer(raft, clock), server)
