"""Partition reassignment and preferred-leader election for ``Admin`` (private).

``Admin`` delegates here; ``call(method, request, topics)`` is its retrying request to
any broker, which forwards changes to the active controller.  Semantics (KIP-455):
starting a reassignment adds the target replicas, which catch up and join the ISR; the
controller then switches the replica set to the target (in target order; the first one
is the preferred leader) and the removed brokers delete their copies.  Until then the
partition's ``replicas`` are the target followed by the replicas being removed.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import errors
from .errors import InvalidRequestError
from .proto import broker_pb2 as pb

__all__ = ["ElectionResult", "PartitionReassignment"]

Call = Callable[[str, Any, Sequence[str]], Any]
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A partition's replica set while (or right after) it is reassigned.  ``adding`` and
    ``removing`` both empty: no reassignment is pending."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def pending(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """A preferred-leader election for one partition: ``leader`` after it (None: offline)
    and ``reason`` (None when the preferred replica leads) why the preferred replica
    ``preferred`` could not take over (not live, not in the ISR)."""

    topic: str
    partition: int
    preferred: int | None
    leader: int | None
    reason: str | None

    @property
    def ok(self) -> bool:
        return self.reason is None


def _reassignment(message: pb.PartitionReassignment) -> PartitionReassignment:
    return PartitionReassignment(message.topic, message.partition, tuple(message.replicas),
                                 tuple(message.adding_replicas), tuple(message.removing_replicas))


def _key(tp: Any) -> TopicPartition:
    if (not isinstance(tp, tuple) or len(tp) != 2 or not isinstance(tp[0], str) or not isinstance(tp[1], int)
            or isinstance(tp[1], bool)):
        raise InvalidRequestError(f"partitions are (topic, partition) tuples, got {tp!r}")
    return tp


def _target(tp: TopicPartition, replicas: Sequence[int] | None) -> list[int]:
    if replicas is None:
        return []
    if isinstance(replicas, (str, bytes)) or not all(isinstance(b, int) and not isinstance(b, bool) for b in replicas):
        raise InvalidRequestError(f"replicas of {tp[0]}-{tp[1]} must be a list of broker ids, got {replicas!r}")
    if len(replicas) == 0:
        raise InvalidRequestError(f"empty replica list for {tp[0]}-{tp[1]}; use None to cancel a reassignment")
    return list(replicas)


def alter(call: Call, reassignments: Mapping[TopicPartition, Sequence[int] | None]
          ) -> dict[TopicPartition, PartitionReassignment]:
    """Start (a list of broker ids) or cancel (None) reassignments, in the mapping's
    order; every entry is checked before any is sent.  The first refusal raises (entries
    before it stay applied; each is idempotent, so sending the same mapping again is safe)."""
    requests = [(tp, _target(tp, replicas)) for tp, replicas in ((_key(k), v) for k, v in reassignments.items())]
    out: dict[TopicPartition, PartitionReassignment] = {}
    for (topic, partition), target in requests:
        request = pb.AlterPartitionReassignmentsRequest(topic=topic, partition=partition, target_replicas=target)
        out[(topic, partition)] = _reassignment(call("AlterPartitionReassignments", request, [topic]).partition)
    return out


def list_pending(call: Call, topic: str | None) -> dict[TopicPartition, PartitionReassignment]:
    request = pb.ListPartitionReassignmentsRequest(topic=topic or "")
    response = call("ListPartitionReassignments", request, [topic] if topic else [])
    return {(r.topic, r.partition): _reassignment(r) for r in response.reassignments}


def wait_done(call: Call, partitions: Sequence[TopicPartition] | None, timeout_s: float, *,
              observe: Callable[[dict[TopicPartition, PartitionReassignment]], None] | None = None) -> None:
    """Wait until none of ``partitions`` (every partition if None) has a pending
    reassignment; ``RequestTimeoutError`` after ``timeout_s``.  ``observe`` is called with
    the pending ones at each look (last with ``{}``)."""
    wanted = None if partitions is None else {_key(tp) for tp in partitions}
    topics = sorted({t for t, _ in wanted}) if wanted is not None else [None]
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        pending = {tp: state for topic in topics for tp, state in list_pending(call, topic).items()
                   if wanted is None or tp in wanted}
        if observe is not None:
            observe(pending)
        if not pending:
            return
        if time.monotonic() + delay > deadline:
            raise errors.RequestTimeoutError(
                f"reassignments of {sorted(pending)} still pending after {timeout_s}s (they continue; "
                "list_partition_reassignments shows them)")
        time.sleep(delay)  # polling back-off between requests, not synchronisation
        delay = min(delay * 2, 0.5)


def elect(call: Call, topic: str | None, partitions: Sequence[int] | None) -> dict[TopicPartition, ElectionResult]:
    """Preferred-leader election now: every partition (``topic`` None), every partition
    of ``topic``, or the listed ``partitions`` of ``topic``."""
    if topic is None and partitions is not None:
        raise InvalidRequestError("partitions need a topic")
    refs: list[pb.TopicPartitionRef] = []
    if topic is not None:
        if partitions is None:
            described = call("DescribeTopic", pb.DescribeTopicRequest(name=topic), [topic])
            partitions = [p.partition for p in described.partitions]
        for p in partitions:
            refs.append(pb.TopicPartitionRef(topic=topic, partition=_key((topic, p))[1]))
        if not refs:
            return {}
    response = call("ElectLeaders", pb.ElectLeadersRequest(partitions=refs), [topic] if topic else [])
    return {
        (r.topic, r.partition): ElectionResult(r.topic, r.partition, None if r.preferred < 0 else r.preferred,
                                               None if r.leader < 0 else r.leader, r.reason or None)
        for r in response.results
    }
