"""``ShardedCoordinator``: the IO shell of a coordinator whose state is the records of a
compacted internal topic, one pure *core* per partition of it (a shard).

Where state lives.  Key ``K`` (a group id, a transactional id) belongs to partition
``crc32(K) % N`` of the internal topic (``N`` partitions, created on the first
``FindCoordinator``); its coordinator is that partition's leader.  Everything the
coordinator knows is a record in that partition; the in-memory core is a cache of it.

Failover.  ``on_reconciled(image)`` (a ``PartitionManager`` reconcile listener) starts a
*load* for each internal partition this broker now leads (wait until the high watermark
reaches the log end, then replay it into a new core) and drops the shard of each one it no
longer leads (or leads in another leader epoch: reloaded).  Until a load finishes, requests
for its keys get ``CoordinatorLoadInProgressError``; for partitions it does not lead,
``NotCoordinatorError``; clients find the coordinator again and retry.

A request (``_locked``).  Under the shard's lock the core decides, its records are appended
as one frame with acks=all semantics (``Partition.append_as_leader`` in the leader epoch the
shard was loaded in: ``_append``) and the core applies them.  Outside the lock the caller
waits until the high watermark passes everything appended so far (``_wait_durable``), then
answers: no client ever sees state a failover could lose.  Reads wait the same way.  If the
partition refuses the append because leadership moved, the shard is dropped and the caller
gets ``NotCoordinatorError``.  A background thread calls ``_on_tick(shard)`` for every
loaded shard every ``tick_ms`` (or when ``_wake`` is set) and retries failed loads about
once a second; with no shard loaded it wakes only for those retries.

A subclass names its topic and keys and supplies ``_check_key``, ``_topic_spec``,
``_replay`` (a new core and the offset replayed to), ``_to_frame`` and ``_on_tick``.

Thread-safety: all public methods may be called from any thread.
"""
from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Mapping, Protocol, Sequence, TypeVar

from brokers.log.append import check_frames
from brokers.metadata.image import MetadataImage
from brokers.partition import Partition
from brokers.coordination.keys import partition_for
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

__all__ = ["ShardedCoordinator", "Shard", "Coordinates", "PartitionSource", "CreateTopic"]

log = logging.getLogger(__name__)
_RETRY_S = 1.0  # failed shard loads are retried about this often

C = TypeVar("C")
T = TypeVar("T")


class PartitionSource(Protocol):
    """What a coordinator needs from the broker's ``PartitionManager``."""

    @property
    def image(self) -> MetadataImage: ...

    def get(self, topic: str, index: int, *, leader: bool = True) -> Partition: ...


CreateTopic = Callable[[str, int, int, Mapping[str, str]], None]
"""``create(name, partitions, replication_factor, config)`` through the controller."""


@dataclass(frozen=True, slots=True)
class Coordinates:
    """Where a key is coordinated."""

    broker_id: int
    address: str
    partition: int


@dataclass(eq=False)
class Shard(Generic[C]):
    """One led partition of the internal topic and its core (None while loading)."""

    index: int
    leader_epoch: int
    partition: Partition
    lock: threading.Lock = field(default_factory=threading.Lock)
    core: C | None = None
    written_end: int = 0  # log end after this shard's last append
    closed: bool = False


