"""``GroupCoordinator``: the group coordinator of one broker, on the shell every
internal-topic coordinator shares (``brokers.coordination.sharded``: loads on leadership,
one acks=all append per decision, answers only once durable).

Group ``G`` belongs to partition ``partition_for(G, N)`` of ``__consumer_offsets`` (created
on the first ``FindCoordinator`` with ``cleanup.policy=compact``, no time or size retention,
replication factor ``min(offsets_topic_replication_factor, live brokers)``).  Everything a
group is (members, epochs, assignments, committed offsets) is a record in that partition
(``records.py``); the in-memory ``GroupShard`` is a cache of it (``loader.py`` replays it).
The shell's ticker expires sessions and revocation timeouts every ``tick_ms``, and when
this broker's view of the topics changed (or a shard was loaded), tombstones the committed
offsets of partitions that are gone (``GroupShard.drop_stale_offsets``: deleted topics,
re-created ones by their new topic id); until then reads leave those offsets out.

Thread-safety: all public methods may be called from any thread.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from brokers.coordination.sharded import Coordinates, CreateTopic, PartitionSource, Shard, ShardedCoordinator
from brokers.partition import Partition
from spark_log.clock import Clock
from spark_log.errors import NotCoordinatorError

from .core import GroupShard, check_group_id
from .loader import load
from .messages import CommitOffsets, GroupListing, GroupView, Heartbeat, HeartbeatAnswer, Outcome
from .model import INTERNAL_TOPIC, CommittedOffset, GroupConfig, TopicPartition, TopicsView, is_internal
from .records import to_frame

__all__ = ["GroupCoordinator", "PartitionSource", "CreateTopic", "InternalTopicSpec", "Coordinates"]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class InternalTopicSpec:
    """How the internal topic is created (``BrokerConfig.offsets_topic_*``)."""

    partitions: int = 8
    replication_factor: int = 3
    segment_bytes: int = 100 * 1024 * 1024

    def config(self) -> dict[str, str]:
        # compacted: the latest record per key is the state; nothing expires by time or size
        return {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
                "segment.bytes": str(self.segment_bytes)}


class GroupCoordinator(ShardedCoordinator[GroupShard]):
    """The group coordinator of broker ``broker_id`` (module docstring)."""

    topic_name = INTERNAL_TOPIC
    topic_label = "group coordinator topic"
    kind = "group"
    tick_label = "expiring sessions"

    def __init__(self, *, broker_id: int, partitions: PartitionSource, create_topic: CreateTopic,
                 config: GroupConfig | None = None, topic: InternalTopicSpec | None = None,
                 clock: Clock | None = None, commit_timeout_ms: int = 10_000, tick_ms: int = 100,
                 load_wait_ms: int = 60_000) -> None:
        super().__init__(broker_id=broker_id, partitions=partitions, create_topic=create_topic, clock=clock,
                         commit_timeout_ms=commit_timeout_ms, tick_ms=tick_ms, load_wait_ms=load_wait_ms)
        self.config = config or GroupConfig()
        self.topic = topic or InternalTopicSpec()
        self._topics_cache: tuple[int, TopicsView] = (-2, {})
        self._swept: dict[int, tuple[GroupShard, TopicsView]] = {}  # shard index -> the core and view swept

    # -- the shell's hooks -----------------------------------------------------------------

    def _check_key(self, key: str) -> None:
        check_group_id(key)

    def _key_label(self, key: str) -> str:
        return f"group {key!r}"

    def _topic_spec(self, live_brokers: int) -> tuple[int, int, dict[str, str]]:
        return self.topic.partitions, max(1, min(self.topic.replication_factor, live_brokers)), self.topic.config()

    def _replay(self, partition: Partition, leader_epoch: int, name: str) -> tuple[GroupShard, int]:
        core = GroupShard(config=self.config)
        end = load(partition, leader_epoch=leader_epoch, shard=core, now_ms=self._clock.monotonic_ms,
                   wait_ms=self._load_wait_ms, name=name)
        return core, end

    def _to_frame(self, records: Sequence[Any], timestamp_ms: int) -> bytes:
        return to_frame(tuple(records), timestamp_ms=timestamp_ms)

    def _on_tick(self, shard: Shard[GroupShard]) -> None:
        """Sessions and revocation timeouts expire, offsets of gone partitions are dropped
        (appended; nobody waits for the answer)."""
        with shard.lock:
            core = shard.core
            if core is None or shard.closed:
                return
            self._drop_stale_offsets(shard, core)
            now = self._clock.monotonic_ms()
            outcome = core.tick(now)
            for record in outcome.records:
                log.info("group %s: members expired (session or rebalance timeout)", record.group_id)
            if outcome.records:
                self._append(shard, outcome.records)
            core.finish(outcome, now)

    def _drop_stale_offsets(self, shard: Shard[GroupShard], core: GroupShard) -> None:
        """Tombstone the offsets of partitions gone from the topics (caller holds the shard's
        lock) once per change of the view, and once after every load: the view a new
        coordinator loads with is at least as new as any its predecessors committed under
        (its leadership comes later in the metadata log), so a topic missing from it was
        deleted."""
        topics = self._topics()
        swept = self._swept.get(shard.index)
        if swept is not None and swept[0] is core and swept[1] == topics:
            return
        outcome = core.drop_stale_offsets(topics)
        if outcome.records:
            log.info("%s-%d: dropping %d committed offset(s) of deleted or re-created topics", self.topic_name,
                     shard.index, len(outcome.records))
            self._append(shard, outcome.records)
        core.finish(outcome, self._clock.monotonic_ms())
        self._swept[shard.index] = (core, topics)

    # -- reads for metrics -----------------------------------------------------------------

    def committed_offsets(self) -> dict[str, dict[TopicPartition, int]]:
        """The committed offsets of every group this broker coordinates now, as its loaded
        shards hold them (no wait for replication: metrics read it)."""
        out: dict[str, dict[TopicPartition, int]] = {}
        for shard in self._loaded():
            with shard.lock:
                if shard.core is not None and not shard.closed:
                    out.update(shard.core.committed())
        return out

    # -- requests --------------------------------------------------------------------------

    def heartbeat(self, hb: Heartbeat) -> HeartbeatAnswer:
        return self._decide(hb.group_id, lambda core, now: core.heartbeat(hb, now, self._topics()))

    def commit_offsets(self, request: CommitOffsets) -> None:
        wall = self._clock.wall_ms()
        self._decide(request.group_id, lambda core, now: core.commit_offsets(request, wall_ms=wall, topics=self._topics()))

    def validate_commit(self, request: CommitOffsets) -> None:
        """Raise what ``commit_offsets`` would refuse ``request`` with; write nothing (the
        core is pure: its outcome is dropped)."""
        wall = self._clock.wall_ms()
        self._read(request.group_id, lambda core: core.commit_offsets(request, wall_ms=wall, topics=self._topics()))

    def hold_offsets(self, request: CommitOffsets, until_ms: int) -> None:
        """A transaction's AddOffsets (``GroupShard.hold_offsets``): checked, then held (durable)."""
        wall = self._clock.wall_ms()
        self._decide(request.group_id, lambda core, now: core.hold_offsets(request, until_ms, wall_ms=wall,
                                                                           topics=self._topics()))

    def release_offsets(self, group_id: str, transactional_id: str) -> None:
        self._decide(group_id, lambda core, now: core.release_offsets(group_id, transactional_id))

    def delete_group(self, group_id: str) -> None:
        self._decide(group_id, lambda core, now: core.delete_group(group_id))

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> None:
        self._decide(group_id, lambda core, now: core.delete_offsets(group_id, partitions))

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None, *,
                      require_stable: bool = False) -> dict[TopicPartition, CommittedOffset]:
        wall = self._clock.wall_ms()
        return self._read(group_id, lambda core: core.fetch_offsets(group_id, partitions, self._topics(),
                                                                    require_stable=require_stable, wall_ms=wall))

    def describe_group(self, group_id: str) -> GroupView:
        return self._read(group_id, lambda core: core.describe(group_id, self._topics()))

    def list_groups(self) -> list[GroupListing]:
        """Groups of every internal partition this broker coordinates (loaded ones)."""
        out: list[GroupListing] = []
        for shard in self._loaded():
            try:
                out.extend(self._locked(shard, lambda core: core.list_groups()))
            except NotCoordinatorError:
                continue  # it moved since: its groups are listed by their new coordinator
        return sorted(out, key=lambda g: g.group_id)

    def _decide(self, group_id: str, decide: Callable[[GroupShard, int], Outcome[T]]) -> T:
        shard = self._shard(group_id)

        def act(core: GroupShard) -> T:
            now = self._clock.monotonic_ms()
            outcome = decide(core, now)
            if outcome.records:
                self._append(shard, outcome.records)
            core.finish(outcome, now)
            return outcome.answer
        return self._locked(shard, act)

    def _topics(self) -> TopicsView:
        image = self._partitions.image
        offset, view = self._topics_cache
        if offset != image.offset:
            view = {name: (t.topic_id, len(t.partitions)) for name, t in image.topics.items() if not is_internal(name)}
            self._topics_cache = (image.offset, view)
        return view
