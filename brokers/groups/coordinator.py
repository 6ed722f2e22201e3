"""``GroupCoordinator``: the IO shell around the pure ``GroupShard``s of one broker.

Where state lives.  Group ``G`` belongs to partition ``partition_for(G, N)`` of the internal
topic ``__consumer_offsets`` (``N`` partitions, created on the first ``FindCoordinator``
with ``cleanup.policy=compact``, no time or size retention, replication factor
``min(offsets_topic_replication_factor, live brokers)``).  Its coordinator is that
partition's leader.  Everything a group is (members, epochs, assignments, committed
offsets) is a record in that partition (``records.py``); the in-memory ``GroupShard`` is a
cache of it.

Failover.  ``on_reconciled(image)`` (a ``PartitionManager`` reconcile listener) starts a
*load* for each internal partition this broker now leads (``loader.py``: wait until the
high watermark reaches the log end, then replay) and drops the shard of each one it no
longer leads (or leads in another leader epoch: reloaded).  Until a load finishes,
requests for its groups get ``CoordinatorLoadInProgressError``; for partitions it does not
lead, ``NotCoordinatorError``; clients find the coordinator again and retry.

A request.  Under the shard's lock: the core decides (``Outcome``: records + answer), the
records are appended as one frame with acks=all semantics (``Partition.append_as_leader``
in the leader epoch the shard was loaded in), and the core applies them.  Outside the
lock the caller waits until the high watermark passes everything appended so far, then
answers; so no client ever sees state that a failover could lose (a commit acknowledged
is on every in-sync replica).  Reads (offset fetch, describe, list) wait the same way.
If the partition refuses the append because leadership moved, the shard is dropped and
the caller gets ``NotCoordinatorError``.  A ticker thread expires sessions and
revocation timeouts every ``tick_ms``.

Thread-safety: all public methods may be called from any thread.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, TypeVar

from brokers.log.append import check_frames
from brokers.metadata.image import MetadataImage
from brokers.partition import Partition
from spark_log.clock import Clock, SystemClock
from spark_log.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedEpochError,
    NotCoordinatorError,
    NotLeaderError,
    RequestTimeoutError,
    SparkLogError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from .core import GroupShard, check_group_id
from .loader import load
from .messages import CommitOffsets, GroupListing, GroupView, Heartbeat, HeartbeatAnswer, Outcome
from .model import INTERNAL_TOPIC, CommittedOffset, GroupConfig, TopicPartition, TopicsView, is_internal, partition_for
from .records import Record, to_frame

__all__ = ["GroupCoordinator", "PartitionSource", "CreateTopic", "InternalTopicSpec", "Coordinates"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class PartitionSource(Protocol):
    """What the coordinator needs from the broker's ``PartitionManager``."""

    @property
    def image(self) -> MetadataImage: ...

    def get(self, topic: str, index: int, *, leader: bool = True) -> Partition: ...


CreateTopic = Callable[[str, int, int, Mapping[str, str]], None]
"""``create(name, partitions, replication_factor, config)`` through the controller."""


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


@dataclass(frozen=True, slots=True)
class Coordinates:
    """Where a group is coordinated."""

    broker_id: int
    address: str
    partition: int


@dataclass(eq=False)
class _Shard:
    index: int
    leader_epoch: int
    partition: Partition
    lock: threading.Lock = field(default_factory=threading.Lock)
    core: GroupShard | None = None  # None while loading
    written_end: int = 0            # log end after this shard's last append
    closed: bool = False