class ShardedCoordinator(ABC, Generic[C]):
    """The shell of the module docstring; ``C`` is the core type."""

    topic_name: str = ""       # the internal topic
    topic_label: str = ""      # e.g. "group coordinator topic", for errors
    kind: str = ""             # thread names and logs: "group", "txn"
    tick_label: str = ""       # logs: what a tick does

    def __init__(self, *, broker_id: int, partitions: PartitionSource, create_topic: CreateTopic,
                 clock: Clock | None, commit_timeout_ms: int, tick_ms: int, load_wait_ms: int) -> None:
        self.broker_id = broker_id
        self._partitions = partitions
        self._create_topic = create_topic
        self._clock: Clock = clock or SystemClock()
        self._commit_timeout_ms = commit_timeout_ms
        self._tick_ms = tick_ms
        self._load_wait_ms = load_wait_ms
        self._lock = threading.Lock()
        self._shards: dict[int, Shard[C]] = {}
        self._creating = threading.Lock()
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._image: MetadataImage | None = None  # the last reconciled image (a failed load is retried from it)

    # -- what a subclass supplies ------------------------------------------------------------

    @abstractmethod
    def _check_key(self, key: str) -> None:
        """Raise ``InvalidRequestError`` (or a subtype) for a bad key."""

    def _key_label(self, key: str) -> str:
        """How errors name ``key`` (e.g. ``group 'g'``)."""
        return repr(key)

    @abstractmethod
    def _topic_spec(self, live_brokers: int) -> tuple[int, int, dict[str, str]]:
        """``(partitions, replication factor, config)`` of the internal topic to create."""

    @abstractmethod
    def _replay(self, partition: Partition, leader_epoch: int, name: str) -> tuple[C, int]:
        """A new core replayed from ``partition``, and the log end replayed to."""

    @abstractmethod
    def _to_frame(self, records: Sequence[Any], timestamp_ms: int) -> bytes:
        """``records`` as one frame of the internal topic."""

    def _on_tick(self, shard: Shard[C]) -> None:
        """Periodic work on a shard (expiry, completion); may raise ``SparkLogError``."""

    def _on_loaded(self, shard: Shard[C]) -> None:
        """A shard finished loading."""

    def _on_dropped(self) -> None:
        """A shard was dropped (leadership moved, a load failed)."""

    def _on_stop(self) -> None:
        """``stop`` after the shards are closed: close what the subclass owns."""

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"{self.kind}-ticker-{self.broker_id}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            shards, self._shards = list(self._shards.values()), {}
        for shard in shards:
            shard.closed = True
        self._on_stop()

    # -- leadership of the internal partitions ----------------------------------------------

    def on_reconciled(self, image: MetadataImage) -> None:
        """Load the internal partitions this broker leads now, drop the others (cheap: loads
        run on their own threads)."""
        self._image = image
        topic = image.topics.get(self.topic_name)
        wanted: dict[int, int] = {}
        if topic is not None:
            wanted = {i: p.leader_epoch for i, p in topic.partitions.items() if p.leader == self.broker_id}
        starts: list[Shard[C]] = []
        with self._lock:
            if self._stopped.is_set():
                return
            for index, shard in list(self._shards.items()):
                if wanted.get(index) != shard.leader_epoch:
                    shard.closed = True
                    del self._shards[index]
                    log.info("broker %d no longer coordinates %s-%d (leader epoch %d)", self.broker_id,
                             self.topic_name, index, shard.leader_epoch)
            for index, epoch in wanted.items():
                if index in self._shards:
                    continue
                try:
                    partition = self._partitions.get(self.topic_name, index)
                except SparkLogError as exc:
                    log.warning("cannot open %s-%d to coordinate it: %s", self.topic_name, index, exc)
                    continue
                started: Shard[C] = Shard(index=index, leader_epoch=epoch, partition=partition)
                self._shards[index] = started
                starts.append(started)
        for shard in starts:
            threading.Thread(target=self._load, args=(shard,), name=f"{self.kind}-load-{shard.index}",
                             daemon=True).start()
        if starts:
            self._wake.set()  # the ticker may be waiting a whole retry period with no shard

    def _load(self, shard: Shard[C]) -> None:
        name = f"{self.topic_name}-{shard.index}"
        try:
            core, end = self._replay(shard.partition, shard.leader_epoch, name)
        except SparkLogError as exc:
            log.warning("loading %s failed: %s", name, exc)
            self._drop(shard)
            return
        with shard.lock:
            if shard.closed:
                return
            shard.core, shard.written_end = core, end
        log.info("broker %d coordinates %s (leader epoch %d)", self.broker_id, name, shard.leader_epoch)
        self._on_loaded(shard)

    def _drop(self, shard: Shard[C]) -> None:
        shard.closed = True
        with self._lock:
            if self._shards.get(shard.index) is shard:
                del self._shards[shard.index]
        self._on_dropped()

    def loaded_partitions(self) -> list[int]:
        """Internal partitions whose keys this broker serves now (tests, describe)."""
        return sorted(shard.index for shard in self._loaded())

    def _loaded(self) -> list[Shard[C]]:
        with self._lock:
            return [s for s in self._shards.values() if s.core is not None and not s.closed]

    # -- finding the coordinator -----------------------------------------------------------

    def find_coordinator(self, key: str) -> Coordinates:
        """The coordinator of ``key`` per this broker's image; creates the internal topic if
        it does not exist yet.  ``CoordinatorNotAvailableError`` until it has a leader."""
        self._check_key(key)
        image = self._partitions.image
        topic = image.topics.get(self.topic_name)
        if topic is None:
            self._ensure_topic(image)
            raise CoordinatorNotAvailableError(f"the {self.topic_label} {self.topic_name} is being created")
        index = partition_for(key, len(topic.partitions))
        info = topic.partitions[index]
        address = image.broker_address(info.leader)
        if info.leader is None or address is None:
            raise CoordinatorNotAvailableError(f"{self.topic_name}-{index} ({self._key_label(key)}) has no leader "
                                               "right now")
        return Coordinates(info.leader, address, index)

    def _ensure_topic(self, image: MetadataImage) -> None:
        if not self._creating.acquire(blocking=False):
            return  # another request is creating it
        try:
            partitions, rf, config = self._topic_spec(len(image.live_brokers()))
            log.info("creating %s (%d partitions, replication factor %d)", self.topic_name, partitions, rf)
            self._create_topic(self.topic_name, partitions, rf, config)
        except TopicAlreadyExistsError:
            pass
        except SparkLogError as exc:
            log.warning("creating %s failed (asked again at the next FindCoordinator): %s", self.topic_name, exc)
        finally:
            self._creating.release()

    # -- the one path ----------------------------------------------------------------------

    def _shard(self, key: str) -> Shard[C]:
        """The loaded shard of ``key``, or the error that sends the client elsewhere."""
        self._check_key(key)
        topic = self._partitions.image.topics.get(self.topic_name)
        if topic is None:
            raise CoordinatorNotAvailableError(f"the {self.topic_label} {self.topic_name} does not exist yet")
        index = partition_for(key, len(topic.partitions))
        with self._lock:
            shard = self._shards.get(index)
        if shard is None or shard.closed:
            raise NotCoordinatorError(f"broker {self.broker_id} does not coordinate {self._key_label(key)} "
                                      f"({self.topic_name}-{index})")
        if shard.core is None:
            raise CoordinatorLoadInProgressError(f"broker {self.broker_id} is loading {self.topic_name}-{index}")
        return shard

    def _locked(self, shard: Shard[C], act: Callable[[C], T]) -> T:
        """``act(core)`` under the shard's lock (it may ``_append``), then the wait until
        everything appended so far is durable; the answer after that."""
        with shard.lock:
            core = shard.core
            if core is None or shard.closed:
                raise NotCoordinatorError(f"broker {self.broker_id} stopped coordinating {self.topic_name}-"
                                          f"{shard.index}")
            answer = act(core)
            end = shard.written_end
        self._wait_durable(shard, end)
        return answer

    def _read(self, key: str, read: Callable[[C], T]) -> T:
        return self._locked(self._shard(key), read)

    def _append(self, shard: Shard[C], records: Sequence[Any]) -> None:
        """Append ``records`` as one frame (caller holds the shard's lock)."""
        data = self._to_frame(records, self._clock.wall_ms())
        frames = check_frames(data, max_message_bytes=max(len(data), shard.partition.config.max_message_bytes),
                              topic=self.topic_name)
        try:
            appended = shard.partition.append_as_leader(frames, required_leader_epoch=shard.leader_epoch,
                                                        acks_all=True)
        except (NotLeaderError, FencedEpochError, UnknownTopicOrPartitionError) as exc:
            self._drop(shard)
            raise NotCoordinatorError(f"broker {self.broker_id} no longer leads {self.topic_name}-{shard.index}: "
                                      f"{exc}") from None
        shard.written_end = appended.last_offset + 1

    def _wait_durable(self, shard: Shard[C], end: int) -> None:
        """Until the high watermark reaches ``end`` (everything appended before the answer)."""
        if end <= 0:
            return
        try:
            done = shard.partition.wait_for_high_watermark(end - 1, self._commit_timeout_ms,
                                                          leader_epoch=shard.leader_epoch)
        except (NotLeaderError, UnknownTopicOrPartitionError) as exc:
            self._drop(shard)
            raise NotCoordinatorError(f"{self.topic_name}-{shard.index} lost its leader before the write was "
                                      f"replicated: {exc}") from None
        if not done:
            raise RequestTimeoutError(f"{self.topic_name}-{shard.index} was not replicated within "
                                      f"{self._commit_timeout_ms} ms")

    # -- the background thread -------------------------------------------------------------

    def _loop(self) -> None:
        retried = time.monotonic()
        shards: list[Shard[C]] = []
        while not self._stopped.is_set():
            # no shard to tick: wake only to retry loads (once a second), or when one starts
            self._wake.wait(self._tick_ms / 1000 if shards else _RETRY_S)
            self._wake.clear()
            if self._stopped.is_set():
                return
            image = self._image
            if image is not None and time.monotonic() - retried >= _RETRY_S:
                retried = time.monotonic()
                self.on_reconciled(image)  # about once a second: retry loads that failed
            with self._lock:
                shards = list(self._shards.values())
            for shard in shards:
                try:
                    self._on_tick(shard)
                except SparkLogError as exc:
                    log.info("%s of %s-%d: %s", self.tick_label, self.topic_name, shard.index, exc)
                except Exception:  # noqa: BLE001 - keep the thread alive
                    log.exception("%s of %s-%d", self.tick_label, self.topic_name, shard.index)

