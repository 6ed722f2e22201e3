"""``TransactionCoordinator``: the IO shell around the pure ``TxnShard``s of one broker.

It runs on the shell every internal-topic coordinator shares
(``brokers.coordination.sharded``): transactional id ``T`` belongs to partition
``partition_for(T, N)`` of ``__transaction_state`` (compacted, created on the first
FindCoordinator), whose leader coordinates it; a new leader replays the partition
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
from typing import Any, Callable, Sequence, TypeVar

from brokers.coordination.sharded import Coordinates, CreateTopic, PartitionSource, Shard, ShardedCoordinator
from brokers.groups.loader import replay
from brokers.partition import Partition
from spark_log.clock import Clock
from spark_log.errors import InvalidRequestError, InvalidTxnStateError, RequestTimeoutError, TransactionalIdNotFoundError

from .core import Outcome, TxnShard, check_transactional_id
from .markers import MarkerSender
from .offsets import GroupOffsetsLink
from .model import INTERNAL_TOPIC, GroupOffset, TopicPartition, TxnConfig, TxnMeta, TxnState
from .records import decode, to_frame

__all__ = ["TransactionCoordinator", "Coordinates", "TxnStats"]

log = logging.getLogger(__name__)

_HOLD_SLACK_MS = 60_000  # a group's hold of a transaction's offsets outlives twice its timeout by this
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


def _deposed(shard: Shard[TxnShard]) -> bool:
    """Whether this broker stopped coordinating ``shard`` (read afresh: another thread sets it)."""
    return shard.closed


def _new_producer_id() -> int:
    """A random producer id, never 0 (EndTxnResponse's 0 means "unchanged")."""
    return 1 + secrets.randbelow((1 << 63) - 1)


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


class TransactionCoordinator(ShardedCoordinator[TxnShard]):
    """The transaction coordinator of broker ``broker_id`` (module docstring); its ticker
    is the completer."""

    topic_name = INTERNAL_TOPIC
    topic_label = "transaction state topic"
    kind = "txn"
    tick_label = "completing transactions"

    def __init__(self, *, broker_id: int, partitions: PartitionSource, create_topic: CreateTopic,
                 markers: MarkerSender, config: TxnConfig | None = None, clock: Clock | None = None,
                 commit_timeout_ms: int = 10_000, tick_ms: int = 50, load_wait_ms: int = 60_000,
                 offsets: GroupOffsetsLink | None = None) -> None:
        super().__init__(broker_id=broker_id, partitions=partitions, create_topic=create_topic, clock=clock,
                         commit_timeout_ms=commit_timeout_ms, tick_ms=tick_ms, load_wait_ms=load_wait_ms)
        self.config = config or TxnConfig()
        self._markers = markers
        self._offsets = offsets
        self._completed = threading.Condition()
        self.stats = TxnStats()

    # -- the shell's hooks -------------------------------------------------------------------

    def _check_key(self, key: str) -> None:
        check_transactional_id(key)

    def _key_label(self, key: str) -> str:
        return f"transactional id {key!r}"

    def _topic_spec(self, live_brokers: int) -> tuple[int, int, dict[str, str]]:
        rf = max(1, min(self.config.replication_factor, live_brokers))
        return self.config.partitions, rf, {
            "cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
            "segment.bytes": str(self.config.segment_bytes), "min.insync.replicas": str(min(2, rf))}

    def _replay(self, partition: Partition, leader_epoch: int, name: str) -> tuple[TxnShard, int]:
        core = TxnShard(self.config)
        end = replay(partition, leader_epoch=leader_epoch, apply=lambda key, value: core.apply(*decode(key, value)),
                     wait_ms=self._load_wait_ms, name=name)
        return core, end

    def _to_frame(self, records: Sequence[Any], timestamp_ms: int) -> bytes:
        return to_frame(tuple(records), timestamp_ms=timestamp_ms)

    def _on_loaded(self, shard: Shard[TxnShard]) -> None:
        self._wake.set()  # finish what the previous coordinator started

    def _on_dropped(self) -> None:
        with self._completed:
            self._completed.notify_all()

    def _on_stop(self) -> None:
        with self._completed:
            self._completed.notify_all()

    def _on_tick(self, shard: Shard[TxnShard]) -> None:
        self._timeouts(shard)
        self._complete(shard)

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
        the member's own) and holds the partitions for this transaction (KIP-447); the
        offsets ride in the transaction and are written to the group when it commits, the
        hold released when it aborts (``offsets.py``)."""
        if self._offsets is None:
            raise InvalidTxnStateError("this broker cannot commit group offsets with a transaction")
        groups = {o.group_id for o in offsets}
        if len(groups) != 1 or not offsets:
            raise InvalidRequestError("send_offsets_to_transaction takes the offsets of one group")
        self._read(transactional_id, lambda core: core.add_offsets(transactional_id, producer_id, epoch, offsets, 0))
        meta = self.describe(transactional_id)
        timeout_ms = meta.timeout_ms if meta is not None else self.config.max_timeout_ms
        self._offsets.hold(groups.pop(), member_id, member_epoch, offsets, transactional_id=transactional_id,
                           until_ms=self._clock.wall_ms() + 2 * timeout_ms + _HOLD_SLACK_MS)
        self._decide(transactional_id,
                     lambda core, now: core.add_offsets(transactional_id, producer_id, epoch, offsets, now))

    def end(self, transactional_id: str, producer_id: int, epoch: int, commit: bool, *,
            timeout_ms: int | None = None) -> tuple[int, int]:
        """EndTxn of a producer's transaction: prepares, then waits until the markers are
        written and the transaction is complete; answers the owner's producer id and epoch
        from then on (a new id once the old one's epochs ran out: ``TxnShard.complete``).
        ``RequestTimeoutError`` when it does not complete in time (retriable: a retry waits
        for the same completion): within three commit timeouts, or ``timeout_ms`` if sooner
        (the service passes what is left of its caller's deadline)."""
        self._decide(transactional_id, lambda core, now: core.end(transactional_id, producer_id, epoch, commit, now))
        meta = self._await_complete(transactional_id, timeout_ms)
        if meta is None:  # expired while it completed: its owner must start again
            raise TransactionalIdNotFoundError(f"transactional id {transactional_id!r} expired while its transaction "
                                               "completed (call init_transactions again)")
        return meta.producer_id, meta.producer_epoch

    def end_batch(self, transactional_id: str, label: int, run: str, commit: bool, participants: list[int], *,
                  timeout_ms: int | None = None) -> None:
        """EndTxn of a Spark micro-batch (``TxnShard.end_batch``), answered once complete."""
        self._decide(transactional_id, lambda core, now: core.end_batch(transactional_id, label, run, commit,
                                                                        participants, now))
        self._await_complete(transactional_id, timeout_ms)

    def _await_complete(self, transactional_id: str, timeout_ms: int | None) -> TxnMeta | None:
        """The transaction's state once no decision is being completed; None at once when the
        coordinator does not know ``transactional_id`` (nothing to wait for: a Spark sink's
        EndTxn for an id it never joined, or one that expired)."""
        self._wake.set()
        limit_ms = self._commit_timeout_ms * 3
        if timeout_ms is not None:
            limit_ms = min(limit_ms, timeout_ms)
        deadline = time.monotonic() + limit_ms / 1000
        with self._completed:
            while True:
                meta = self.describe(transactional_id)
                if meta is None or not meta.state.preparing:
                    return meta
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RequestTimeoutError(f"the transaction of {transactional_id!r} was prepared but its markers "
                                              "are not all written yet; retry to wait for it")
                self._completed.wait(min(remaining, 0.5))

    def describe(self, transactional_id: str) -> TxnMeta | None:
        return self._read(transactional_id, lambda core: core.get(transactional_id))

    # -- decisions ----------------------------------------------------------------------------

    def _decide(self, transactional_id: str, decide: Callable[[TxnShard, int], Outcome[T]]) -> T:
        shard = self._shard(transactional_id)
        outcome = self._decide_on(shard, lambda core: decide(core, self._clock.wall_ms()))
        if outcome.error is not None:
            self._wake.set()
            raise outcome.error
        return outcome.answer

    def _decide_on(self, shard: Shard[TxnShard], decide: Callable[[TxnShard], Outcome[T]]) -> Outcome[T]:
        def act(core: TxnShard) -> Outcome[T]:
            outcome = decide(core)
            if outcome.records:
                self._append(shard, outcome.records)
            before: dict[str, TxnMeta | None] = {}
            for meta in outcome.records:
                self.stats.observe(before.get(meta.transactional_id, core.get(meta.transactional_id)), meta)
                before[meta.transactional_id] = meta
            core.finish(outcome)
            return outcome
        return self._locked(shard, act)

    # -- completing and timing out (the ticker) ---------------------------------------------

    def _timeouts(self, shard: Shard[TxnShard]) -> None:
        if shard.core is None or shard.closed:
            return
        outcome = self._decide_on(shard, lambda core: core.tick(self._clock.wall_ms()))
        for transactional_id in outcome.answer:
            log.info("transaction of %r aborted: open past its timeout", transactional_id)

    def _complete(self, shard: Shard[TxnShard]) -> None:
        with shard.lock:
            if shard.core is None or shard.closed:
                return
            pending = shard.core.preparing()
            end = shard.written_end
        if pending:
            # markers only for decisions a failover cannot lose: a PREPARE_* record appended a
            # moment ago (its EndTxn still waiting for the high watermark) is not durable yet,
            # and rows a marker commits must never outlive a coordinator state that forgot them
            self._wait_durable(shard, end)
        for meta in pending:
            if _deposed(shard):
                return
            crash_point("txn-prepared")  # tests: the coordinator dies with a prepared transaction
            if self._write_markers(shard, meta):
                if meta.offsets and self._offsets is not None:  # raises (retried next tick) until the group takes it
                    if meta.state is TxnState.PREPARE_COMMIT:
                        self._offsets.commit(list(meta.offsets), meta.transactional_id)
                    else:
                        self._offsets.release(list(meta.offsets), meta.transactional_id)
                self._finish(shard, meta.transactional_id)
                with self._completed:
                    self._completed.notify_all()
            # else: retried at the next tick (a leader is moving, a broker is down)

    def _finish(self, shard: Shard[TxnShard], transactional_id: str) -> None:
        self._decide_on(shard, lambda core: core.complete(transactional_id, self._clock.wall_ms(), _new_producer_id))

    def _write_markers(self, shard: Shard[TxnShard], meta: TxnMeta) -> bool:
        """Every marker of ``meta`` written? (each call writes what is missing; a marker
        written twice is harmless: the second finds no open transaction).  A coordinator that
        lost the partition meanwhile stops (its successor writes them): sending to one leader
        after another can take a while, and a deposed coordinator's markers only arrive late."""
        for participant, commit in meta.markers():
            if _deposed(shard):
                return False
            done = self._markers.send(participant, commit, shard.leader_epoch, participant.partitions)
            if done != set(participant.partitions):
                return False
        return True

    # -- metrics ----------------------------------------------------------------------------

    def open_transactions(self, now_ms: int | None = None) -> tuple[dict[TxnState, int], int]:
        """Metrics: ``({state: transactions}, age of the oldest open one in ms)`` over the
        loaded partitions, for the states of a transaction not complete yet (ONGOING and
        PREPARE_*); the age is -1 when none is open."""
        now = self._clock.wall_ms() if now_ms is None else now_ms
        counts = {TxnState.ONGOING: 0, TxnState.PREPARE_COMMIT: 0, TxnState.PREPARE_ABORT: 0}
        oldest = -1
        for shard in self._loaded():
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
