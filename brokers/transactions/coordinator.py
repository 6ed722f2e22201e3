"""``TransactionCoordinator``: the IO shell around the pure ``TxnShard``s of one broker.

It follows the pattern of ``brokers.groups.coordinator``: transactional id ``T`` belongs to
partition ``partition_for(T, N)`` of ``__transaction_state`` (compacted, created on the
first FindCoordinator), whose leader coordinates it; a new leader replays the partition
(``brokers.groups.loader.replay``) before answering (``CoordinatorLoadInProgressError``
meanwhile), and every decision is appended with acks=all semantics in the leader epoch the
shard was loaded in and answered only once the high watermark passed it.

Completing transactions.  A completer thread finishes every PREPARE_* transaction: it
sends each participant's markers to the leaders of its partitions (``MarkerSender``),
retrying until every one is written, then appends COMPLETE_*.  A new coordinator after a
failover finds the PREPARE_* records in its replay and finishes them the same way, so a
commit the old coordinator made durable always completes.  ``end`` (EndTxn) waits for the
completion before it answers; the same thread aborts transactions open past their timeout.

Thread-safety: every public method may be called from any thread.
"""
from __future__ import annotations

import logging
import os
import secrets
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, TypeVar

from brokers.groups.coordinator import CreateTopic, PartitionSource
from brokers.groups.loader import replay
from brokers.log.append import check_frames
from brokers.metadata.image import MetadataImage
from brokers.partition import Partition
from spark_log.clock import Clock, SystemClock
from spark_log.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedEpochError,
    InvalidRequestError,
    InvalidTxnStateError,
    NotCoordinatorError,
    NotLeaderError,
    RequestTimeoutError,
    SparkLogError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from .core import Outcome, TxnShard, check_transactional_id
from .markers import MarkerSender
from .offsets import GroupOffsetsLink
from .model import INTERNAL_TOPIC, GroupOffset, TopicPartition, TxnConfig, TxnMeta, TxnState, partition_for
from .records import decode, to_frame

__all__ = ["TransactionCoordinator", "Coordinates", "TxnStats"]

log = logging.getLogger(__name__)

_CRASH_AT = os.environ.get("SPARK_LOG_TXN_CRASH_AT", "")
_CRASH_ONCE = os.environ.get("SPARK_LOG_TXN_CRASH_ONCE", "")


def crash_point(name: str) -> None:
    """kill -9 of this broker at a named point, for failover tests: only when
    ``SPARK_LOG_TXN_CRASH_AT`` names it, and only once per cluster when
    ``SPARK_LOG_TXN_CRASH_ONCE`` names a file (created, fsynced, then the process dies; a
    restarted broker that finds the file goes on).  Production never sets them."""
    if _CRASH_AT != name:
        return
    if _CRASH_ONCE:
        try:
            fd = os.open(_CRASH_ONCE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return
        os.write(fd, f"{name}\n".encode())
        os.fsync(fd)
        os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)

T = TypeVar("T")

@dataclass(frozen=True, slots=True)
class Coordinates:
    broker_id: int
    address: str
    partition: int


@dataclass(eq=False)
class _Shard:
    index: int
    leader_epoch: int
    partition: Partition
    lock: threading.Lock = field(default_factory=threading.Lock)
    core: TxnShard | None = None
    written_end: int = 0
    closed: bool = False


def _new_producer_id() -> int:
    return secrets.randbits(63)


