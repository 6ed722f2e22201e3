"""The ``GroupCoordinator`` gRPC service (``spark_log/proto/groups.proto``): wire <-> typed.

Each RPC maps its request to the typed values of ``messages.py``, calls the
``GroupCoordinator`` and maps the answer back.  Refusals are typed ``spark_log.errors``
raised as whole-request errors (``errors.abort``: the client re-raises the same class);
anything unexpected is logged and aborted as ``StorageError``.  Every RPC is a plain
unary method on the service, so an interceptor (authorization) sees each by name.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, TypeVar

import grpc
from google.protobuf.message import Message

from spark_log import errors
from spark_log.proto import groups_pb2 as pb

from .coordinator import GroupCoordinator
from .messages import CommitOffsets, GroupView, Heartbeat
from .model import Assignment, CommittedOffset, Member, Subscription, TopicPartition

__all__ = ["GroupServicer", "SERVICE_NAME"]


SERVICE_NAME = "spark_log.groups.v1.GroupCoordinator"

_Req = TypeVar("_Req", bound=Message)
_Resp = TypeVar("_Resp", bound=Message)


def to_pb_partitions(partitions: Iterable[TopicPartition]) -> list[pb.TopicPartitions]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [pb.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]


def from_pb_partitions(items: Iterable[pb.TopicPartitions]) -> Assignment:
    return frozenset((item.topic, int(p)) for item in items for p in item.partitions)


def _offset_pb(tp: TopicPartition, o: CommittedOffset) -> pb.FetchedOffset:
    return pb.FetchedOffset(topic=tp[0], partition=tp[1], offset=o.offset, metadata=o.metadata,
                            commit_timestamp_ms=o.commit_timestamp_ms)


def _member_pb(m: Member) -> pb.MemberDescription:
    return pb.MemberDescription(
        member_id=m.member_id, instance_id=m.instance_id, client_id=m.client_id, client_host=m.client_host,
        member_epoch=m.epoch, state="Left" if m.left else m.state.value,
        subscribed_topic_names=list(m.subscription.topics), subscribed_topic_regex=m.subscription.regex,
        assignment=to_pb_partitions(m.assigned), target_assignment=to_pb_partitions(m.target),
        pending_revocation=to_pb_partitions(m.pending_revocation), session_timeout_ms=m.session_timeout_ms)


def _commit_of(request: pb.OffsetCommitRequest, *, transactional: bool) -> CommitOffsets:
    offsets: dict[TopicPartition, CommittedOffset] = {}
    for p in request.partitions:
        tp = (p.topic, int(p.partition))
        if tp in offsets:
            raise errors.InvalidRequestError(f"an offset commit names {p.topic}-{p.partition} twice")
        offsets[tp] = CommittedOffset(int(p.offset), p.metadata, -1, int(p.leader_epoch))
    return CommitOffsets(group_id=request.group_id, offsets=offsets, member_id=request.member_id,
                         member_epoch=request.member_epoch, transactional=transactional,
                         transactional_id=request.transactional_id if transactional else "")


def describe_pb(view: GroupView, coordinator_id: int) -> pb.DescribeGroupResponse:
    group = view.group
    return pb.DescribeGroupResponse(
        group_id=view.group_id, state=view.state, coordinator_id=coordinator_id,
        group_epoch=group.group_epoch if group is not None else 0,
        assignment_epoch=group.assignment_epoch if group is not None else 0,
        assignor=group.assignor if group is not None else "",
        members=[_member_pb(m) for _, m in sorted(group.members.items())] if group is not None else [],
        offsets=[_offset_pb(tp, o) for tp, o in view.offsets.items()])


class GroupServicer:
    """The ``GroupCoordinator`` service of one broker."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator

    def rpc_handler(self) -> grpc.GenericRpcHandler:
        def unary(method: Callable[[_Req, grpc.ServicerContext], _Resp],
                  request: type[_Req]) -> grpc.RpcMethodHandler[_Req, _Resp]:
            return grpc.unary_unary_rpc_method_handler(method, request_deserializer=request.FromString,
                                                       response_serializer=lambda m: m.SerializeToString())

        return grpc.method_handlers_generic_handler(SERVICE_NAME, {
            "FindCoordinator": unary(self.FindCoordinator, pb.FindCoordinatorRequest),
            "ConsumerGroupHeartbeat": unary(self.ConsumerGroupHeartbeat, pb.ConsumerGroupHeartbeatRequest),
            "OffsetCommit": unary(self.OffsetCommit, pb.OffsetCommitRequest),
            "TxnOffsetCommit": unary(self.TxnOffsetCommit, pb.OffsetCommitRequest),
            "HoldTxnOffsets": unary(self.HoldTxnOffsets, pb.OffsetCommitRequest),
            "ReleaseTxnOffsets": unary(self.ReleaseTxnOffsets, pb.OffsetCommitRequest),
            "OffsetFetch": unary(self.OffsetFetch, pb.OffsetFetchRequest),
            "ListGroups": unary(self.ListGroups, pb.ListGroupsRequest),
            "DescribeGroup": unary(self.DescribeGroup, pb.DescribeGroupRequest),
            "DeleteGroup": unary(self.DeleteGroup, pb.DeleteGroupRequest),
            "OffsetDelete": unary(self.OffsetDelete, pb.OffsetDeleteRequest),
        })

    def FindCoordinator(self, request: pb.FindCoordinatorRequest,  # noqa: N802
                        context: grpc.ServicerContext) -> pb.FindCoordinatorResponse:
        def answer() -> pb.FindCoordinatorResponse:
            where = self.coordinator.find_coordinator(request.group_id)
            return pb.FindCoordinatorResponse(broker_id=where.broker_id, address=where.address,
                                              partition=where.partition)
        return errors.guard(context, "FindCoordinator", answer)

    def ConsumerGroupHeartbeat(self, request: pb.ConsumerGroupHeartbeatRequest,  # noqa: N802
                               context: grpc.ServicerContext) -> pb.ConsumerGroupHeartbeatResponse:
        def answer() -> pb.ConsumerGroupHeartbeatResponse:
            hb = Heartbeat(
                group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
                instance_id=request.instance_id,
                subscription=Subscription(tuple(sorted(set(request.subscribed_topic_names))),
                                          request.subscribed_topic_regex),
                assignor=request.server_assignor, owned=from_pb_partitions(request.owned),
                rebalance_timeout_ms=request.rebalance_timeout_ms, session_timeout_ms=request.session_timeout_ms,
                client_id=request.client_id, client_host=request.client_host or _peer_host(context))
            got = self.coordinator.heartbeat(hb)
            return pb.ConsumerGroupHeartbeatResponse(member_id=got.member_id, member_epoch=got.member_epoch,
                                                     heartbeat_interval_ms=got.heartbeat_interval_ms,
                                                     assignment=to_pb_partitions(got.assignment))
        return errors.guard(context, "ConsumerGroupHeartbeat", answer)

    def OffsetCommit(self, request: pb.OffsetCommitRequest,  # noqa: N802
                     context: grpc.ServicerContext) -> pb.OffsetCommitResponse:
        def answer() -> pb.OffsetCommitResponse:
            commit = _commit_of(request, transactional=False)
            if request.validate_only:
                self.coordinator.validate_commit(commit)
            else:
                self.coordinator.commit_offsets(commit)
            return pb.OffsetCommitResponse()
        return errors.guard(context, "OffsetCommit", answer)

    def TxnOffsetCommit(self, request: pb.OffsetCommitRequest,  # noqa: N802
                        context: grpc.ServicerContext) -> pb.OffsetCommitResponse:
        def answer() -> pb.OffsetCommitResponse:
            self.coordinator.commit_offsets(_commit_of(request, transactional=True))
            return pb.OffsetCommitResponse()
        return errors.guard(context, "TxnOffsetCommit", answer)

    def HoldTxnOffsets(self, request: pb.OffsetCommitRequest,  # noqa: N802
                       context: grpc.ServicerContext) -> pb.OffsetCommitResponse:
        def answer() -> pb.OffsetCommitResponse:
            commit = dataclasses.replace(_commit_of(request, transactional=False),
                                         transactional_id=request.transactional_id)
            self.coordinator.hold_offsets(commit, request.hold_until_ms)
            return pb.OffsetCommitResponse()
        return errors.guard(context, "HoldTxnOffsets", answer)

    def ReleaseTxnOffsets(self, request: pb.OffsetCommitRequest,  # noqa: N802
                          context: grpc.ServicerContext) -> pb.OffsetCommitResponse:
        def answer() -> pb.OffsetCommitResponse:
            self.coordinator.release_offsets(request.group_id, request.transactional_id)
            return pb.OffsetCommitResponse()
        return errors.guard(context, "ReleaseTxnOffsets", answer)

    def OffsetFetch(self, request: pb.OffsetFetchRequest,  # noqa: N802
                    context: grpc.ServicerContext) -> pb.OffsetFetchResponse:
        def answer() -> pb.OffsetFetchResponse:
            wanted = None if request.all else sorted(from_pb_partitions(request.partitions))
            found = self.coordinator.fetch_offsets(request.group_id, wanted, require_stable=request.require_stable)
            return pb.OffsetFetchResponse(offsets=[_offset_pb(tp, o) for tp, o in found.items()])
        return errors.guard(context, "OffsetFetch", answer)

    def ListGroups(self, request: pb.ListGroupsRequest,  # noqa: N802
                   context: grpc.ServicerContext) -> pb.ListGroupsResponse:
        def answer() -> pb.ListGroupsResponse:
            me = self.coordinator.broker_id
            return pb.ListGroupsResponse(groups=[
                pb.GroupListing(group_id=g.group_id, state=g.state, members=g.members, coordinator_id=me)
                for g in self.coordinator.list_groups()])
        return errors.guard(context, "ListGroups", answer)

    def DescribeGroup(self, request: pb.DescribeGroupRequest,  # noqa: N802
                      context: grpc.ServicerContext) -> pb.DescribeGroupResponse:
        return errors.guard(context, "DescribeGroup", lambda: describe_pb(
            self.coordinator.describe_group(request.group_id), self.coordinator.broker_id))

    def DeleteGroup(self, request: pb.DeleteGroupRequest,  # noqa: N802
                    context: grpc.ServicerContext) -> pb.DeleteGroupResponse:
        def answer() -> pb.DeleteGroupResponse:
            self.coordinator.delete_group(request.group_id)
            return pb.DeleteGroupResponse()
        return errors.guard(context, "DeleteGroup", answer)

    def OffsetDelete(self, request: pb.OffsetDeleteRequest,  # noqa: N802
                     context: grpc.ServicerContext) -> pb.OffsetDeleteResponse:
        def answer() -> pb.OffsetDeleteResponse:
            partitions = sorted(from_pb_partitions(request.partitions))
            if not partitions:
                raise errors.InvalidRequestError("name at least one partition whose offset to delete")
            self.coordinator.delete_offsets(request.group_id, partitions)
            return pb.OffsetDeleteResponse()
        return errors.guard(context, "OffsetDelete", answer)


def _peer_host(context: grpc.ServicerContext) -> str:
    """The caller's host from gRPC's peer string ("ipv4:127.0.0.1:5555")."""
    peer = context.peer() or ""
    parts = peer.split(":")
    return parts[1] if len(parts) >= 3 else peer
