"""Partition reassignment (pure): change a partition's replica set online (KIP-455).

A reassignment moves a partition from its *original* replicas to a *target* list in
three steps, each a ``PartitionChangeRecord``:

1. **start** (``reassignment_records``): ``replicas`` becomes the target followed by the
   original replicas not in it (current ∪ target), ``adding_replicas`` = target -
   original, ``removing_replicas`` = original - target.  The added brokers see
   themselves in ``replicas`` and start following; the leader adds them to the ISR
   (AlterPartition) once they have caught up.  Nothing else changes: the leader and
   ISR stay.
2. **complete** (``completion_changes``): once the ISR holds every target replica,
   ``replicas`` = target (in target order), ISR = ISR ∩ target, adding/removing
   cleared; if the leader is not in the target (or has none) the first target replica,
   in target order, that is live and in the ISR leads (a new leader epoch, so the old
   leader is fenced as usual).  A partition whose target has no live ISR member waits.
   The removed brokers see themselves gone from ``replicas`` and drop their replica.
3. **cancel** (``cancel_records``, an empty target): ``replicas`` = the original
   replicas (those not being added, in their current order), ISR = ISR ∩ original,
   adding/removing cleared; a leader that was being added hands over to the first
   live ISR member of the original replicas.  Cancelling when nothing is pending is a
   no-op (so a retried cancel is harmless); a cancel that would leave no ISR member
   is refused.

A new target while one is pending replaces it: the original replicas stay those of
the first reassignment (Kafka's rule), so cancelling always returns to them.  A target
equal to the current replicas with nothing pending is a no-op.  The preferred replica
is always ``replicas[0]``, so during a move it is the target's first replica.

Refusals raise and propose nothing: ``UnknownTopicOrPartitionError`` (no such topic or
partition), ``InvalidRequestError`` (duplicate ids, negative ids, brokers that are not
registered, a cancel that would leave no ISR member).  Live means registered and
unfenced; a target may name fenced brokers (the move then waits for them).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from brokers.metadata.image import MetadataImage, PartitionInfo
from brokers.metadata.records import NO_CHANGE, NO_LEADER, PartitionChangeRecord
from spark_log.errors import InvalidRequestError, UnknownTopicOrPartitionError

__all__ = ["cancel_records", "completion_changes", "reassignment_records", "validate_target"]


def _partition(image: MetadataImage, topic: str, partition: int) -> PartitionInfo:
    topic_image = image.topics.get(topic)
    if topic_image is None:
        raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
    info = topic_image.partitions.get(partition)
    if info is None:
        raise UnknownTopicOrPartitionError(
            f"topic {topic!r} has no partition {partition} (it has {len(topic_image.partitions)})"
        )
    return info


def validate_target(image: MetadataImage, topic: str, partition: int, target: Sequence[int]) -> tuple[int, ...]:
    """The target as a tuple, or the refusal (see the module docstring)."""
    replicas = tuple(target)
    if any(not isinstance(b, int) or isinstance(b, bool) for b in replicas):
        raise InvalidRequestError(f"target replicas of {topic}-{partition} must be broker ids, got {list(replicas)}")
    if not replicas:
        raise InvalidRequestError(f"the target replica list of {topic}-{partition} is empty")
    negative = [b for b in replicas if b < 0]
    if negative:
        raise InvalidRequestError(f"target replicas {negative} of {topic}-{partition} are not valid broker ids")
    duplicates = sorted({b for b in replicas if replicas.count(b) > 1})
    if duplicates:
        raise InvalidRequestError(
            f"target replicas {list(replicas)} of {topic}-{partition} name brokers {duplicates} more than once"
        )
    unknown = [b for b in replicas if b not in image.brokers]
    if unknown:
        raise InvalidRequestError(
            f"target replicas {unknown} of {topic}-{partition} are not registered brokers "
            f"(registered: {sorted(image.brokers)})"
        )
    return replicas


def reassignment_records(
    image: MetadataImage, topic: str, partition: int, target: Sequence[int] | None
) -> list[PartitionChangeRecord]:
    """Records that start (or replace, or with an empty/None target cancel) a reassignment."""
    info = _partition(image, topic, partition)
    if target is None or len(target) == 0:
        return cancel_records(image, topic, partition)
    wanted = validate_target(image, topic, partition, target)
    original = info.original
    if not info.reassigning and wanted == info.replicas:
        return []
    replicas = wanted + tuple(r for r in original if r not in wanted)
    adding = tuple(r for r in wanted if r not in original)
    removing = tuple(r for r in original if r not in wanted)
    if replicas == info.replicas and adding == info.adding_replicas and removing == info.removing_replicas:
        return []
    # replicas being dropped from a replaced reassignment leave the ISR with it
    isr = tuple(r for r in info.isr if r in replicas)
    if not isr:
        raise InvalidRequestError(f"replacing the reassignment of {topic}-{partition} would leave no ISR member")
    leader = NO_CHANGE
    if info.leader is not None and info.leader not in replicas:  # an added broker that led: back to the ISR
        leader = _first_live(image, replicas, isr)
        if leader == NO_LEADER:
            raise InvalidRequestError(
                f"replacing the reassignment of {topic}-{partition} would leave it without a live leader"
            )
    return [
        PartitionChangeRecord(
            topic=topic,
            partition=partition,
            leader=leader,
            isr=None if isr == info.isr else isr,
            replicas=replicas,
            adding_replicas=adding,
            removing_replicas=removing,
        )
    ]


def cancel_records(image: MetadataImage, topic: str, partition: int) -> list[PartitionChangeRecord]:
    """Records that cancel a pending reassignment (none if nothing is pending)."""
    info = _partition(image, topic, partition)
    if not info.reassigning:
        return []
    original = info.original
    isr = tuple(r for r in info.isr if r in original)
    if not isr:
        raise InvalidRequestError(
            f"cannot cancel the reassignment of {topic}-{partition}: no original replica {list(original)} "
            f"is in the ISR {list(info.isr)}"
        )
    return [_switch_to(image, topic, partition, info, original)]


def completion_changes(
    image: MetadataImage, only: Callable[[str, int], bool] | None = None
) -> list[PartitionChangeRecord]:
    """Records that complete every pending reassignment whose target is all in the ISR
    (restricted to partitions for which ``only(topic, partition)`` holds, if given)."""
    changes: list[PartitionChangeRecord] = []
    for name, index, info in image.iter_partitions():
        if not info.reassigning or (only is not None and not only(name, index)):
            continue
        target = info.target
        if not target or any(r not in info.isr for r in target):
            continue
        change = _switch_to(image, name, index, info, target)
        if change.leader == NO_LEADER:
            continue  # no live target replica to lead yet: wait
        changes.append(change)
    return changes


def _switch_to(image: MetadataImage, topic: str, partition: int, info: PartitionInfo,
               replicas: tuple[int, ...]) -> PartitionChangeRecord:
    """The record that ends a reassignment with ``replicas`` as the whole replica set: the
    ISR cut to them, and the leader moved to the first live in-sync one of them when the
    current leader is not among them (``NO_LEADER`` if none is)."""
    isr = tuple(r for r in info.isr if r in replicas)
    leader = NO_CHANGE
    if info.leader is None or info.leader not in replicas:
        leader = _first_live(image, replicas, isr)
    return PartitionChangeRecord(topic=topic, partition=partition, leader=leader,
                                 isr=None if isr == info.isr else isr, replicas=replicas,
                                 adding_replicas=(), removing_replicas=())


def _first_live(image: MetadataImage, order: Sequence[int], isr: Sequence[int]) -> int:
    """The first broker of ``order`` that is in ``isr`` and live, else ``NO_LEADER``."""
    for broker_id in order:
        info = image.brokers.get(broker_id)
        if broker_id in isr and info is not None and not info.fenced:
            return broker_id
    return NO_LEADER
