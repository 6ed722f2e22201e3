"""Offsets a transaction carries to a consumer group (``send_offsets_to_transaction``).

When a producer adds them (AddOffsets) the group's coordinator checks the commit as it
would check the member's own (``validate_only``: the member's id and epoch, the
partitions), and nothing is written; they ride in the transaction's state.  When the
transaction commits, the completer writes them before it marks the transaction complete
(``TxnOffsetCommit``: written whatever the member's epoch is by then, as Kafka's pending
transactional offsets), retrying until the group's coordinator takes them; an aborted
transaction's offsets are dropped.  The group's coordinator is this broker's
``GroupCoordinator`` or, elsewhere, its gRPC service.
"""
from __future__ import annotations

from collections import defaultdict

import grpc

from brokers.groups import GroupCoordinator
from brokers.groups.messages import CommitOffsets
from brokers.groups.model import CommittedOffset
from brokers.net.peers import PeerCalls
from spark_log import errors
from spark_log.proto import groups_pb2 as gpb

from .model import GroupOffset

__all__ = ["GroupOffsetsLink"]


class GroupOffsetsLink:
    def __init__(self, *, broker_id: int, groups: GroupCoordinator, peers: PeerCalls, timeout_ms: int = 10_000) -> None:
        self.broker_id = broker_id
        self._groups = groups
        self._peers = peers
        self._timeout_s = timeout_ms / 1000

    def validate(self, group_id: str, member_id: str, member_epoch: int, offsets: list[GroupOffset]) -> None:
        """Raise the group coordinator's refusal of this commit (fenced member, unknown
        partition, ...); write nothing."""
        commit = _commit(group_id, offsets, member_id, member_epoch, transactional=False)
        self._call(group_id, commit, "OffsetCommit", validate_only=True)

    def commit(self, offsets: list[GroupOffset]) -> None:
        """Write a committed transaction's offsets to their groups."""
        by_group: dict[str, list[GroupOffset]] = defaultdict(list)
        for offset in offsets:
            by_group[offset.group_id].append(offset)
        for group_id, items in by_group.items():
            self._call(group_id, _commit(group_id, items, "", -1, transactional=True), "TxnOffsetCommit")

    def _call(self, group_id: str, commit: CommitOffsets, method: str, *, validate_only: bool = False) -> None:
        where = self._groups.find_coordinator(group_id)
        if where.broker_id == self.broker_id:
            if validate_only:
                self._groups.validate_commit(commit)
            else:
                self._groups.commit_offsets(commit)
            return
        request = gpb.OffsetCommitRequest(
            group_id=group_id, member_id=commit.member_id, member_epoch=commit.member_epoch,
            validate_only=validate_only,
            partitions=[gpb.CommitPartition(topic=t, partition=p, offset=o.offset, metadata=o.metadata, leader_epoch=-1)
                        for (t, p), o in sorted(commit.offsets.items())])
        call = self._peers.unary(where.address, f"/spark_log.groups.v1.GroupCoordinator/{method}",
                                 gpb.OffsetCommitRequest, gpb.OffsetCommitResponse)
        try:
            call(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise errors.from_rpc_error(exc, address=where.address) from None


def _commit(group_id: str, offsets: list[GroupOffset], member_id: str, member_epoch: int, *,
            transactional: bool) -> CommitOffsets:
    return CommitOffsets(group_id=group_id, member_id=member_id, member_epoch=member_epoch, transactional=transactional,
                         offsets={(o.topic, o.partition): CommittedOffset(o.offset, o.metadata, -1, -1) for o in offsets})
