"""Replica placement: which brokers host a new topic's partitions (pure, deterministic).

``place_replicas(brokers, partitions, replication_factor, replica_load=, leader_load=)``
returns one replica tuple per partition; the first replica is the preferred leader.
Greedy, one partition at a time, from the current load of the cluster (so that topics
created one after another still spread evenly):

1. the leader is the broker with the fewest leaders, then the fewest replicas, then
   the first in the rack-interleaved order, rotated by partition index;
2. each follower is the broker whose placement domain (rack, else host) holds the
   fewest replicas of this partition, then with the fewest replicas overall, then the
   next after the leader in the rack-interleaved order (Kafka's "following brokers").

Guarantees (table-tested): replicas of a partition are distinct; they span
``min(replication_factor, number of domains)`` domains; over a placement from zero
load, leader counts and replica counts per broker differ by at most one when domains
are of equal size.  Raises ``InvalidReplicationFactorError`` when there are fewer
brokers than ``replication_factor`` and ``InvalidPartitionsError`` for ``partitions < 1``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from spark_log.errors import InvalidPartitionsError, InvalidReplicationFactorError

__all__ = ["BrokerSlot", "interleave_by_domain", "place_replicas"]


@dataclass(frozen=True, slots=True)
class BrokerSlot:
    """A broker that can take replicas, and the domain (rack or host) it lives in."""

    broker_id: int
    domain: str = ""


def interleave_by_domain(brokers: Sequence[BrokerSlot]) -> list[BrokerSlot]:
    """Brokers ordered so that consecutive ones sit in different domains when possible:
    domains sorted by name, brokers by id within a domain, then taken round-robin."""
    by_domain: dict[str, list[BrokerSlot]] = {}
    for slot in sorted(brokers, key=lambda s: (s.domain, s.broker_id)):
        by_domain.setdefault(slot.domain, []).append(slot)
    queues = [by_domain[d] for d in sorted(by_domain)]
    ordered: list[BrokerSlot] = []
    depth = 0
    while len(ordered) < len(brokers):
        for queue in queues:
            if depth < len(queue):
                ordered.append(queue[depth])
        depth += 1
    return ordered


def place_replicas(
    brokers: Sequence[BrokerSlot],
    partitions: int,
    replication_factor: int,
    *,
    replica_load: Mapping[int, int] | None = None,
    leader_load: Mapping[int, int] | None = None,
) -> list[tuple[int, ...]]:
    """Replica tuples for ``partitions`` partitions (see the module docstring)."""
    if partitions < 1:
        raise InvalidPartitionsError(f"number of partitions must be at least 1, got {partitions}")
    if replication_factor < 1:
        raise InvalidReplicationFactorError(f"replication factor must be at least 1, got {replication_factor}")
    if len({s.broker_id for s in brokers}) != len(brokers):
        raise ValueError("broker ids must be distinct")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {len(brokers)} "
            "available (registered, unfenced) brokers"
        )
    order = interleave_by_domain(brokers)
    position = {slot.broker_id: index for index, slot in enumerate(order)}
    domain = {slot.broker_id: slot.domain for slot in order}
    replicas_on = {s.broker_id: (replica_load or {}).get(s.broker_id, 0) for s in order}
    leaders_on = {s.broker_id: (leader_load or {}).get(s.broker_id, 0) for s in order}
    count = len(order)
    result: list[tuple[int, ...]] = []
    for index in range(partitions):
        leader = min(
            replicas_on,
            key=lambda b: (leaders_on[b], replicas_on[b], (position[b] - index) % count),
        )
        chosen = [leader]
        per_domain = {domain[leader]: 1}
        while len(chosen) < replication_factor:
            follower = min(
                (b for b in replicas_on if b not in chosen),
                key=lambda b: (
                    per_domain.get(domain[b], 0),
                    replicas_on[b],
                    (position[b] - position[leader]) % count,
                ),
            )
            chosen.append(follower)
            per_domain[domain[follower]] = per_domain.get(domain[follower], 0) + 1
        for broker in chosen:
            replicas_on[broker] += 1
        leaders_on[leader] += 1
        result.append(tuple(chosen))
    return result
