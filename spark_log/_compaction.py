"""Compaction for ``Admin`` (private): describe, ask for a clean, wait, offer offset maps.

Every broker serves ``Compaction`` (``spark_log/proto/compaction.proto``) for the replicas
it hosts.  ``describe`` asks each partition's leader (``replicas=True``: every broker
hosting a replica, so the caller sees each replica's cleaned offset); ``compact`` asks the
leaders to plan a clean now; ``wait`` polls until, for every partition, the leader has no
clean left to plan (nothing requested, its latest plan applied) and every replica applied
that same plan (so below the cleaned offset every replica holds the same records).
``offer_map`` sends a Spark job's key -> offset map of ``[start, end)`` to one broker
(``plan=True``: to the leader, which publishes a plan ending at ``end``).

Calls to a broker that stopped leading refresh the metadata and ask again until the
request timeout (``_client.retry``).  Thread-safety: as ``Admin``.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc
import pyarrow as pa
import pyarrow.ipc as ipc

from . import errors
from ._client import Cluster, error_from_pb, retry
from .errors import SparkLogError
from .proto import compaction_pb2 as cpb
from .proto import compaction_pb2_grpc as crpc

__all__ = ["PlanInfo", "ReplicaCompaction", "describe", "compact", "wait", "offer_map", "map_bytes"]


@dataclass(frozen=True, slots=True)
class PlanInfo:
    """A compaction plan and the offset of its plan frame."""

    offset: int
    end_offset: int
    tombstone_horizon_ms: int
    producer_horizon_ms: int


@dataclass(frozen=True, slots=True)
class ReplicaCompaction:
    """One replica's compaction state (``broker_id`` hosts it).  ``cleaned_offset``: every
    record below it is compacted; ``dirty_ratio``: dirty share of the cleanable bytes;
    ``plan``: the latest plan in its log (None: none); the ``records_*``/``bytes_*`` fields
    describe the last clean applied on that broker since it started."""

    topic: str
    partition: int
    broker_id: int
    leader: bool
    cleanup_policy: str
    cleaned_offset: int
    cleanable_end: int
    clean_bytes: int
    dirty_bytes: int
    dirty_ratio: float
    plan: PlanInfo | None
    applied_plan_offset: int
    requested: bool
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    records_read: int
    records_kept: int
    tombstones_removed: int
    bytes_read: int
    bytes_written: int
    markers_removed: int = 0

    @property
    def settled(self) -> bool:
        """Nothing asked for or waiting: the latest plan (if any) is applied here."""
        return not self.requested and (self.plan is None or self.applied_plan_offset >= self.plan.offset)


def _replica(message: cpb.PartitionCompaction) -> ReplicaCompaction:
    plan = message.latest_plan
    return ReplicaCompaction(
        message.topic, message.partition, message.broker_id, message.leader, message.cleanup_policy,
        message.cleaned_offset, message.cleanable_end, message.clean_bytes, message.dirty_bytes, message.dirty_ratio,
        PlanInfo(plan.offset, plan.end_offset, plan.tombstone_horizon_ms, plan.producer_horizon_ms)
        if plan.offset >= 0 else None,
        message.applied_plan_offset, message.requested, message.log_start_offset, message.high_watermark,
        message.log_end_offset, message.records_read, message.records_kept, message.tombstones_removed,
        message.bytes_read, message.bytes_written, message.markers_removed)


def _stub(cluster: Cluster, address: str) -> crpc.CompactionStub:
    return crpc.CompactionStub(cluster.channel(address))


def _leaders(cluster: Cluster, topic: str, partitions: Sequence[int] | None) -> dict[str, list[int]]:
    info = cluster.topic(topic, refresh=True)
    wanted = sorted(info.partitions) if partitions is None else list(partitions)
    by_leader: dict[str, list[int]] = {}
    for index in wanted:
        address, _ = cluster.leader(topic, index)
        by_leader.setdefault(address, []).append(index)
    return by_leader


def describe(cluster: Cluster, topic: str, *, replicas: bool = False, timeout_s: float = 30.0
             ) -> dict[int, list[ReplicaCompaction]]:
    """``{partition: [leader's state, then the other replicas' (replicas=True)]}``.  A
    replica whose broker cannot be asked is left out; raises
    ``UnknownTopicOrPartitionError`` for an unknown topic."""
    info = cluster.topic(topic, refresh=True)
    hosts: set[int] = set()
    for meta in info.partitions.values():
        hosts.update(meta.replicas if replicas else ([meta.leader_id] if meta.leader_id >= 0 else []))
    out: dict[int, list[ReplicaCompaction]] = {p: [] for p in info.partitions}
    request = cpb.DescribeCompactionRequest(topics=[topic], leaders_only=not replicas)
    for broker_id in sorted(hosts):
        address = cluster.broker_address(broker_id)
        if address is None:
            continue
        try:
            answer = _stub(cluster, address).Describe(request, timeout=timeout_s)
        except grpc.RpcError:
            continue  # an unreachable replica: the caller sees it missing
        for message in answer.partitions:
            if message.topic == topic and not message.error.code and message.partition in out:
                out[message.partition].append(_replica(message))
    for states in out.values():
        states.sort(key=lambda s: (not s.leader, s.broker_id))
    return out


def compact(cluster: Cluster, topic: str, partitions: Sequence[int] | None = None, *,
            timeout_s: float = 30.0) -> dict[int, ReplicaCompaction]:
    """Ask each partition's leader to plan a clean now; their states after the request.
    Raises ``TopicNotCompactedError``, ``UnknownTopicOrPartitionError``."""
    out: dict[int, ReplicaCompaction] = {}

    def once() -> dict[int, ReplicaCompaction]:
        for address, indexes in _leaders(cluster, topic, partitions).items():
            todo = [i for i in indexes if i not in out]
            if not todo:
                continue
            try:
                answer = _stub(cluster, address).Compact(cpb.CompactRequest(topic=topic, partitions=todo),
                                                         timeout=timeout_s)
            except grpc.RpcError as exc:
                raise errors.from_rpc_error(exc, address=address) from None
            for message in answer.partitions:
                failure = error_from_pb(message.error)
                if failure is not None:
                    raise failure
                out[message.partition] = _replica(message)
        return out

    return retry(once, cluster=cluster, topics=[topic], deadline_s=timeout_s)


_FIRST_POLL_S = 0.01


def wait(cluster: Cluster, topic: str, partitions: Sequence[int] | None = None, *, timeout_s: float = 60.0,
         poll_s: float = 0.1, on_progress: Callable[[int, int], None] | None = None) -> dict[int, list[ReplicaCompaction]]:
    """Wait until every partition's leader settled and every replica applied its latest
    plan (module docstring); returns the final states.  ``RequestTimeoutError`` after
    ``timeout_s`` (the cleaners go on).  Polls every 10 ms at first, then every twentieth
    of the time waited so far, at most every ``poll_s``: a clean of a few hundred
    milliseconds is seen done within a few percent of its time, a long one costs the
    brokers ``1 / poll_s`` describes a second."""
    started = time.monotonic()
    deadline = started + timeout_s
    while True:
        states = describe(cluster, topic, replicas=True)
        wanted = sorted(states) if partitions is None else list(partitions)
        info = cluster.topic(topic)
        pending = [p for p in wanted if not _done(states.get(p, []), len(info.partitions[p].replicas))]
        if on_progress is not None:
            on_progress(len(wanted) - len(pending), len(wanted))
        if not pending:
            return states
        if time.monotonic() > deadline:
            raise errors.RequestTimeoutError(f"compaction of {topic} partitions {pending} did not settle in "
                                             f"{timeout_s} s (the cleaners go on)")
        waited = time.monotonic() - started
        time.sleep(min(poll_s, max(_FIRST_POLL_S, waited / 20)))  # polling brokers' state, not synchronising threads


def _done(states: list[ReplicaCompaction], replicas: int) -> bool:
    if len(states) < replicas or not states or not states[0].leader:
        return False
    leader = states[0]
    if not leader.settled:
        return False
    target = leader.plan.offset if leader.plan is not None else -1
    return all(s.applied_plan_offset >= target and s.cleaned_offset == leader.cleaned_offset for s in states)


def map_bytes(table: pa.Table) -> bytes:
    """An offset map (columns ``key`` binary, ``offset`` int64) as the Arrow IPC stream
    ``offer_map`` sends.  Raises ``InvalidOffsetMapError`` if ``table`` is not a
    ``pyarrow.Table`` (its columns are the brokers' to check)."""
    if not isinstance(table, pa.Table):
        raise errors.InvalidOffsetMapError(f"an offset map must be a pyarrow.Table (columns key binary, offset int64), "
                                           f"got {type(table).__name__}")
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def offer_map(cluster: Cluster, address: str, topic: str, partition: int, *, start: int, end: int, data: bytes,
              plan: bool, timeout_s: float = 60.0) -> PlanInfo | None:
    """Send an offset map to the broker at ``address`` (module docstring); the plan the
    leader published (``plan=True``).  Raises what the broker refused with
    (``CompactionConflictError``, ``InvalidOffsetMapError``, ``NotLeaderError``...)."""
    request = cpb.OffsetMapRequest(topic=topic, partition=partition, start_offset=start, end_offset=end,
                                   offset_map=data, plan=plan)
    try:
        answer = _stub(cluster, address).OfferOffsetMap(request, timeout=timeout_s)
    except grpc.RpcError as exc:
        error: SparkLogError = errors.from_rpc_error(exc, address=address)
        raise error from None
    p = answer.plan
    return PlanInfo(p.offset, p.end_offset, p.tombstone_horizon_ms, p.producer_horizon_ms) if p.offset >= 0 else None
