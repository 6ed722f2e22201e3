"""``PartitionManager``: the replicas the metadata image assigns to this broker.

It is a metadata publisher.  ``publish(delta, image)`` (called on the Raft apply thread,
so it only records the image and wakes the manager's thread) leads to ``reconcile(image)``
on the manager thread, which:

- opens (creating if needed) ``<data_dir>/<topic>-<partition>`` for every partition with a
  replica here, and hands it its leadership (leader id, leader epoch) and config
  (only those whose state differs from the last reconciled image's: a reconcile costs what
  changed);
- closes and deletes the replicas of topics that disappeared since the last reconciled
  image, of partitions moved away from this broker, and of directories whose
  ``partition.metadata`` names another topic id (a deleted topic re-created with the same
  name).  Directories are deleted only in those cases: a broker that restarts behind the
  metadata log never deletes data because of a stale image.

Request threads call ``get(topic, partition)``, which opens a replica on demand when the
current image assigns it here but the manager thread has not got to it yet.  Images are
applied in offset order: neither ``reconcile`` nor ``get`` hands a replica the state of an
image older than one already applied (the manager thread may hold an image that ``get`` has
overtaken: reconciling it would turn a newer leadership back into an older epoch's follower).

Catching up first (Kafka's KIP-631 rule): a broker that restarts replays its local copy of
the metadata log, whose images can be far behind; acting on them would let it lead (and
acknowledge writes to) partitions that moved on long ago.  With ``metadata_floor`` (the
controller's metadata offset in this process's first heartbeat answer; None until known)
the manager ignores every image below that floor: no replica is opened or led, and ``get``
answers a retriable ``NotLeaderError`` ("catching up").  Once an image reaches the floor
the manager serves as usual, for good.  Without ``metadata_floor`` it serves at once.
With a floor, the first image served also deletes *stray* replicas (``strays.py``): the
directories of partitions that were reassigned away from this broker, or whose topic was
deleted, while it was down (a running broker drops those as the images arrive).

Long polls: ``data_version`` grows on every append; ``wait_for_data(seen, timeout)`` waits
on one broker-wide condition for it to change (or ``wake_all`` at shutdown).

Time: maintenance is scheduled by the injected ``clock`` (``clock`` is also what the
request handlers take their deadlines from).

Thread-safety: all methods may be called from any thread.
"""
from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path
from typing import Callable

from brokers.metadata.delta import MetadataDelta
from brokers.metadata.image import EMPTY, MetadataImage
from brokers.partition import LeaderAndIsr, Partition
from brokers.partition.directory import read_topic_id
from spark_log.clock import Clock, SystemClock
from spark_log.errors import BrokerNotAvailableError, NotLeaderError, SparkLogError, UnknownTopicOrPartitionError

from .strays import stray_directories

__all__ = ["PartitionManager"]

log = logging.getLogger(__name__)

_MAINTENANCE_INTERVAL_MS = 5_000
_CATCH_UP_POLL_S = 0.05


