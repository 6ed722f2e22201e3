"""Live replication state of partitions, asked of their leaders (``Broker.DescribePartitions``).

``live_states(cluster, wanted, describe=..., deadline_s=...)`` groups the wanted partitions by
the leader the controller's view names, sends one ``DescribePartitions`` to each leader (all
of them in flight at once, as gRPC futures) and keeps an answer only when it comes from the
leader in the leader epoch that view names, so the live fields always belong to the
leadership the description shows.  A partition answered ``NOT_LEADER`` (or by a leader in
another epoch, or with another retriable error) is asked again after ``describe`` gave a
fresh view of its topic, until ``deadline_s``.

What is *not* retried: a partition without a leader (offline), a leader that cannot be
reached (connection refused, timeout after ``call_timeout_s``) or answers a non-retriable
error, and anything once no broker answers a metadata request.  Those partitions get no ``LiveState``: describe shows their live fields as unknown
rather than failing as a whole.

Thread-safe (no state of its own; ``Cluster`` is thread-safe).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence

import grpc

from ._client import Cluster, error_from_pb
from .errors import SparkLogError
from .proto import broker_pb2 as pb

__all__ = ["LiveState", "live_states"]

TopicPartition = tuple[str, int]


class Leadership(Protocol):
    """What ``live_states`` needs of a partition description (``PartitionDescription`` fits)."""

    @property
    def leader(self) -> int | None: ...

    @property
    def leader_epoch(self) -> int: ...


@dataclass(frozen=True, slots=True)
class LiveState:
    """One partition as its leader reported it.  ``log_end_offsets`` maps every replica to
    its log end offset (None: that follower has not fetched in this leader epoch)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int | None
    log_end_offsets: dict[int, int | None]
    log_size_bytes: int | None = None  # the leader's log on disk

    @staticmethod
    def from_pb(state: pb.PartitionState) -> "LiveState":
        return LiveState(
            leader=state.leader_id, leader_epoch=state.leader_epoch, partition_epoch=state.partition_epoch,
            isr=tuple(state.isr), log_start_offset=state.log_start_offset, high_watermark=state.high_watermark,
            last_stable_offset=state.last_stable_offset if state.last_stable_offset >= 0 else None,
            log_end_offsets={p.broker_id: (p.log_end_offset if p.log_end_offset >= 0 else None)
                             for p in state.replicas_progress},
            log_size_bytes=state.log_size_bytes if state.log_size_bytes >= 0 else None)


def live_states(
    cluster: Cluster,
    wanted: Mapping[TopicPartition, Leadership],
    *,
    describe: Callable[[Sequence[str]], Mapping[TopicPartition, Leadership]],
    deadline_s: float = 5.0,
    call_timeout_s: float = 5.0,
) -> tuple[dict[TopicPartition, LiveState], dict[TopicPartition, Leadership]]:
    """``(states, views)``: the live state of every partition whose leader answered, and the
    controller view each answer matches (``wanted``'s, or a fresher one from ``describe``,
    which maps ``topics`` to their current partition views).  See the module docstring."""
    views = dict(wanted)
    states: dict[TopicPartition, LiveState] = {}
    todo = [tp for tp, view in views.items() if view.leader is not None]
    deadline = time.monotonic() + deadline_s
    delay = 0.05
    if todo and not _refresh(cluster, todo):
        return states, views
    while todo:
        retry = _ask_leaders(cluster, todo, views, states, call_timeout_s)
        if not retry or time.monotonic() + delay > deadline:
            break
        time.sleep(delay)  # backoff while leadership settles, not synchronisation
        delay = min(delay * 2, 0.5)
        fresh = describe(sorted({t for t, _ in retry}))
        views.update({tp: view for tp, view in fresh.items() if tp in views and tp not in states})
        if not _refresh(cluster, retry):
            break
        todo = [tp for tp in retry if views[tp].leader is not None]
    return states, views


def _refresh(cluster: Cluster, tps: list[TopicPartition]) -> bool:
    """Learn the leaders' addresses; False (give up on the live state) when no broker answers."""
    try:
        cluster.refresh(sorted({t for t, _ in tps}))
        return True
    except SparkLogError:
        return False


def _ask_leaders(cluster: Cluster, todo: list[TopicPartition], views: Mapping[TopicPartition, Leadership],
                 states: dict[TopicPartition, LiveState], call_timeout_s: float) -> list[TopicPartition]:
    """One round: every leader asked at once; returns the partitions worth asking again."""
    by_address: dict[str, list[TopicPartition]] = {}
    retry: list[TopicPartition] = []
    for tp in todo:
        leader = views[tp].leader
        address = cluster.broker_address(leader) if leader is not None else None
        if address is None:
            retry.append(tp)          # a leader the metadata does not know yet
        else:
            by_address.setdefault(address, []).append(tp)
    calls = []
    for address, group in by_address.items():
        topics: dict[str, list[int]] = {}
        for topic, index in group:
            topics.setdefault(topic, []).append(index)
        request = pb.DescribePartitionsRequest(
            topics=[pb.DescribePartitionsTopic(topic=t, partitions=p) for t, p in topics.items()])
        try:
            calls.append((address, group, cluster.broker(address).DescribePartitions.future(
                request, timeout=call_timeout_s)))
        except grpc.RpcError:
            continue  # refused before it was sent (no SCRAM session): these stay unknown
    for address, group, call in calls:
        try:
            response = call.result()
        except grpc.RpcError:
            continue                  # unreachable, stalled or refusing leader: these stay unknown
        for state in response.partitions:
            tp = (state.topic, state.partition)
            if tp not in views or tp in states:
                continue
            problem = error_from_pb(state.error)
            if problem is None and state.leader_epoch == views[tp].leader_epoch:
                states[tp] = LiveState.from_pb(state)
            elif problem is None or problem.retriable:
                retry.append(tp)      # another epoch than the view, NOT_LEADER, a replica being (re)opened
    return retry
