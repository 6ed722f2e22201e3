"""MetadataDelta: the changes of a run of records on top of a base image.

    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)          # ReplayError if it contradicts the image
    new_image = delta.apply(offset=o, epoch=e)

Sub-deltas are lazy: a topic gets a ``_TopicDelta`` only when a record touches it, and
``apply`` reuses every untouched ``TopicImage``/``BrokerInfo`` object of the base image.
After ``apply`` the delta still answers what changed (``changed_topics``,
``removed_topics``, ``changed_brokers``, ``local_changes``), which is what publishers
use.  ``MetadataDelta.between(old, new)`` is the delta a snapshot load produces: every
topic and broker in either image counts as touched.

Replay rules (Kafka's): a ``PartitionChangeRecord`` bumps ``partition_epoch`` by one, and
``leader_epoch`` by one when the leader changes; its ``adding_replicas`` /
``removing_replicas`` (a pending reassignment) replace the partition's unless ``None``.  Records that contradict the image (a
partition of an unknown topic, a fence of an unknown broker) raise ``ReplayError`` and
leave the delta unchanged: they mean a controller bug, and every node sees the same log.

Thread-safety: none; a delta belongs to the thread that replays it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

from .image import BrokerInfo, MetadataImage, PartitionInfo, SchemaVersion, TopicImage, merged_map
from .records import (
    NO_CHANGE,
    NO_LEADER,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    SchemaRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from .schema_codec import schema_from_bytes
from .security_image import SECURITY_RECORDS, SecurityDelta

__all__ = ["LocalReplicaChanges", "MetadataDelta", "ReplayError"]


class ReplayError(ValueError):
    """A record that cannot apply to the image it is replayed on."""


@dataclass(slots=True)
class _TopicDelta:
    base: TopicImage
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    schemas: list[SchemaVersion] = field(default_factory=list)

    def partition(self, index: int) -> PartitionInfo | None:
        return self.partitions.get(index, self.base.partitions.get(index))

    def apply(self) -> TopicImage:
        if not self.partitions and not self.schemas:
            return self.base
        return replace(
            self.base,
            partitions=merged_map(self.base.partitions, self.partitions),
            schemas=self.base.schemas + tuple(self.schemas),
        )


@dataclass(frozen=True, slots=True)
class LocalReplicaChanges:
    """What a delta means for one broker's replicas, as ``(topic, partition, info)``."""

    leaders: list[tuple[str, int, PartitionInfo]]  # it leads these now (new or changed)
    followers: list[tuple[str, int, PartitionInfo]]  # it follows these now (new or changed)
    removed: list[tuple[str, int]]  # it no longer hosts these (topic deleted / reassigned)


