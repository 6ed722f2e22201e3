"""Offsets a transaction carries to a consumer group (``send_offsets_to_transaction``).

When a producer adds them (AddOffsets) the group's coordinator checks the commit as it
would check the member's own (the member's id and epoch, the partitions) and holds those
partitions for the transactional id (``HoldTxnOffsets``, durable in the group's log): a
``read_committed`` consumer's offset fetch meanwhile answers ``UNSTABLE_OFFSET_COMMIT``
(KIP-447), so a member taking the partitions over waits for the transaction instead of
starting below the offsets it will commit.  The offsets ride in the transaction's state.
When the transaction commits, the completer writes them before it marks the transaction
complete (``TxnOffsetCommit``: written whatever the member's epoch is by then, as Kafka's
pending transactional offsets, and the hold released with them), retrying until the
group's coordinator takes them; an aborted transaction's offsets are dropped and its hold
released (``ReleaseTxnOffsets``).  A hold also ends at its deadline (the transaction's
timeout twice, and a minute), should its release never come.  The group's coordinator is
this broker's ``GroupCoordinator`` or, elsewhere, its gRPC service.
"""
from __future__ import annotations

from collections import defaultdict
from functools import partial
from typing import Callable

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

    def hold(self, group_id: str, member_id: str, member_epoch: int, offsets: list[GroupOffset], *,
             transactional_id: str, until_ms: int) -> None:
        """Raise the group coordinator's refusal of this commit (fenced member, unknown
        partition, ...); else hold the partitions for ``transactional_id`` until ``until_ms``."""
        commit = _commit(group_id, offsets, member_id, member_epoch, transactional=False,
                         transactional_id=transactional_id)
        self._call(group_id, commit, "HoldTxnOffsets", lambda: self._groups.hold_offsets(commit, until_ms),
                   until_ms=until_ms)

    def commit(self, offsets: list[GroupOffset], transactional_id: str) -> None:
        """Write a committed transaction's offsets to their groups (releasing its holds)."""
        for group_id, items in _by_group(offsets).items():
            commit = _commit(group_id, items, "", -1, transactional=True, transactional_id=transactional_id)
            self._call(group_id, commit, "TxnOffsetCommit", partial(self._groups.commit_offsets, commit))

    def release(self, offsets: list[GroupOffset], transactional_id: str) -> None:
        """An aborted transaction's holds end (its offsets are dropped)."""
        for group_id in _by_group(offsets):
            self._call(group_id, CommitOffsets(group_id=group_id, offsets={}, transactional_id=transactional_id),
                       "ReleaseTxnOffsets", partial(self._groups.release_offsets, group_id, transactional_id))

    def _call(self, group_id: str, commit: CommitOffsets, method: str, local: Callable[[], None], *,
              until_ms: int = 0) -> None:
        """``local()`` when this broker coordinates the group, else ``method`` at its coordinator."""
        where = self._groups.find_coordinator(group_id)
        if where.broker_id == self.broker_id:
            local()
            return
        request = gpb.OffsetCommitRequest(
            group_id=group_id, member_id=commit.member_id, member_epoch=commit.member_epoch,
            transactional_id=commit.transactional_id, hold_until_ms=until_ms,
            partitions=[gpb.CommitPartition(topic=t, partition=p, offset=o.offset, metadata=o.metadata, leader_epoch=-1)
                        for (t, p), o in sorted(commit.offsets.items())])
        call = self._peers.unary(where.address, f"/spark_log.groups.v1.GroupCoordinator/{method}",
                                 gpb.OffsetCommitRequest, gpb.OffsetCommitResponse)
        try:
            call(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise errors.from_rpc_error(exc, address=where.address) from None


def _by_group(offsets: list[GroupOffset]) -> dict[str, list[GroupOffset]]:
    by_group: dict[str, list[GroupOffset]] = defaultdict(list)
    for offset in offsets:
        by_group[offset.group_id].append(offset)
    return by_group


def _commit(group_id: str, offsets: list[GroupOffset], member_id: str, member_epoch: int, *,
            transactional: bool, transactional_id: str) -> CommitOffsets:
    return CommitOffsets(group_id=group_id, member_id=member_id, member_epoch=member_epoch, transactional=transactional,
                         transactional_id=transactional_id,
                         offsets={(o.topic, o.partition): CommittedOffset(o.offset, o.metadata, -1, -1) for o in offsets})
