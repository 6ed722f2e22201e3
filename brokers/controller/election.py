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
- *Enabling* ``unclean.leader.election.enable`` on a topic (a config change) elects at
  once, in every offline partition of the topic, the first live replica (Kafka's
  behaviour with dynamic topic configs): no fence or unfence event is needed.

``fence_changes``, ``unfence_changes`` and ``offline_elections`` return the
``PartitionChangeRecord``s; the fence/unfence/config record itself is the caller's.
Live means registered and unfenced.
"""
from __future__ import annotations

from typing import Callable

from brokers.metadata.image import MetadataImage, PartitionInfo
from brokers.metadata.records import NO_CHANGE, NO_LEADER, PartitionChangeRecord

__all__ = ["elect_leader", "fence_changes", "offline_elections", "unfence_changes"]


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


def offline_elections(image: MetadataImage, topic: str, *, unclean: bool) -> list[PartitionChangeRecord]:
    """Leaders for ``topic``'s offline partitions under ``unclean`` (the topic's setting
    after a config change): a live ISR replica if any, else (``unclean``) the first live
    replica, whose ISR becomes just itself.  Partitions that stay offline get no record."""
    current = image.topics.get(topic)
    if current is None:
        return []

    def is_live(b: int) -> bool:
        info = image.brokers.get(b)
        return info is not None and not info.fenced

    changes: list[PartitionChangeRecord] = []
    for index, info in sorted(current.partitions.items()):
        if info.leader is not None:
            continue
        leader, isr = elect_leader(info, is_live=is_live, unclean=unclean)
        if leader is not None:
            changes.append(PartitionChangeRecord(topic=topic, partition=index, leader=leader,
                                                 isr=None if isr == info.isr else isr))
    return changes