class MetadataDelta:
    """Changes replayed on top of ``image`` (see the module docstring)."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, _TopicDelta] = {}
        self._removed: dict[str, TopicImage] = {}
        self._security = SecurityDelta(image.security)
        self._security_changed = False  # a snapshot load's verdict (between)
        self._snapshot: MetadataImage | None = None

    @classmethod
    def between(cls, old: MetadataImage, new: MetadataImage) -> "MetadataDelta":
        """The delta that takes ``old`` to ``new`` wholesale (a snapshot load)."""
        delta = cls(old)
        delta._snapshot = new
        delta._security_changed = new.security is not old.security
        delta._brokers = dict(new.brokers)
        delta._topics = {name: _TopicDelta(topic) for name, topic in new.topics.items()}
        delta._removed = {
            name: topic
            for name, topic in old.topics.items()
            if name not in new.topics or new.topics[name].topic_id != topic.topic_id
        }
        return delta

    # --- reading through the delta ---------------------------------------------------

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self._brokers.get(broker_id, self.image.brokers.get(broker_id))

    def topic(self, name: str) -> TopicImage | None:
        if name in self._topics:
            return self._topics[name].base
        if name in self._removed:
            return None
        return self.image.topics.get(name)

    # --- replay ------------------------------------------------------------------------

    def replay(self, record: MetadataRecord) -> None:
        """Fold one committed record into the delta; ``ReplayError`` if it cannot apply."""
        if self._snapshot is not None:
            raise ReplayError("a snapshot delta takes no further records")
        if isinstance(record, SECURITY_RECORDS):
            try:
                self._security.replay(record)
            except ValueError as exc:
                raise ReplayError(str(exc)) from None
            return
        match record:
            case RegisterBrokerRecord():
                self._brokers[record.broker_id] = BrokerInfo(
                    broker_id=record.broker_id,
                    incarnation=record.incarnation,
                    broker_epoch=record.broker_epoch,
                    address=record.address,
                    rack=record.rack,
                    fenced=record.fenced,
                )
            case FenceBrokerRecord() | UnfenceBrokerRecord():
                info = self.broker(record.broker_id)
                if info is None:
                    raise ReplayError(f"fencing change for unknown broker {record.broker_id}")
                if info.broker_epoch != record.broker_epoch:
                    return  # about an older registration: nothing to do
                fenced = isinstance(record, FenceBrokerRecord)
                self._brokers[record.broker_id] = replace(info, fenced=fenced)
            case TopicRecord():
                if self.topic(record.name) is not None:
                    raise ReplayError(f"topic {record.name!r} already exists")
                self._topics[record.name] = _TopicDelta(
                    TopicImage(
                        name=record.name,
                        topic_id=record.topic_id,
                        kind=record.kind,
                        key_columns=record.key_columns,
                        config=record.config,
                    )
                )
            case PartitionRecord():
                self._topic_delta(record.topic).partitions[record.partition] = PartitionInfo(
                    replicas=record.replicas,
                    isr=record.isr,
                    leader=record.leader,
                    leader_epoch=record.leader_epoch,
                    partition_epoch=record.partition_epoch,
                    adding_replicas=record.adding_replicas,
                    removing_replicas=record.removing_replicas,
                )
            case PartitionChangeRecord():
                self._replay_change(record)
            case RemoveTopicRecord():
                topic = self.topic(record.name)
                if topic is None or topic.topic_id != record.topic_id:
                    raise ReplayError(f"no topic {record.name!r} with id {record.topic_id}")
                self._topics.pop(record.name, None)
                if record.name in self.image.topics:
                    self._removed[record.name] = self.image.topics[record.name]
            case ConfigRecord():
                delta = self._topic_delta(record.topic)
                delta.base = replace(delta.base, config=record.config)
            case SchemaRecord():
                delta = self._topic_delta(record.topic)
                expected = delta.base.schema_id + len(delta.schemas) + 1
                if record.schema_id != expected:
                    raise ReplayError(
                        f"schema id {record.schema_id} of {record.topic!r} is not the next ({expected})"
                    )
                delta.schemas.append(
                    SchemaVersion(schema_id=record.schema_id, schema=schema_from_bytes(record.schema_bytes))
                )
            case NoOpRecord():
                pass
            case _:
                raise ReplayError(f"not a metadata record: {record!r}")

    def _topic_delta(self, name: str) -> _TopicDelta:
        if name not in self._topics:
            base = self.topic(name)
            if base is None:
                raise ReplayError(f"unknown topic {name!r}")
            self._topics[name] = _TopicDelta(base)
        return self._topics[name]

    def _replay_change(self, record: PartitionChangeRecord) -> None:
        delta = self._topic_delta(record.topic)
        current = delta.partition(record.partition)
        if current is None:
            raise ReplayError(f"unknown partition {record.topic}-{record.partition}")
        leader = current.leader
        leader_epoch = current.leader_epoch
        if record.leader != NO_CHANGE:
            new_leader = None if record.leader == NO_LEADER else record.leader
            if new_leader != leader:
                leader, leader_epoch = new_leader, leader_epoch + 1
        delta.partitions[record.partition] = PartitionInfo(
            replicas=record.replicas if record.replicas is not None else current.replicas,
            isr=record.isr if record.isr is not None else current.isr,
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=current.partition_epoch + 1,
            adding_replicas=record.adding_replicas if record.adding_replicas is not None else current.adding_replicas,
            removing_replicas=(
                record.removing_replicas if record.removing_replicas is not None else current.removing_replicas
            ),
        )

    # --- the result --------------------------------------------------------------------

    def apply(self, *, offset: int | None = None, epoch: int | None = None) -> MetadataImage:
        """The new image (untouched parts shared with the base image)."""
        if self._snapshot is not None:
            return self._snapshot
        brokers: Mapping[int, BrokerInfo] = self.image.brokers
        if self._brokers:
            brokers = merged_map(self.image.brokers, self._brokers)
        topics: Mapping[str, TopicImage] = self.image.topics
        if self._topics or self._removed:
            topics = merged_map(self.image.topics, {name: delta.apply() for name, delta in self._topics.items()},
                                removed=self._removed)
        return MetadataImage(
            brokers=brokers,
            topics=topics,
            security=self._security.apply(),
            offset=self.image.offset if offset is None else offset,
            epoch=self.image.epoch if epoch is None else epoch,
        )

    # --- what changed (for publishers) ---------------------------------------------------

    def changed_topics(self) -> set[str]:
        """Topics created or modified (not those only removed)."""
        return set(self._topics)

    def removed_topics(self) -> dict[str, TopicImage]:
        """Topics deleted, with their last image before the delta."""
        return dict(self._removed)

    def changed_brokers(self) -> set[int]:
        return set(self._brokers)

    def changed_security(self) -> bool:
        """Whether SCRAM users, ACLs or quotas changed."""
        return self._security_changed or self._security.changed

    def local_changes(self, broker_id: int, new_image: MetadataImage) -> LocalReplicaChanges:
        """Replica changes for ``broker_id`` between ``self.image`` and ``new_image`` (the
        result of ``apply``): partitions it now leads or follows whose state changed, and
        partitions it no longer hosts (as Kafka's ``TopicsDelta.localChanges``)."""
        leaders: list[tuple[str, int, PartitionInfo]] = []
        followers: list[tuple[str, int, PartitionInfo]] = []
        removed: list[tuple[str, int]] = []
        for name in sorted(set(self._topics) | set(self._removed)):
            old_topic = self.image.topics.get(name)
            new_topic = new_image.topics.get(name)
            if new_topic is not None and old_topic is not None and new_topic.topic_id != old_topic.topic_id:
                old_topic_parts: Mapping[int, PartitionInfo] = {}
                removed.extend((name, i) for i, p in sorted(old_topic.partitions.items()) if broker_id in p.replicas)
            else:
                old_topic_parts = old_topic.partitions if old_topic is not None else {}
            new_parts = new_topic.partitions if new_topic is not None else {}
            for index in sorted(set(old_topic_parts) | set(new_parts)):
                before = old_topic_parts.get(index)
                after = new_parts.get(index)
                hosted_before = before is not None and broker_id in before.replicas
                hosted_after = after is not None and broker_id in after.replicas
                if hosted_before and not hosted_after:
                    removed.append((name, index))
                elif after is not None and hosted_after and after != before:
                    target = leaders if after.leader == broker_id else followers
                    target.append((name, index, after))
        return LocalReplicaChanges(leaders=leaders, followers=followers, removed=removed)
