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
"""
from __future__ import annotations

from brokers.metadata.image import MetadataImage
from brokers.metadata.records import PartitionChangeRecord

__all__ = ["preferred_leader_changes"]


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
