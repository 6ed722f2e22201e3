"""Leader election and ISR updates when brokers are fenced or come back (pure).

Rules (Kafka's, before eligible leader replicas):

- *Fencing* broker B removes B from every ISR that holds it, except that the last ISR
  member stays (it is the one known to hold every committed record).  A partition that
  B led gets a new leader: the first replica, in replica order, that is in the new ISR
  and live; if there is none, the partition goes offline (no leader) unless the
  topic's ``unclean.leader.election.enable`` allows the first live replica outside
  the ISR to lead, in which case the ISR becomes just that replica (data may be lost:
  that is what the config means).
- *Unfencing* B makes it leader of every offline partition whose ISR holds it, and,
  when unclean election is enabled, of offline partitions it is a replica of.

``fence_changes`` and ``unfence_changes`` return the ``PartitionChangeRecord``s; the
fence/unfence record itself is the caller's.  Live means registered and unfenced.
"""
from __future__ import annotations

from typing import Callable

from brokers.metadata.image import MetadataImage, PartitionInfo
from brokers.metadata.records import NO_CHANGE, NO_LEADER, PartitionChangeRecord

__all__ = ["elect_leader", "fence_changes", "unfence_changes"]


def elect_leader(
    info: PartitionInfo, *, is_live: Callable[[int], bool], unclean: bool
) -> tuple[int | None, tuple[int, ...]]:
    """``(leader, isr)`` for ``info``: the current leader if live, else the first live
    ISR replica, else (``unclean`` only) the first live replica with ISR ``(it,)``, else
    ``(None, isr)``."""
    if info.leader is not None and is_live(info.leader) and info.leader in info.isr:
        return info.leader, info.isr
    for replica in info.replicas:
        if replica in info.isr and is_live(replica):
            return replica, info.isr
    if unclean:
        for replica in info.replicas:
            if is_live(replica):
                return replica, (replica,)
    return None, info.isr


def fence_changes(image: MetadataImage, broker_id: int) -> list[PartitionChangeRecord]:
    """Partition changes that take ``broker_id`` out of leadership and ISRs."""

    def is_live(b: int) -> bool:
        info = image.brokers.get(b)
        return b != broker_id and info is not None and not info.fenced

    changes: list[PartitionChangeRecord] = []
    for name, index, info in image.iter_partitions():
        if broker_id not in info.isr and info.leader != broker_id:
            continue
        shrunk = tuple(r for r in info.isr if r != broker_id) or info.isr
        unclean = image.topics[name].config.unclean_leader_election_enable
        leader, isr = elect_leader(
            PartitionInfo(replicas=info.replicas, isr=shrunk, leader=info.leader), is_live=is_live, unclean=unclean
        )
        if leader == info.leader and isr == info.isr:
            continue
        changes.append(
            PartitionChangeRecord(
                topic=name,
                partition=index,
                leader=NO_CHANGE if leader == info.leader else (NO_LEADER if leader is None else leader),
                isr=None if isr == info.isr else isr,
            )
        )
    return changes


def unfence_changes(image: MetadataImage, broker_id: int) -> list[PartitionChangeRecord]:
    """Partition changes that let a returning ``broker_id`` lead offline partitions.
    ``image`` may still show the broker fenced: it is treated as live here."""
    changes: list[PartitionChangeRecord] = []
    for name, index, info in image.iter_partitions():
        if info.leader is not None or broker_id not in info.replicas:
            continue
        if broker_id in info.isr:
            changes.append(PartitionChangeRecord(topic=name, partition=index, leader=broker_id))
        elif image.topics[name].config.unclean_leader_election_enable:
            changes.append(PartitionChangeRecord(topic=name, partition=index, leader=broker_id, isr=(broker_id,)))
    return changes