class GroupCoordinator:
    """The group coordinator of broker ``broker_id`` (module docstring)."""

    def __init__(self, *, broker_id: int, partitions: PartitionSource, create_topic: CreateTopic,
                 config: GroupConfig | None = None, topic: InternalTopicSpec | None = None,
                 clock: Clock | None = None, commit_timeout_ms: int = 10_000, tick_ms: int = 100,
                 load_wait_ms: int = 60_000) -> None:
        self.broker_id = broker_id
        self.config = config or GroupConfig()
        self.topic = topic or InternalTopicSpec()
        self._partitions = partitions
        self._create_topic = create_topic
        self._clock: Clock = clock or SystemClock()
        self._commit_timeout_ms = commit_timeout_ms
        self._tick_ms = tick_ms
        self._load_wait_ms = load_wait_ms
        self._lock = threading.Lock()
        self._shards: dict[int, _Shard] = {}
        self._creating = threading.Lock()
        self._topics_cache: tuple[int, TopicsView] = (-2, {})
        self._stopped = threading.Event()
        self._ticker: threading.Thread | None = None
        self._image: MetadataImage | None = None  # the last reconciled image (a failed load is retried from it)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._ticker = threading.Thread(target=self._tick_loop, name=f"group-ticker-{self.broker_id}", daemon=True)
        self._ticker.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._ticker is not None:
            self._ticker.join(timeout=10)
        with self._lock:
            shards, self._shards = list(self._shards.values()), {}
        for shard in shards:
            shard.closed = True

    # -- leadership of the internal partitions ----------------------------------------------

    def on_reconciled(self, image: MetadataImage) -> None:
        """Load the internal partitions this broker leads now, drop the others (cheap: loads
        run on their own threads)."""
        self._image = image
        topic = image.topics.get(INTERNAL_TOPIC)
        wanted: dict[int, int] = {}
        if topic is not None:
            wanted = {i: p.leader_epoch for i, p in topic.partitions.items() if p.leader == self.broker_id}
        starts: list[_Shard] = []
        with self._lock:
            if self._stopped.is_set():
                return
            for index, shard in list(self._shards.items()):
                if wanted.get(index) != shard.leader_epoch:
                    shard.closed = True
                    del self._shards[index]
                    log.info("broker %d no longer coordinates %s-%d (leader epoch %d)", self.broker_id,
                             INTERNAL_TOPIC, index, shard.leader_epoch)
            for index, epoch in wanted.items():
                if index in self._shards:
                    continue
                try:
                    partition = self._partitions.get(INTERNAL_TOPIC, index)
                except SparkLogError as exc:
                    log.warning("cannot open %s-%d to coordinate it: %s", INTERNAL_TOPIC, index, exc)
                    continue
                shard = _Shard(index=index, leader_epoch=epoch, partition=partition)
                self._shards[index] = shard
                starts.append(shard)
        for shard in starts:
            threading.Thread(target=self._load, args=(shard,), name=f"group-load-{shard.index}", daemon=True).start()

    def _load(self, shard: _Shard) -> None:
        name = f"{INTERNAL_TOPIC}-{shard.index}"
        core = GroupShard(config=self.config)
        try:
            end = load(shard.partition, leader_epoch=shard.leader_epoch, shard=core, now_ms=self._clock.monotonic_ms,
                       wait_ms=self._load_wait_ms, name=name)
        except SparkLogError as exc:
            log.warning("loading %s failed: %s", name, exc)
            self._drop(shard)
            return
        with shard.lock:
            if shard.closed:
                return
            shard.core, shard.written_end = core, end
        log.info("broker %d coordinates %s (leader epoch %d)", self.broker_id, name, shard.leader_epoch)

    def _drop(self, shard: _Shard) -> None:
        shard.closed = True
        with self._lock:
            if self._shards.get(shard.index) is shard:
                del self._shards[shard.index]

    def loaded_partitions(self) -> list[int]:
        """Internal partitions whose groups this broker serves now (tests, describe)."""
        with self._lock:
            return sorted(i for i, s in self._shards.items() if s.core is not None and not s.closed)

    def committed_offsets(self) -> dict[str, dict[TopicPartition, int]]:
        """The committed offsets of every group this broker coordinates now, as its loaded
        shards hold them (no wait for replication: metrics read it)."""
        with self._lock:
            shards = list(self._shards.values())
        out: dict[str, dict[TopicPartition, int]] = {}
        for shard in shards:
            with shard.lock:
                if shard.core is not None and not shard.closed:
                    out.update(shard.core.committed())
        return out

    # -- finding the coordinator -----------------------------------------------------------

    def find_coordinator(self, group_id: str) -> Coordinates:
        """The coordinator of ``group_id`` per this broker's image; creates the internal topic
        if it does not exist yet.  ``CoordinatorNotAvailableError`` until it has a leader."""
        check_group_id(group_id)
        image = self._partitions.image
        topic = image.topics.get(INTERNAL_TOPIC)
        if topic is None:
            self._ensure_topic(image)
            raise CoordinatorNotAvailableError(f"the group coordinator topic {INTERNAL_TOPIC} is being created")
        index = partition_for(group_id, len(topic.partitions))
        info = topic.partitions[index]
        address = image.broker_address(info.leader)
        if info.leader is None or address is None:
            raise CoordinatorNotAvailableError(f"{INTERNAL_TOPIC}-{index} (group {group_id!r}) has no leader right now")
        return Coordinates(info.leader, address, index)

    def _ensure_topic(self, image: MetadataImage) -> None:
        if not self._creating.acquire(blocking=False):
            return  # another request is creating it
        try:
            live = len(image.live_brokers())
            rf = max(1, min(self.topic.replication_factor, live))
            log.info("creating %s (%d partitions, replication factor %d)", INTERNAL_TOPIC, self.topic.partitions, rf)
            self._create_topic(INTERNAL_TOPIC, self.topic.partitions, rf, self.topic.config())
        except TopicAlreadyExistsError:
            pass
        except SparkLogError as exc:
            log.warning("creating %s failed (asked again at the next FindCoordinator): %s", INTERNAL_TOPIC, exc)
        finally:
            self._creating.release()

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

    def delete_group(self, group_id: str) -> None:
        self._decide(group_id, lambda core, now: core.delete_group(group_id))

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> None:
        self._decide(group_id, lambda core, now: core.delete_offsets(group_id, partitions))

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None) -> dict[TopicPartition, CommittedOffset]:
        return self._read(group_id, lambda core: core.fetch_offsets(group_id, partitions))

    def describe_group(self, group_id: str) -> GroupView:
        return self._read(group_id, lambda core: core.describe(group_id))

    def list_groups(self) -> list[GroupListing]:
        """Groups of every internal partition this broker coordinates (loaded ones)."""
        out: list[GroupListing] = []
        with self._lock:
            shards = list(self._shards.values())
        for shard in shards:
            with shard.lock:
                if shard.core is None or shard.closed:
                    continue
                listed = shard.core.list_groups()
                end = shard.written_end
            self._wait_durable(shard, end)
            out.extend(listed)
        return sorted(out, key=lambda g: g.group_id)

    # -- the shell's one path --------------------------------------------------------------

    def _shard(self, group_id: str) -> _Shard:
        check_group_id(group_id)
        topic = self._partitions.image.topics.get(INTERNAL_TOPIC)
        if topic is None:
            raise CoordinatorNotAvailableError(f"the group coordinator topic {INTERNAL_TOPIC} does not exist yet")
        index = partition_for(group_id, len(topic.partitions))
        with self._lock:
            shard = self._shards.get(index)
        if shard is None or shard.closed:
            raise NotCoordinatorError(f"broker {self.broker_id} does not coordinate group {group_id!r} "
                                      f"({INTERNAL_TOPIC}-{index})")
        if shard.core is None:
            raise CoordinatorLoadInProgressError(f"broker {self.broker_id} is loading the groups of "
                                                 f"{INTERNAL_TOPIC}-{index}")
        return shard

    def _decide(self, group_id: str, decide: Callable[[GroupShard, int], Outcome[T]]) -> T:
        shard = self._shard(group_id)
        with shard.lock:
            core = shard.core
            if core is None or shard.closed:
                raise NotCoordinatorError(f"broker {self.broker_id} stopped coordinating group {group_id!r}")
            now = self._clock.monotonic_ms()
            outcome = decide(core, now)
            if outcome.records:
                self._append(shard, outcome.records)
            core.finish(outcome, now)
            end = shard.written_end
        self._wait_durable(shard, end)
        return outcome.answer

    def _read(self, group_id: str, read: Callable[[GroupShard], T]) -> T:
        shard = self._shard(group_id)
        with shard.lock:
            if shard.core is None or shard.closed:
                raise NotCoordinatorError(f"broker {self.broker_id} stopped coordinating group {group_id!r}")
            answer = read(shard.core)
            end = shard.written_end
        self._wait_durable(shard, end)
        return answer

    def _append(self, shard: _Shard, records: tuple[Record, ...]) -> None:
        """Append ``records`` as one frame (caller holds the shard's lock)."""
        data = to_frame(records, timestamp_ms=self._clock.wall_ms())
        frames = check_frames(data, max_message_bytes=shard.partition.config.max_message_bytes, topic=INTERNAL_TOPIC)
        try:
            appended = shard.partition.append_as_leader(frames, required_leader_epoch=shard.leader_epoch, acks_all=True)
        except (NotLeaderError, FencedEpochError, UnknownTopicOrPartitionError) as exc:
            self._drop(shard)
            raise NotCoordinatorError(f"broker {self.broker_id} no longer leads {INTERNAL_TOPIC}-{shard.index}: {exc}"
                                      ) from None
        shard.written_end = appended.last_offset + 1

    def _wait_durable(self, shard: _Shard, end: int) -> None:
        """Until the high watermark reaches ``end`` (everything appended before the answer)."""
        if end <= 0:
            return
        try:
            done = shard.partition.wait_for_high_watermark(end - 1, self._commit_timeout_ms,
                                                          leader_epoch=shard.leader_epoch)
        except (NotLeaderError, UnknownTopicOrPartitionError) as exc:
            self._drop(shard)
            raise NotCoordinatorError(f"{INTERNAL_TOPIC}-{shard.index} lost its leader before the write was "
                                      f"replicated: {exc}") from None
        if not done:
            raise RequestTimeoutError(f"{INTERNAL_TOPIC}-{shard.index} was not replicated within "
                                      f"{self._commit_timeout_ms} ms")

    def _topics(self) -> TopicsView:
        image = self._partitions.image
        offset, view = self._topics_cache
        if offset != image.offset:
            view = {name: (t.topic_id, len(t.partitions)) for name, t in image.topics.items() if not is_internal(name)}
            self._topics_cache = (image.offset, view)
        return view

    # -- sessions ---------------------------------------------------------------------------

    def _tick_loop(self) -> None:
        rounds = 0
        while not self._stopped.wait(self._tick_ms / 1000):
            rounds += 1
            image = self._image
            if image is not None and rounds % max(1, 1000 // self._tick_ms) == 0:
                self.on_reconciled(image)  # about once a second: retry loads that failed
            with self._lock:
                shards = list(self._shards.values())
            for shard in shards:
                try:
                    self._tick(shard)
                except SparkLogError as exc:
                    log.warning("expiring sessions of %s-%d: %s", INTERNAL_TOPIC, shard.index, exc)
                except Exception:  # noqa: BLE001 - keep the ticker alive
                    log.exception("expiring sessions of %s-%d", INTERNAL_TOPIC, shard.index)

    def _tick(self, shard: _Shard) -> None:
        with shard.lock:
            core = shard.core
            if core is None or shard.closed:
                return
            now = self._clock.monotonic_ms()
            outcome = core.tick(now)
            if outcome.records:
                for record in outcome.records:
                    log.info("group %s: members expired (session or rebalance timeout)", record.group_id)
                self._append(shard, outcome.records)
            core.finish(outcome, now)
