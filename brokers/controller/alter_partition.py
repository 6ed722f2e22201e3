"""AlterPartition: a partition leader asks to change its ISR (pure validation).

The leader sends the epochs it knows; anything stale is fenced, as in Kafka's
AlterPartition (KIP-497):

- ``FencedEpochError``: the broker is not registered with ``broker_epoch``, it is not
  the current leader, or ``leader_epoch`` / ``partition_epoch`` differ from the image;
- ``UnknownTopicOrPartitionError``: no such topic or partition;
- ``InvalidRequestError``: the new ISR is empty, has duplicates, omits the leader,
  names a broker that is not a replica, or a broker that is fenced.

Returns the records (none when the ISR is unchanged).  The caller answers with the
partition state after they are applied.
"""
from __future__ import annotations

from typing import Sequence

from brokers.metadata.image import MetadataImage
from brokers.metadata.records import MetadataRecord, PartitionChangeRecord
from spark_log.errors import FencedEpochError, InvalidRequestError, UnknownTopicOrPartitionError

__all__ = ["alter_partition_records"]


def alter_partition_records(
    image: MetadataImage,
    *,
    broker_id: int,
    broker_epoch: int,
    topic: str,
    partition: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: Sequence[int],
) -> list[MetadataRecord]:
    broker = image.brokers.get(broker_id)
    if broker is None or broker.broker_epoch != broker_epoch:
        current = broker.broker_epoch if broker is not None else "none"
        raise FencedEpochError(
            f"broker {broker_id} with epoch {broker_epoch} is not the current registration (epoch {current})"
        )
    info = image.partition(topic, partition)
    if info is None:
        raise UnknownTopicOrPartitionError(f"partition {topic}-{partition} does not exist")
    if info.leader != broker_id:
        raise FencedEpochError(
            f"broker {broker_id} is not the leader of {topic}-{partition} (leader is {info.leader}, "
            f"leader epoch {info.leader_epoch})"
        )
    if leader_epoch != info.leader_epoch:
        raise FencedEpochError(
            f"stale leader epoch {leader_epoch} for {topic}-{partition}; the current leader epoch is {info.leader_epoch}"
        )
    if partition_epoch != info.partition_epoch:
        raise FencedEpochError(
            f"stale partition epoch {partition_epoch} for {topic}-{partition}; "
            f"the current partition epoch is {info.partition_epoch}"
        )
    isr = tuple(new_isr)
    if not isr:
        raise InvalidRequestError(f"the new ISR of {topic}-{partition} is empty")
    if len(set(isr)) != len(isr):
        raise InvalidRequestError(f"the new ISR {list(isr)} of {topic}-{partition} has duplicates")
    if broker_id not in isr:
        raise InvalidRequestError(f"the new ISR {list(isr)} of {topic}-{partition} must contain its leader {broker_id}")
    strangers = [b for b in isr if b not in info.replicas]
    if strangers:
        raise InvalidRequestError(
            f"brokers {strangers} are not replicas of {topic}-{partition} (replicas {list(info.replicas)})"
        )
    fenced = [b for b in isr if b not in image.brokers or image.brokers[b].fenced]
    if fenced:
        raise InvalidRequestError(f"brokers {fenced} are fenced and cannot join the ISR of {topic}-{partition}")
    if isr == info.isr:
        return []
    return [PartitionChangeRecord(topic=topic, partition=partition, isr=isr)]
