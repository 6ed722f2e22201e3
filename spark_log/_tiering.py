"""Client side of tiering (``spark_log/proto/tiering.proto``): what each partition's leader
knows of the Delta tier, and the tiering job's report after a durable Delta commit.

``describe(cluster, topics)`` asks each partition's leader (``TierInfo`` per partition and
the cluster's tier location); ``commit(cluster, topic, p, start=, end=)`` tells the leader
the tier holds ``[start, end)`` (retried on leader moves until ``timeout_s``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import grpc

from . import errors
from ._client import Cluster, retry
from .proto import tiering_pb2 as tpb
from .proto import tiering_pb2_grpc as trpc

__all__ = ["TierInfo", "TierDescription", "describe", "commit"]


@dataclass(frozen=True, slots=True)
class TierInfo:
    """One partition as its leader sees it: the tier holds ``[tier_start, tiered_end)``; the
    brokers hold ``[log_start_offset, log_end_offset)``; the job may tier up to ``tierable_end``."""

    topic: str
    partition: int
    broker_id: int
    remote_storage_enable: bool
    tier_start: int
    tiered_end: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    log_end_offset: int
    tierable_end: int
    local_bytes: int
    topic_id: str = ""
    untiered_bytes: int = 0   # local bytes at or past tiered_end

    @property
    def tiered(self) -> bool:
        return self.tier_start < self.tiered_end

    @property
    def earliest(self) -> int:
        """Where a union read starts: the tier's start when the tier reaches the local log."""
        if self.tiered and self.tiered_end >= self.log_start_offset:
            return min(self.tier_start, self.log_start_offset)
        return self.log_start_offset


@dataclass(frozen=True, slots=True)
class TierDescription:
    location: str
    partitions: dict[tuple[str, int], TierInfo]
    # the object store's options (may hold credentials: never in repr, logs or CLI output)
    storage_options: dict[str, str] = field(default_factory=dict, repr=False)


def _info(message: tpb.PartitionTier) -> TierInfo:
    return TierInfo(message.topic, message.partition, message.broker_id, message.remote_storage_enable,
                    message.tier_start, message.tiered_end, message.log_start_offset, message.high_watermark,
                    message.last_stable_offset, message.log_end_offset, message.tierable_end, message.local_bytes,
                    message.topic_id, message.untiered_bytes)


def _stub(cluster: Cluster, address: str) -> trpc.TieringStub:
    return trpc.TieringStub(cluster.channel(address))


def describe(cluster: Cluster, topics: Sequence[str], *, timeout_s: float = 30.0) -> TierDescription:
    """Every partition of ``topics`` as its leader sees it (retried while leaders move)."""

    def once() -> TierDescription:
        by_leader: dict[str, set[tuple[str, int]]] = {}
        for topic in topics:
            info = cluster.topic(topic)
            for index in info.partitions:
                address, _ = cluster.leader(topic, index)
                by_leader.setdefault(address, set()).add((topic, index))
        found: dict[tuple[str, int], TierInfo] = {}
        location = ""
        options: dict[str, str] = {}
        for address, wanted in by_leader.items():
            request = tpb.DescribeTierRequest(topics=sorted({t for t, _ in wanted}), leaders_only=True)
            try:
                answer = _stub(cluster, address).DescribeTier(request, timeout=timeout_s)
            except grpc.RpcError as exc:
                raise errors.from_rpc_error(exc, address=address) from None
            location = location or answer.location
            options = options or dict(answer.storage_options)
            for message in answer.partitions:
                if (message.topic, message.partition) in wanted and not message.error.code:
                    found[(message.topic, message.partition)] = _info(message)
        missing = sorted(tp for tps in by_leader.values() for tp in tps if tp not in found)
        if missing:
            raise errors.NotLeaderError(f"no leader answered for {missing[0][0]}-{missing[0][1]}")
        return TierDescription(location, found, options)

    return retry(once, cluster=cluster, topics=list(topics), deadline_s=timeout_s)


def commit(cluster: Cluster, topic: str, partition: int, *, start: int, end: int,
           timeout_s: float = 30.0) -> TierInfo:
    """Tell ``topic``-``partition``'s leader that the Delta tier durably holds ``[start, end)``;
    returns once the in-sync replicas recorded it.  Raises ``TieringNotEnabledError``,
    ``TierOffsetInvalidError``; ``InvalidRequestError`` (before any call) for a partition,
    start or end that is not an int (bools are not) in range."""
    for name, value, bits in (("partition", partition, 32), ("start", start, 64), ("end", end, 64)):
        if not isinstance(value, int) or isinstance(value, bool) or not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
            raise errors.InvalidRequestError(f"commit_tiered: {name} must be a {bits}-bit int, got {value!r}")
    request = tpb.CommitTieredRequest(topic=topic, partition=partition, tier_start=start, tiered_end=end,
                                      timeout_ms=int(timeout_s * 1000))

    def once() -> TierInfo:
        address, _ = cluster.leader(topic, partition)
        try:
            answer = _stub(cluster, address).CommitTiered(request, timeout=timeout_s)
        except grpc.RpcError as exc:
            raise errors.from_rpc_error(exc, address=address) from None
        return _info(answer.partition)

    return retry(once, cluster=cluster, topics=[topic], deadline_s=timeout_s)
