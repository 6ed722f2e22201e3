"""The metadata image: an immutable view of the cluster as of one metadata-log offset.

``MetadataImage`` and everything inside it are frozen; mappings are read-only
``MappingProxyType`` views over dicts that nobody mutates after construction.  A new
image is built by ``MetadataDelta(image).replay(...)...apply()``, which reuses every
sub-image that did not change (so ``new.topics["a"] is old.topics["a"]`` when topic
``a`` was untouched), as Kafka's ``MetadataImage``.

Images are safe to share between threads without locks.  ``offset``/``epoch`` say
which metadata-log entry the image reflects (-1 for ``EMPTY``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Iterator, Mapping, TypeVar

import pyarrow as pa

from spark_log.config import TopicConfig

from .security_image import EMPTY_SECURITY, SecurityImage

K = TypeVar("K")
V = TypeVar("V")

__all__ = [
    "BrokerInfo",
    "PartitionInfo",
    "SchemaVersion",
    "TopicImage",
    "MetadataImage",
    "EMPTY",
    "frozen_map",
    "merged_map",
]


def frozen_map(values: Mapping | None = None) -> Mapping:  # type: ignore[type-arg]
    """A read-only mapping over a private copy of ``values``."""
    return MappingProxyType(dict(values or {}))


def merged_map(base: Mapping[K, V], changes: Mapping[K, V], removed: Iterable[K] = ()) -> Mapping[K, V]:
    """A read-only mapping of ``base`` (whose keys are in ascending order) with ``changes``
    set and ``removed`` dropped, its keys in ascending order too.

    A metadata entry usually changes a few values of a large map (one partition's ISR among
    thousands), so this costs one copy of ``base`` at C speed: changed keys keep their
    place, and new keys are appended, with a sort only when one falls before a key already
    there (partitions and brokers are created in ascending order).  Sorting on every entry
    made replaying a topic's thousands of partition records quadratic in its partitions."""
    values: dict[K, V] = base.copy() if isinstance(base, (dict, MappingProxyType)) else dict(base)
    for key in removed:
        values.pop(key, None)
    last = next(reversed(values), None) if values else None
    ordered = True
    for key, value in changes.items():
        if key not in values:
            if last is not None and not key > last:  # type: ignore[operator]
                ordered = False
            last = key
        values[key] = value
    if not ordered:
        values = dict(sorted(values.items()))
    return MappingProxyType(values)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerInfo:
    """A registered broker.  ``fenced`` brokers lead nothing and get no new replicas."""

    broker_id: int
    incarnation: str
    broker_epoch: int
    address: str  # "host:port" of the broker's gRPC server
    rack: str = ""
    fenced: bool = False

    @property
    def host(self) -> str:
        return self.address.rpartition(":")[0]

    @property
    def placement_domain(self) -> str:
        """What replica placement spreads across: the rack if set, else the host."""
        return self.rack or self.host


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionInfo:
    """Replica assignment and leadership of one partition (``leader`` None: offline).

    A pending reassignment (KIP-455) shows as non-empty ``adding_replicas`` /
    ``removing_replicas``; ``replicas`` then holds the target followed by the original
    replicas being removed (``target`` gives the target alone)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int | None
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target(self) -> tuple[int, ...]:
        """The replica set once any pending reassignment completes, in its order."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def original(self) -> tuple[int, ...]:
        """The replica set before any pending reassignment (what a cancel restores)."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaVersion:
    schema_id: int
    schema: pa.Schema


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicImage:
    """A topic: partitions by index, resolved config, schema history (oldest first)."""

    name: str
    topic_id: str
    kind: str = "bytes"  # "bytes" | "typed"
    key_columns: tuple[str, ...] = ()
    config: TopicConfig = field(default_factory=TopicConfig)
    partitions: Mapping[int, PartitionInfo] = field(default_factory=frozen_map)
    schemas: tuple[SchemaVersion, ...] = ()

    @property
    def schema(self) -> pa.Schema | None:
        """The latest schema (None only transiently, before its SchemaRecord)."""
        return self.schemas[-1].schema if self.schemas else None

    @property
    def schema_id(self) -> int:
        """Id of the latest schema; -1 when there is none."""
        return self.schemas[-1].schema_id if self.schemas else -1

    def schema_by_id(self, schema_id: int) -> pa.Schema | None:
        for version in self.schemas:
            if version.schema_id == schema_id:
                return version.schema
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataImage:
    """The whole cluster metadata as of metadata-log entry ``offset`` in ``epoch``."""

    brokers: Mapping[int, BrokerInfo] = field(default_factory=frozen_map)
    topics: Mapping[str, TopicImage] = field(default_factory=frozen_map)
    security: SecurityImage = EMPTY_SECURITY  # SCRAM users, ACLs, client quotas
    offset: int = -1
    epoch: int = -1

    # --- brokers ---------------------------------------------------------------------

    def live_brokers(self) -> list[BrokerInfo]:
        """Registered, unfenced brokers, by id."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def broker_address(self, broker_id: int | None) -> str | None:
        info = self.brokers.get(broker_id) if broker_id is not None else None
        return info.address if info is not None else None

    # --- topics and partitions -------------------------------------------------------

    def topic_by_id(self, topic_id: str) -> TopicImage | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        image = self.topics.get(topic)
        return image.partitions.get(partition) if image is not None else None

    def iter_partitions(self) -> Iterator[tuple[str, int, PartitionInfo]]:
        """Every partition as ``(topic, partition, info)``, by topic name then index."""
        for name in sorted(self.topics):
            topic = self.topics[name]
            for index in sorted(topic.partitions):
                yield name, index, topic.partitions[index]

    def leader_address(self, topic: str, partition: int) -> str | None:
        info = self.partition(topic, partition)
        return self.broker_address(info.leader) if info is not None else None

    def partitions_led_by(self, broker_id: int) -> list[tuple[str, int, PartitionInfo]]:
        return [p for p in self.iter_partitions() if p[2].leader == broker_id]

    def replicas_of(self, broker_id: int) -> list[tuple[str, int, PartitionInfo]]:
        """Partitions with a replica on ``broker_id`` (leader or follower)."""
        return [p for p in self.iter_partitions() if broker_id in p[2].replicas]

    def replica_counts(self) -> tuple[dict[int, int], dict[int, int]]:
        """``(replicas per broker, leaders per broker)`` over all partitions."""
        replicas: dict[int, int] = {}
        leaders: dict[int, int] = {}
        for _, _, info in self.iter_partitions():
            for broker in info.replicas:
                replicas[broker] = replicas.get(broker, 0) + 1
            if info.leader is not None:
                leaders[info.leader] = leaders.get(info.leader, 0) + 1
        return replicas, leaders


EMPTY = MetadataImage()
MetadataImage.EMPTY = EMPTY  # type: ignore[attr-defined]