class TxnStats:
    """What this broker's coordinator decided (metrics): transactions started, committed,
    aborted (a timed-out one included) and timed out, counted when the shard applies the
    decision; a coordinator's replay after a failover counts nothing (the counts are this
    process's own decisions).  Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = self.committed = self.aborted = self.timed_out = 0

    def observe(self, before: TxnMeta | None, after: TxnMeta) -> None:
        was = before.state if before is not None else TxnState.EMPTY
        with self._lock:
            if after.state is TxnState.ONGOING and was is not TxnState.ONGOING:
                self.started += 1
            elif after.state is TxnState.COMPLETE_COMMIT and was is TxnState.PREPARE_COMMIT:
                self.committed += 1
            elif after.state is TxnState.COMPLETE_ABORT and was is TxnState.PREPARE_ABORT:
                self.aborted += 1
            elif after.state is TxnState.PREPARE_ABORT and was is TxnState.ONGOING and after.timed_out:
                self.timed_out += 1

    def counts(self) -> tuple[int, int, int, int]:
        """``(started, committed, aborted, timed out)``."""
        with self._lock:
            return self.started, self.committed, self.aborted, self.timed_out


class TransactionCoordinator:
    def __init__(self, *, broker_id: int, partitions: PartitionSource, create_topic: CreateTopic,
                 markers: MarkerSender, config: TxnConfig | None = None, clock: Clock | None = None,
                 commit_timeout_ms: int = 10_000, tick_ms: int = 50, load_wait_ms: int = 60_000,
                 offsets: GroupOffsetsLink | None = None) -> None:
        self.broker_id = broker_id
        self.config = config or TxnConfig()
        self._partitions = partitions
        self._create_topic = create_topic
        self._markers = markers
        self._clock: Clock = clock or SystemClock()
        self._commit_timeout_ms = commit_timeout_ms
        self._tick_ms = tick_ms
        self._load_wait_ms = load_wait_ms
        self._offsets = offsets
        self._lock = threading.Lock()
        self._shards: dict[int, _Shard] = {}
        self._creating = threading.Lock()
        self._stopped = threading.Event()
        self._completed = threading.Condition()
        self._work = threading.Event()
        self._thread: threading.Thread | None = None
        self._image: MetadataImage | None = None
        self.stats = TxnStats()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"txn-completer-{self.broker_id}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._work.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            shards, self._shards = list(self._shards.values()), {}
        for shard in shards:
            shard.closed = True
        self._markers.close()
        if self._offsets is not None:
            self._offsets.close()
        with self._completed:
            self._completed.notify_all()

    # -- leadership of the internal partitions ------------------------------------------------

    def on_reconciled(self, image: MetadataImage) -> None:
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
            threading.Thread(target=self._load, args=(shard,), name=f"txn-load-{shard.index}", daemon=True).start()

    def _load(self, shard: _Shard) -> None:
        name = f"{INTERNAL_TOPIC}-{shard.index}"
        core = TxnShard(self.config)
        try:
            end = replay(shard.partition, leader_epoch=shard.leader_epoch,
                         apply=lambda key, value: core.apply(*decode(key, value)), wait_ms=self._load_wait_ms,
                         name=name)
        except SparkLogError as exc:
            log.warning("loading %s failed: %s", name, exc)
            self._drop(shard)
            return
        with shard.lock:
            if shard.closed:
                return
            shard.core, shard.written_end = core, end
        log.info("broker %d coordinates %s (leader epoch %d)", self.broker_id, name, shard.leader_epoch)
        self._work.set()  # finish what the previous coordinator started

    def _drop(self, shard: _Shard) -> None:
        shard.closed = True
        with self._lock:
            if self._shards.get(shard.index) is shard:
                del self._shards[shard.index]
        with self._completed:
            self._completed.notify_all()

    # -- finding the coordinator ---------------------------------------------------------------

    def find_coordinator(self, transactional_id: str) -> Coordinates:
        check_transactional_id(transactional_id)
        image = self._partitions.image
        topic = image.topics.get(INTERNAL_TOPIC)
        if topic is None:
            self._ensure_topic(image)
            raise CoordinatorNotAvailableError(f"the transaction state topic {INTERNAL_TOPIC} is being created")
        index = partition_for(transactional_id, len(topic.partitions))
        info = topic.partitions[index]
        address = image.broker_address(info.leader)
        if info.leader is None or address is None:
            raise CoordinatorNotAvailableError(f"{INTERNAL_TOPIC}-{index} has no leader right now")
        return Coordinates(info.leader, address, index)

    def _ensure_topic(self, image: MetadataImage) -> None:
        if not self._creating.acquire(blocking=False):
            return
        try:
            rf = max(1, min(self.config.replication_factor, len(image.live_brokers())))
            self._create_topic(INTERNAL_TOPIC, self.config.partitions, rf,
                               {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
                                "segment.bytes": str(self.config.segment_bytes), "min.insync.replicas":
                                str(min(2, rf))})
        except TopicAlreadyExistsError:
            pass
        except SparkLogError as exc:
            log.warning("creating %s failed (asked again at the next FindCoordinator): %s", INTERNAL_TOPIC, exc)
        finally:
            self._creating.release()

    # -- requests ------------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int) -> tuple[int, int, int]:
        return self._decide(transactional_id,
                            lambda core, now: core.init(transactional_id, timeout_ms, now, _new_producer_id))

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: list[TopicPartition]) -> None:
        self._decide(transactional_id,
                     lambda core, now: core.add_partitions(transactional_id, producer_id, epoch, partitions, now))

    def verify(self, transactional_id: str, producer_id: int, epoch: int, partition: TopicPartition) -> None:
        self._read(transactional_id, lambda core: core.verify(transactional_id, producer_id, epoch, partition))

    def join(self, transactional_id: str, label: int, run: str, timeout_ms: int) -> tuple[int, int, bool]:
        return self._decide(transactional_id, lambda core, now: core.join(transactional_id, label, run, timeout_ms,
                                                                          now, _new_producer_id))

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, offsets: list[GroupOffset], *,
                    member_id: str = "", member_epoch: int = -1) -> None:
        """send_offsets_to_transaction: the group's coordinator checks the commit now (as
        the member's own), the offsets ride in the transaction and are written to the
        group when it commits (``offsets.py``)."""
        if self._offsets is None:
            raise InvalidTxnStateError("this broker cannot commit group offsets with a transaction")
        groups = {o.group_id for o in offsets}
        if len(groups) != 1 or not offsets:
            raise InvalidRequestError("send_offsets_to_transaction takes the offsets of one group")
        self._read(transactional_id, lambda core: core.add_offsets(transactional_id, producer_id, epoch, offsets, 0))
        self._offsets.validate(groups.pop(), member_id, member_epoch, offsets)
        self._decide(transactional_id,
                     lambda core, now: core.add_offsets(transactional_id, producer_id, epoch, offsets, now))

    def end(self, transactional_id: str, producer_id: int, epoch: int, commit: bool, *,
            timeout_ms: int | None = None) -> int:
        """EndTxn of a producer's transaction: prepares, then waits until the markers are
        written and the transaction is complete; answers the owner's epoch from then on.
        ``RequestTimeoutError`` when it does not complete in time (retriable: a retry waits
        for the same completion)."""
        self._decide(transactional_id, lambda core, now: core.end(transactional_id, producer_id, epoch, commit, now))
        return self._await_complete(transactional_id, timeout_ms).producer_epoch

    def end_batch(self, transactional_id: str, label: int, run: str, commit: bool, participants: list[int], *,
                  timeout_ms: int | None = None) -> None:
        """EndTxn of a Spark micro-batch (``TxnShard.end_batch``), answered once complete."""
        self._decide(transactional_id, lambda core, now: core.end_batch(transactional_id, label, run, commit,
                                                                        participants, now))
        self._await_complete(transactional_id, timeout_ms)

    def _await_complete(self, transactional_id: str, timeout_ms: int | None) -> TxnMeta:
        self._work.set()
        deadline = time.monotonic() + (timeout_ms if timeout_ms is not None else self._commit_timeout_ms * 3) / 1000
        with self._completed:
            while True:
                meta = self.describe(transactional_id)
                if meta is not None and not meta.state.preparing:
                    return meta
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RequestTimeoutError(f"the transaction of {transactional_id!r} was prepared but its markers "
                                              "are not all written yet; retry to wait for it")
                self._completed.wait(min(remaining, 0.5))

    def describe(self, transactional_id: str) -> TxnMeta | None:
        return self._read(transactional_id, lambda core: core.get(transactional_id))

    # -- the one path -------------------------------------------------------------------------

    def _shard(self, transactional_id: str) -> _Shard:
        check_transactional_id(transactional_id)
        topic = self._partitions.image.topics.get(INTERNAL_TOPIC)
        if topic is None:
            raise CoordinatorNotAvailableError(f"the transaction state topic {INTERNAL_TOPIC} does not exist yet")
        index = partition_for(transactional_id, len(topic.partitions))
        with self._lock:
            shard = self._shards.get(index)
        if shard is None or shard.closed:
            raise NotCoordinatorError(f"broker {self.broker_id} does not coordinate transactional id "
                                      f"{transactional_id!r} ({INTERNAL_TOPIC}-{index})")
        if shard.core is None:
            raise CoordinatorLoadInProgressError(f"broker {self.broker_id} is loading {INTERNAL_TOPIC}-{index}")
        return shard

    def _decide(self, transactional_id: str, decide: Callable[[TxnShard, int], Outcome[T]]) -> T:
        shard = self._shard(transactional_id)
        outcome = self._decide_on(shard, lambda core: decide(core, self._clock.wall_ms()))
        if outcome.error is not None:
            self._work.set()
            raise outcome.error
        return outcome.answer

    def _decide_on(self, shard: _Shard, decide: Callable[[TxnShard], Outcome[T]]) -> Outcome[T]:
        with shard.lock:
            core = shard.core
            if core is None or shard.closed:
                raise NotCoordinatorError(f"broker {self.broker_id} stopped coordinating {INTERNAL_TOPIC}-"
                                          f"{shard.index}")
            outcome = decide(core)
            if outcome.records:
                self._append(shard, outcome.records)
            before: dict[str, TxnMeta | None] = {}
            for meta in outcome.records:
                self.stats.observe(before.get(meta.transactional_id, core.get(meta.transactional_id)), meta)
                before[meta.transactional_id] = meta
            core.finish(outcome)
            end = shard.written_end
        self._wait_durable(shard, end)
        return outcome

    def _read(self, transactional_id: str, read: Callable[[TxnShard], T]) -> T:
        shard = self._shard(transactional_id)
        with shard.lock:
            if shard.core is None or shard.closed:
                raise NotCoordinatorError(f"broker {self.broker_id} stopped coordinating {transactional_id!r}")
            answer = read(shard.core)
            end = shard.written_end
        self._wait_durable(shard, end)
        return answer

    def _append(self, shard: _Shard, records: tuple[TxnMeta, ...]) -> None:
        data = to_frame(records, timestamp_ms=self._clock.wall_ms())
        frames = check_frames(data, max_message_bytes=max(len(data), shard.partition.config.max_message_bytes),
                              topic=INTERNAL_TOPIC)
        try:
            appended = shard.partition.append_as_leader(frames, required_leader_epoch=shard.leader_epoch,
                                                        acks_all=True)
        except (NotLeaderError, FencedEpochError, UnknownTopicOrPartitionError) as exc:
            self._drop(shard)
            raise NotCoordinatorError(f"broker {self.broker_id} no longer leads {INTERNAL_TOPIC}-{shard.index}: "
                                      f"{exc}") from None
        shard.written_end = appended.last_offset + 1

    def _wait_durable(self, shard: _Shard, end: int) -> None:
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

    # -- completing and timing out -------------------------------------------------------------

    def _loop(self) -> None:
        rounds = 0
        while not self._stopped.is_set():
            self._work.wait(self._tick_ms / 1000)
            self._work.clear()
            if self._stopped.is_set():
                return
            rounds += 1
            image = self._image
            if image is not None and rounds % max(1, 1000 // self._tick_ms) == 0:
                self.on_reconciled(image)  # retry loads that failed
            with self._lock:
                shards = list(self._shards.values())
            for shard in shards:
                try:
                    self._timeouts(shard)
                    self._complete(shard)
                except SparkLogError as exc:
                    log.info("completing transactions of %s-%d: %s", INTERNAL_TOPIC, shard.index, exc)
                except Exception:  # noqa: BLE001 - keep the completer alive
                    log.exception("completing transactions of %s-%d", INTERNAL_TOPIC, shard.index)

    def _timeouts(self, shard: _Shard) -> None:
        if shard.core is None or shard.closed:
            return
        outcome = self._decide_on(shard, lambda core: core.tick(self._clock.wall_ms()))
        for transactional_id in outcome.answer:
            log.info("transaction of %r aborted: open past its timeout", transactional_id)

    def _complete(self, shard: _Shard) -> None:
        with shard.lock:
            if shard.core is None or shard.closed:
                return
            pending = shard.core.preparing()
        for meta in pending:
            crash_point("txn-prepared")  # tests: the coordinator dies with a prepared transaction
            if self._write_markers(shard, meta):
                if meta.state is TxnState.PREPARE_COMMIT and meta.offsets and self._offsets is not None:
                    self._offsets.commit(list(meta.offsets))  # raises (retried next tick) until the group takes them
                self._finish(shard, meta.transactional_id)
                with self._completed:
                    self._completed.notify_all()
            # else: retried at the next tick (a leader is moving, a broker is down)

    def _finish(self, shard: _Shard, transactional_id: str) -> None:
        self._decide_on(shard, lambda core: core.complete(transactional_id, self._clock.wall_ms()))

    def _write_markers(self, shard: _Shard, meta: TxnMeta) -> bool:
        """Every marker of ``meta`` written? (each call writes what is missing; a marker
        written twice is harmless: the second finds no open transaction)."""
        for participant, commit in meta.markers():
            done = self._markers.send(participant, commit, shard.leader_epoch, participant.partitions)
            if done != set(participant.partitions):
                return False
        return True

    # -- tests and describe ---------------------------------------------------------------------

    def open_transactions(self, now_ms: int | None = None) -> tuple[dict[TxnState, int], int]:
        """Metrics: ``({state: transactions}, age of the oldest open one in ms)`` over the
        loaded partitions, for the states of a transaction not complete yet (ONGOING and
        PREPARE_*); the age is -1 when none is open."""
        now = self._clock.wall_ms() if now_ms is None else now_ms
        counts = {TxnState.ONGOING: 0, TxnState.PREPARE_COMMIT: 0, TxnState.PREPARE_ABORT: 0}
        oldest = -1
        with self._lock:
            shards = [s for s in self._shards.values() if s.core is not None and not s.closed]
        for shard in shards:
            with shard.lock:
                core = shard.core
                metas = [core.get(i) for i in core.ids()] if core is not None else []
            for meta in metas:
                if meta is None or meta.state not in counts:
                    continue
                counts[meta.state] += 1
                if meta.started_ms >= 0:
                    oldest = max(oldest, now - meta.started_ms)
        return counts, oldest

    def loaded_partitions(self) -> list[int]:
        with self._lock:
            return sorted(i for i, s in self._shards.items() if s.core is not None and not s.closed)
