"""Preferred-leader election (pure): leadership back to each partition's first replica.

Placement spreads the first replica of the partitions evenly over the brokers, so when
every partition is led by its first replica ("preferred leader") the leaders are balanced.
After a broker fails and comes back, the partitions it led stay with the brokers that took
over; ``preferred_leader_changes(image)`` moves each back as soon as it is safe:

- the preferred replica is live (registered, unfenced) and in the ISR (so it holds every
  committed record; it became an ISR member again only after catching up), and
- the partition currently has a leader other than it (offline partitions are the unfence
  path's business, ``brokers.controller.election``).

The controller's background loop proposes the returned ``PartitionChangeRecord``s (which
bump the leader epoch, so the former leader is fenced as usual).  Kafka runs this every
``leader.imbalance.check.interval.seconds``; the caller decides how often.

On demand (``ElectLeaders``), ``elect_preferred(image, partitions)`` applies the same
rule to the named partitions, offline ones included, and says per partition what
happens: the leader it will have, and why the preferred replica cannot lead when it
cannot (not registered, fenced, not in the ISR).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from brokers.metadata.image import MetadataImage
from brokers.metadata.records import PartitionChangeRecord

__all__ = ["ElectionOutcome", "elect_preferred", "preferred_leader_changes"]


@dataclass(frozen=True, slots=True)
class ElectionOutcome:
    """What an on-demand election does for one partition: ``leader`` once ``change`` (if
    any) applies; ``reason`` (None when the preferred replica leads) says why it cannot."""

    topic: str
    partition: int
    preferred: int | None
    leader: int | None
    change: PartitionChangeRecord | None = None
    reason: str | None = None


def elect_preferred(image: MetadataImage, partitions: Iterable[tuple[str, int]]) -> list[ElectionOutcome]:
    """Outcomes for ``partitions`` (each must exist in ``image``; the caller checks)."""
    outcomes: list[ElectionOutcome] = []
    for name, index in partitions:
        info = image.topics[name].partitions[index]
        preferred = info.replicas[0] if info.replicas else None
        broker = image.brokers.get(preferred) if preferred is not None else None
        reason: str | None = None
        if preferred is None:
            reason = "the partition has no replicas"
        elif info.leader == preferred:
            pass
        elif broker is None:
            reason = f"preferred replica {preferred} is not a registered broker"
        elif broker.fenced:
            reason = f"preferred replica {preferred} is not live (fenced)"
        elif preferred not in info.isr:
            reason = f"preferred replica {preferred} is not in the ISR {list(info.isr)}"
        if reason is not None or preferred is None or info.leader == preferred:
            outcomes.append(ElectionOutcome(name, index, preferred, info.leader, reason=reason))
            continue
        change = PartitionChangeRecord(topic=name, partition=index, leader=preferred)
        outcomes.append(ElectionOutcome(name, index, preferred, preferred, change=change))
    return outcomes


def preferred_leader_changes(image: MetadataImage) -> list[PartitionChangeRecord]:
    changes: list[PartitionChangeRecord] = []
    for name, index, info in image.iter_partitions():
        if not info.replicas or info.leader is None:
            continue
        preferred = info.replicas[0]
        broker = image.brokers.get(preferred)
        if info.leader == preferred or broker is None or broker.fenced or preferred not in info.isr:
            continue
        changes.append(PartitionChangeRecord(topic=name, partition=index, leader=preferred))
    return changes
