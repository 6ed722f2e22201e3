"""``TxnShard``: the transactional ids of one ``__transaction_state`` partition, as a pure
state machine (no lock, thread, clock, disk or network).

Every decision returns an ``Outcome``: the new ``TxnMeta`` records to append (the shell
makes them durable before answering), the answer, and an error to raise once the records
are durable (InitProducerId on an open transaction starts its abort and asks the client to
retry).  ``apply`` takes a record both from live decisions and from a replay of the
partition, so a new coordinator after a failover holds exactly what the old one made
durable; it then finishes every PREPARE_* transaction (``preparing``) by writing its
markers and ``complete``-ing it.  Times are wall-clock milliseconds passed in (``now_ms``):
a transaction's start must mean the same on the next coordinator.

Checks (a refused call changes nothing):
- the owner: ``producer_id`` must be T's, its epoch the current one (older:
  ``ProducerFencedError``, or ``TransactionTimedOutError`` when the coordinator's own
  timeout abort moved it on);
- a participant (a Spark task): its producer id and epoch must be in the open transaction;
- a transaction being completed refuses new work with ``ConcurrentTransactionsError``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Generic, Iterable, TypeVar

from spark_log.errors import (
    ConcurrentTransactionsError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    SparkLogError,
    TransactionalIdNotFoundError,
    TransactionTimedOutError,
)

from .model import MAX_EPOCH, GroupOffset, Participant, TopicPartition, TxnConfig, TxnMeta, TxnState

__all__ = ["TxnShard", "Outcome", "check_transactional_id"]

T = TypeVar("T")

_MAX_ID_CHARS = 249


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    records: tuple[TxnMeta, ...]
    answer: T
    error: SparkLogError | None = None


def check_transactional_id(transactional_id: str) -> None:
    if not transactional_id or len(transactional_id) > _MAX_ID_CHARS:
        raise InvalidRequestError(f"a transactional id must have 1 to {_MAX_ID_CHARS} characters, "
                                  f"got {transactional_id!r}")


class TxnShard:
    def __init__(self, config: TxnConfig | None = None) -> None:
        self.config = config or TxnConfig()
        self._txns: dict[str, TxnMeta] = {}

    # -- replay / apply ------------------------------------------------------------------------

    def apply(self, transactional_id: str, meta: TxnMeta | None) -> None:
        if meta is None:
            self._txns.pop(transactional_id, None)
        else:
            self._txns[transactional_id] = meta

    def finish(self, outcome: Outcome[T]) -> None:
        for meta in outcome.records:
            self.apply(meta.transactional_id, meta)

    def get(self, transactional_id: str) -> TxnMeta | None:
        return self._txns.get(transactional_id)

    def preparing(self) -> list[TxnMeta]:
        """Transactions whose markers must be written (PREPARE_COMMIT / PREPARE_ABORT)."""
        return [m for m in self._txns.values() if m.state.preparing]

    def ids(self) -> list[str]:
        return sorted(self._txns)

    # -- the owner ------------------------------------------------------------------------------

    def _known(self, transactional_id: str) -> TxnMeta:
        meta = self._txns.get(transactional_id)
        if meta is None:
            raise TransactionalIdNotFoundError(f"transactional id {transactional_id!r} was never initialised "
                                               "(call init_transactions first)")
        return meta

    @staticmethod
    def _check_owner(meta: TxnMeta, producer_id: int, epoch: int) -> None:
        if producer_id != meta.producer_id:
            raise ProducerFencedError(f"transactional id {meta.transactional_id!r} now belongs to producer "
                                      f"{meta.producer_id}, not {producer_id}")
        if epoch != meta.producer_epoch:
            if meta.timed_out and epoch == meta.prev_epoch:
                raise TransactionTimedOutError(
                    f"transaction of {meta.transactional_id!r} was aborted after its timeout ({meta.timeout_ms} ms); "
                    "initialise the producer again")
            raise ProducerFencedError(f"producer {producer_id} epoch {epoch} of {meta.transactional_id!r} is fenced: "
                                      f"epoch {meta.producer_epoch} took over")

    def init(self, transactional_id: str, timeout_ms: int, now_ms: int,
             new_producer_id: Callable[[], int]) -> Outcome[tuple[int, int, int]]:
        """InitProducerId: a new id, or the next epoch of the existing one (fencing the old
        producer).  An open transaction is aborted first (``ConcurrentTransactionsError``:
        retry once its markers are written)."""
        check_transactional_id(transactional_id)
        timeout_ms = self._timeout(timeout_ms)
        meta = self._txns.get(transactional_id)
        if meta is not None and meta.spark:
            raise InvalidTxnStateError(f"{transactional_id!r} is a Spark sink's transactional id")
        if meta is None:
            meta = TxnMeta(transactional_id=transactional_id, producer_id=new_producer_id(), producer_epoch=0,
                           timeout_ms=timeout_ms, updated_ms=now_ms)
            return Outcome((meta,), (meta.producer_id, 0, -1))
        if meta.state.preparing:
            raise ConcurrentTransactionsError(f"the last transaction of {transactional_id!r} is being completed")
        if meta.state is TxnState.ONGOING:
            # prev_epoch -1: the fenced producer's own EndTxn is never taken for a retry of this
            # abort (which would hand it the epoch that fenced it; Kafka's fencing sets
            # lastProducerEpoch to none for the same reason)
            aborting = replace(self._prepare(meta, commit=False, commit_pids=frozenset(), now_ms=now_ms, fence=True),
                               prev_epoch=-1)
            return Outcome((aborting,), (0, 0, 0), ConcurrentTransactionsError(
                f"aborting the open transaction of {transactional_id!r} before a new producer takes over; retry"))
        pid, epoch = meta.producer_id, meta.producer_epoch + 1
        if epoch > MAX_EPOCH:
            pid, epoch = new_producer_id(), 0
        fresh = replace(meta, producer_id=pid, producer_epoch=epoch, timeout_ms=timeout_ms, state=TxnState.EMPTY,
                        participants=(), commit_pids=frozenset(), offsets=(), prev_epoch=-1, prev_producer_id=-1,
                        timed_out=False, updated_ms=now_ms)
        return Outcome((fresh,), (pid, epoch, meta.committed_label))

    # -- joining and adding ---------------------------------------------------------------------

    def _open(self, meta: TxnMeta, now_ms: int, label: int = -1) -> TxnMeta:
        """The transaction to add to: the open one, or a new one (idle state)."""
        if meta.state.preparing:
            raise ConcurrentTransactionsError(f"the last transaction of {meta.transactional_id!r} is being completed")
        if meta.state is TxnState.ONGOING:
            if label != meta.label:
                raise InvalidTxnStateError(f"transaction of {meta.transactional_id!r} is open for label {meta.label}, "
                                           f"not {label}")
            return meta
        return replace(meta, state=TxnState.ONGOING, label=label, participants=(), commit_pids=frozenset(),
                       offsets=(), started_ms=now_ms, timed_out=False, prev_epoch=-1, prev_producer_id=-1)

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition], now_ms: int) -> Outcome[None]:
        """AddPartitionsToTxn: the owner (starting a transaction if none is open) or a
        participant adds partitions before its first write to them."""
        meta = self._known(transactional_id)
        wanted = frozenset(partitions)
        if producer_id in (meta.producer_id, meta.prev_producer_id):  # the owner, or its id before a new one
            self._check_owner(meta, producer_id, epoch)
            meta = self._open(meta, now_ms, meta.label if meta.state is TxnState.ONGOING else -1)
            current = meta.participant(producer_id) or Participant(producer_id, epoch)
        else:
            current = self._participant(meta, producer_id, epoch)
        if wanted <= current.partitions and meta.state is TxnState.ONGOING and meta.participant(producer_id):
            return Outcome((), None)
        updated = meta.with_participant(Participant(producer_id, epoch, current.partitions | wanted))
        return Outcome((replace(updated, updated_ms=now_ms),), None)

    @staticmethod
    def _participant(meta: TxnMeta, producer_id: int, epoch: int) -> Participant:
        found = meta.participant(producer_id) if meta.state is TxnState.ONGOING else None
        if found is None:
            raise InvalidTxnStateError(f"producer {producer_id} is not a participant of the open transaction of "
                                       f"{meta.transactional_id!r} (it was completed or aborted)")
        if found.epoch != epoch:
            raise ProducerFencedError(f"participant {producer_id} epoch {epoch} is fenced (epoch {found.epoch})")
        return found

    def verify(self, transactional_id: str, producer_id: int, epoch: int, partition: TopicPartition) -> None:
        """KIP-890: a partition leader asks before the first transactional write of
        ``producer_id`` there whether the partition is in its open transaction."""
        meta = self._known(transactional_id)
        found = self._participant(meta, producer_id, epoch)
        if partition not in found.partitions:
            raise InvalidTxnStateError(f"{partition[0]}-{partition[1]} was not added to the transaction of "
                                       f"{transactional_id!r} by producer {producer_id}")

    def join(self, transactional_id: str, label: int, run: str, timeout_ms: int, now_ms: int,
             new_producer_id: Callable[[], int]) -> Outcome[tuple[int, int, bool]]:
        """JoinTxn (a Spark write task of micro-batch ``label``, from writer ``run``): a fresh
        participant of that batch's transaction, started when none is open.  Answers
        ``already_committed`` when the batch committed before (a replay: write nothing).
        A transaction of an earlier batch, or of the same batch from another run (the
        query restarted), is aborted first (``ConcurrentTransactionsError``: retry)."""
        check_transactional_id(transactional_id)
        if label < 0 or not run:
            raise InvalidRequestError(f"a join needs a label >= 0 and a run, got {label} and {run!r}")
        meta = self._txns.get(transactional_id)
        if meta is None:
            meta = TxnMeta(transactional_id=transactional_id, producer_id=-1, producer_epoch=0,
                           timeout_ms=self._timeout(timeout_ms), updated_ms=now_ms)
        if not meta.spark:
            raise InvalidTxnStateError(f"{transactional_id!r} is a producer's transactional id, not a Spark sink's")
        if meta.committed_label >= label:
            return Outcome((), (-1, -1, True))
        if meta.state.preparing:
            raise ConcurrentTransactionsError(f"the last transaction of {transactional_id!r} is being completed")
        if meta.state is TxnState.ONGOING and (meta.label, meta.run) != (label, run):
            if meta.label > label:
                raise InvalidTxnStateError(f"{transactional_id!r} is writing batch {meta.label}; batch {label} is over")
            aborting = self._prepare(meta, commit=False, commit_pids=frozenset(), now_ms=now_ms, fence=False)
            return Outcome((aborting,), (0, 0, False), ConcurrentTransactionsError(
                f"aborting batch {meta.label} of {transactional_id!r} (run {meta.run}) before batch {label} of run "
                f"{run}; retry"))
        if meta.state is not TxnState.ONGOING:
            meta = replace(meta, state=TxnState.ONGOING, label=label, run=run, participants=(),
                           commit_pids=frozenset(), offsets=(), started_ms=now_ms, timed_out=False,
                           timeout_ms=self._timeout(timeout_ms))
        pid = new_producer_id()
        joined = replace(meta.with_participant(Participant(pid, 0)), updated_ms=now_ms)
        return Outcome((joined,), (pid, 0, False))

    def end_batch(self, transactional_id: str, label: int, run: str, commit: bool, participants: Iterable[int],
                  now_ms: int) -> Outcome[None]:
        """The Spark driver's commit (or abort) of micro-batch ``label``: only the listed
        participants commit (the task attempts whose results Spark took); the others'
        records are aborted.  A batch that committed before commits again as a no-op; a
        batch whose transaction was aborted meanwhile (a timeout, a newer run) cannot
        commit (``InvalidTxnStateError``)."""
        check_transactional_id(transactional_id)
        meta = self._txns.get(transactional_id)
        if meta is None or (commit and meta.committed_label >= label):
            return Outcome((), None)
        if not meta.spark:
            raise InvalidTxnStateError(f"{transactional_id!r} is a producer's transactional id, not a Spark sink's")
        mine = (meta.label, meta.run) == (label, run)
        if meta.state.preparing and mine:
            if (meta.state is TxnState.PREPARE_COMMIT) == commit:
                return Outcome((), None)  # the shell waits for its completion
            raise InvalidTxnStateError(f"batch {label} of {transactional_id!r} is already being "
                                       f"{'aborted' if commit else 'committed'}")
        if meta.state is not TxnState.ONGOING or not mine:
            if commit:
                raise InvalidTxnStateError(
                    f"batch {label} of {transactional_id!r} cannot commit: its transaction was aborted (open longer "
                    f"than {meta.timeout_ms} ms, or the query restarted)")
            return Outcome((), None)
        chosen = frozenset(participants)
        unknown = chosen - {p.producer_id for p in meta.participants}
        if unknown:
            raise InvalidTxnStateError(f"participants {sorted(unknown)} are not in the transaction of batch {label} "
                                       f"of {transactional_id!r}")
        prepared = self._prepare(meta, commit=commit, commit_pids=chosen if commit else frozenset(), now_ms=now_ms,
                                 fence=False)
        return Outcome((prepared,), None)

    def _timeout(self, timeout_ms: int) -> int:
        if timeout_ms <= 0:
            return self.config.default_timeout_ms
        if timeout_ms > self.config.max_timeout_ms:
            raise InvalidTransactionTimeoutError(
                f"transaction.timeout.ms {timeout_ms} is above the broker's transaction.max.timeout.ms "
                f"{self.config.max_timeout_ms}")
        return timeout_ms

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int,
                    offsets: Iterable[GroupOffset], now_ms: int) -> Outcome[None]:
        """send_offsets_to_transaction: committed to their group with the transaction."""
        meta = self._known(transactional_id)
        self._check_owner(meta, producer_id, epoch)
        meta = self._open(meta, now_ms, meta.label if meta.state is TxnState.ONGOING else -1)
        new = {(o.group_id, o.topic, o.partition): o for o in meta.offsets}
        new.update({(o.group_id, o.topic, o.partition): o for o in offsets})
        return Outcome((replace(meta, offsets=tuple(new.values()), updated_ms=now_ms),), None)

    # -- ending ---------------------------------------------------------------------------------

    def end(self, transactional_id: str, producer_id: int, epoch: int, commit: bool, now_ms: int) -> Outcome[int]:
        """EndTxn: PREPARE_COMMIT / PREPARE_ABORT (the shell writes the markers, then
        ``complete``); the shell answers the owner's producer id and epoch once the
        transaction is complete."""
        meta = self._known(transactional_id)
        state = meta.state
        previous_id = meta.producer_id if meta.prev_producer_id < 0 else meta.prev_producer_id
        if (producer_id == previous_id and epoch == meta.prev_epoch and not meta.timed_out
                and state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)):
            return Outcome((), meta.producer_epoch)  # a retry of the EndTxn that completed
        self._check_owner(meta, producer_id, epoch)
        if state.preparing:
            if state is (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
                return Outcome((), meta.producer_epoch)  # the shell waits for its completion
            raise InvalidTxnStateError(f"the transaction of {transactional_id!r} is already being "
                                       f"{'aborted' if commit else 'committed'}")
        if state is not TxnState.ONGOING:
            return Outcome((), meta.producer_epoch)  # nothing open: an empty commit or abort
        chosen = frozenset(p.producer_id for p in meta.participants)
        prepared = self._prepare(meta, commit=commit, commit_pids=chosen if commit else frozenset(), now_ms=now_ms,
                                 fence=False)
        return Outcome((prepared,), prepared.producer_epoch)

    @staticmethod
    def _prepare(meta: TxnMeta, *, commit: bool, commit_pids: frozenset[int], now_ms: int, fence: bool,
                 timed_out: bool = False) -> TxnMeta:
        epoch = meta.producer_epoch + 1 if fence else meta.producer_epoch
        return replace(meta, state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                       commit_pids=commit_pids, producer_epoch=epoch,
                       prev_epoch=meta.producer_epoch if fence else meta.prev_epoch, timed_out=timed_out,
                       updated_ms=now_ms)

    def complete(self, transactional_id: str, now_ms: int, new_producer_id: Callable[[], int]) -> Outcome[None]:
        """Every marker of the PREPARE_* transaction is written: COMPLETE_*.  A commit
        records its label; an owner that wrote itself moves to the next epoch (its markers
        were written in it), or, once its epochs ran out (``MAX_EPOCH``: a frame header's
        epoch is an int16, and the next transaction's markers go one above its data), to a
        new producer id at epoch 0, which EndTxn answers (Kafka's transactions v2 do the
        same); ``prev_producer_id`` keeps the old one for a retry of that EndTxn."""
        meta = self._known(transactional_id)
        if not meta.state.preparing:
            return Outcome((), None)
        commit = meta.state is TxnState.PREPARE_COMMIT
        pid, epoch, prev, prev_pid = meta.producer_id, meta.producer_epoch, meta.prev_epoch, meta.prev_producer_id
        own = meta.participant(meta.producer_id)
        if own is not None and own.epoch == meta.producer_epoch:  # not already fenced past it (init, timeout)
            epoch, prev = meta.producer_epoch + 1, meta.producer_epoch
            if epoch > MAX_EPOCH:
                pid, epoch, prev_pid = new_producer_id(), 0, meta.producer_id
        done = replace(meta, state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
                       committed_label=max(meta.committed_label, meta.label) if commit and meta.label >= 0
                       else meta.committed_label,
                       producer_id=pid, producer_epoch=epoch, prev_epoch=prev, prev_producer_id=prev_pid,
                       participants=(), commit_pids=frozenset(), offsets=(), updated_ms=now_ms)
        return Outcome((done,), None)

    def tick(self, now_ms: int) -> Outcome[list[str]]:
        """Abort every transaction open past its timeout (fencing its owner's epoch)."""
        expired = [m for m in self._txns.values()
                   if m.state is TxnState.ONGOING and 0 <= m.started_ms and now_ms - m.started_ms > m.timeout_ms]
        records = tuple(self._prepare(m, commit=False, commit_pids=frozenset(), now_ms=now_ms, fence=True,
                                      timed_out=True) for m in expired)
        return Outcome(records, [m.transactional_id for m in expired])