class PartitionManager:
    """Hosted replicas of broker ``broker_id`` under ``data_dir`` (see the module docstring)."""

    def __init__(self, *, broker_id: int, data_dir: Path, clock: Clock | None = None,
                 metadata_floor: Callable[[], int | None] | None = None) -> None:
        self.broker_id = broker_id
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._image: MetadataImage = EMPTY
        self._latest: MetadataImage = EMPTY  # newest published, served once caught up
        self._metadata_floor = metadata_floor
        self._caught_up = metadata_floor is None
        self._strays_pending = metadata_floor is not None  # only a caught-up image may judge strays
        self._reconciled: MetadataImage = EMPTY
        # the newest image offset whose state a replica was handed, by ``reconcile`` or by
        # ``get`` (which may run ahead of the manager thread): no older image is applied after it
        self._applied_offset = EMPTY.offset
        self._wakeup = threading.Condition()
        self._pending = False
        self._stopped = False
        self._data = threading.Condition()
        self.data_version = 0
        self._thread: threading.Thread | None = None
        self._reconcile_listeners: list[Callable[[MetadataImage], None]] = []
        self.compaction_listener: Callable[[], None] = lambda: None  # the broker's cleaner (BrokerCleaner)

    def add_reconcile_listener(self, listener: Callable[[MetadataImage], None]) -> None:
        """Call ``listener(image)`` after every ``reconcile`` (replication assigns fetchers)."""
        self._reconcile_listeners.append(listener)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"partitions-{self.broker_id}", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the manager thread (joined for at most ``timeout_s``), wake every long poll
        and close every replica (flushed)."""
        with self._wakeup:
            self._stopped = True
            self._wakeup.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
        self.wake_all()
        with self._lock:
            partitions, self._partitions = list(self._partitions.values()), {}
        for partition in partitions:
            try:
                partition.close()
            except SparkLogError as exc:
                log.error("closing %s-%d: %s", partition.topic, partition.partition, exc)

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def clock(self) -> Clock:
        """The broker's injected clock (request deadlines, maintenance)."""
        return self._clock

    # -- metadata ---------------------------------------------------------------------------

    def publish(self, delta: MetadataDelta | None, image: MetadataImage) -> None:
        """Metadata publisher: remember the image; the manager thread applies it."""
        with self._wakeup:
            self._latest = image
            self._serve_latest()

    def wait_for_image(self, predicate: Callable[[MetadataImage], bool], timeout_s: float) -> MetadataImage | None:
        """The served image once ``predicate`` holds for it; None after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._wakeup:
            while not predicate(self._image):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopped:
                    return None
                self._wakeup.wait(remaining)
            return self._image

    @property
    def caught_up(self) -> bool:
        """Whether the images served have reached the metadata floor (see the module docstring)."""
        return self._caught_up

    def _serve_latest(self) -> None:
        """Serve ``_latest`` if caught up (caller holds ``_wakeup``)."""
        if not self._caught_up:  # so there is a _metadata_floor (without one it starts caught up)
            floor = self._metadata_floor() if self._metadata_floor is not None else None
            if floor is None or self._latest.offset < floor:
                return
            self._caught_up = True
            log.info("broker %d caught up with the metadata log at offset %d (floor %d)",
                     self.broker_id, self._latest.offset, floor)
        self._image = self._latest
        self._pending = True
        self._wakeup.notify_all()

    def _run(self) -> None:
        next_maintenance_ms = self._clock.monotonic_ms() + _MAINTENANCE_INTERVAL_MS
        while True:
            with self._wakeup:
                while not self._pending and not self._stopped:
                    if not self._caught_up:  # the floor arrives with a heartbeat, not an image
                        self._serve_latest()
                        if not self._pending:
                            self._wakeup.wait(_CATCH_UP_POLL_S)
                        continue
                    if not self._wakeup.wait(max(0, next_maintenance_ms - self._clock.monotonic_ms()) / 1000):
                        break
                if self._stopped:
                    return
                image, self._pending = self._image, False
            try:
                self.reconcile(image)
            except Exception:  # noqa: BLE001 - keep serving; the next image retries
                log.exception("reconciling replicas with metadata offset %d failed", image.offset)
            if self._clock.monotonic_ms() >= next_maintenance_ms:
                self._maintenance()
                next_maintenance_ms = self._clock.monotonic_ms() + _MAINTENANCE_INTERVAL_MS

    def reconcile(self, image: MetadataImage) -> None:
        """Make the hosted replicas match ``image`` (see the module docstring)."""
        with self._lock:
            if self._stopped:
                return
            if image.offset < self._applied_offset:
                # taken by the manager thread before ``get`` handed a replica a newer image's
                # state: reconciling it would undo that (a newer leadership back to an older
                # epoch's follower); the newer image is pending and is reconciled next
                log.debug("not reconciling metadata offset %d: offset %d was applied already",
                          image.offset, self._applied_offset)
                return
            previous = self._reconciled
            for name, old in previous.topics.items():
                new = image.topics.get(name)
                if new is None or new.topic_id != old.topic_id:
                    for index in list(old.partitions):
                        self._drop((name, index), delete=True)
            for name, index, info in image.iter_partitions():
                key = (name, index)
                if self.broker_id in info.replicas:
                    if not self._unchanged(previous, image, name, index):
                        self._ensure(image, name, index)
                elif key in self._partitions:
                    self._drop(key, delete=True)
            if self._strays_pending:  # once: the first image past the metadata floor (strays.py)
                self._strays_pending = False
                for directory in stray_directories(self.data_dir, image, self.broker_id, self._partitions):
                    log.info("deleting %s: a stray replica (moved away or deleted while this broker was down)",
                             directory)
                    _remove_tree(directory)
            self._reconciled = image
            self._applied_offset = image.offset
        for listener in list(self._reconcile_listeners):
            listener(image)

    def _unchanged(self, previous: MetadataImage, image: MetadataImage, topic: str, index: int) -> bool:
        """The replica is open and ``previous`` (the last reconciled image) gave it the same
        topic id, config and partition state as ``image``: nothing to hand it.  An image
        usually changes a few partitions (an ISR change, a leader moved), so a reconcile
        costs what changed, not every replica here (caller holds ``_lock``)."""
        old, new = previous.topics.get(topic), image.topics[topic]
        if old is None:
            return False
        partition = self._partitions.get((topic, index))
        if partition is None or partition.topic_id != new.topic_id:
            return False
        if old is not new and (old.topic_id != new.topic_id or old.config != new.config):
            return False
        return old.partitions.get(index) == new.partitions[index]

    def _ensure(self, image: MetadataImage, topic: str, index: int) -> Partition:
        topic_image = image.topics[topic]
        info = topic_image.partitions[index]
        key = (topic, index)
        partition = self._partitions.get(key)
        if partition is not None and partition.topic_id != topic_image.topic_id:
            self._drop(key, delete=True)
            partition = None
        if partition is None:
            directory = self.data_dir / f"{topic}-{index}"
            owner = read_topic_id(directory)
            if owner is not None and owner != topic_image.topic_id:
                log.info("deleting %s: it belongs to an older topic with the same name", directory)
                _remove_tree(directory)
            partition = Partition(topic=topic, partition=index, topic_id=topic_image.topic_id, directory=directory,
                                  config=topic_image.config, clock=self._clock, on_append=self._notify_data,
                                  broker_id=self.broker_id, on_compaction_work=lambda: self.compaction_listener())
            self._partitions[key] = partition
        partition.become(LeaderAndIsr(leader_id=info.leader, leader_epoch=info.leader_epoch,
                                      partition_epoch=info.partition_epoch, replicas=tuple(info.replicas),
                                      isr=tuple(info.isr)), config=topic_image.config)
        return partition

    def _drop(self, key: tuple[str, int], *, delete: bool) -> None:
        partition = self._partitions.pop(key, None)
        if partition is None:
            return
        try:
            partition.delete() if delete else partition.close()
        except SparkLogError as exc:
            log.error("removing %s-%d: %s", key[0], key[1], exc)
        self._notify_data()

    def _maintenance(self) -> None:
        with self._lock:
            partitions = list(self._partitions.values())
        for partition in partitions:
            try:
                partition.maintenance()
            except SparkLogError as exc:
                log.warning("maintenance of %s-%d: %s", partition.topic, partition.partition, exc)

    # -- request threads --------------------------------------------------------------------

    def get(self, topic: str, index: int, *, leader: bool = True) -> Partition:
        """The hosted replica; with ``leader``, only if this broker leads it.

        Raises ``UnknownTopicOrPartitionError`` (no such topic/partition) or
        ``NotLeaderError`` carrying the leader's address."""
        if not self._caught_up:
            raise NotLeaderError(f"broker {self.broker_id} is catching up with the metadata log; "
                                 "ask again after a metadata refresh")
        image = self._image
        topic_image = image.topics.get(topic)
        if topic_image is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
        info = topic_image.partitions.get(index)
        if info is None:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has no partition {index} (it has {len(topic_image.partitions)})")
        if leader and info.leader != self.broker_id:
            address = image.broker_address(info.leader)
            raise NotLeaderError(
                f"broker {self.broker_id} does not lead {topic}-{index}; "
                + (f"broker {info.leader} at {address} does" if address else "it has no leader right now"),
                leader_address=address, leader_id=info.leader if info.leader is not None else -1,
            )
        if self.broker_id not in info.replicas:
            raise NotLeaderError(f"broker {self.broker_id} holds no replica of {topic}-{index}",
                                 leader_address=image.broker_address(info.leader))
        with self._lock:
            if self._stopped:  # stop() closes every log under this lock: never open one again
                raise BrokerNotAvailableError(f"broker {self.broker_id} is shutting down")
            partition = self._partitions.get((topic, index))
            if partition is not None and partition.topic_id == topic_image.topic_id and (partition.is_leader
                                                                                      or not leader):
                return partition
            if image.offset >= self._applied_offset:
                partition = self._ensure(image, topic, index)
                self._applied_offset = image.offset
                return partition
        # a newer image was applied since ``image`` was read: never hand the replica older state
        if self._image.offset > image.offset:
            return self.get(topic, index, leader=leader)
        raise NotLeaderError(f"broker {self.broker_id} is applying newer metadata for {topic}-{index}; "
                             "ask again after a metadata refresh")

    def hosted(self) -> list[Partition]:
        with self._lock:
            return list(self._partitions.values())

    # -- long polls -------------------------------------------------------------------------

    def _notify_data(self) -> None:
        with self._data:
            self.data_version += 1
            self._data.notify_all()

    def wait_for_data(self, seen: int, timeout_s: float) -> int:
        """Wait until ``data_version`` differs from ``seen`` or ``timeout_s`` passes."""
        with self._data:
            if self.data_version == seen and not self._stopped:
                self._data.wait(timeout_s)
            return self.data_version

    def wake_all(self) -> None:
        self._notify_data()


def _remove_tree(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
