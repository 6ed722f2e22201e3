"""A transactional producer's side of a transaction (KIP-98), held by ``Producer``.

States: UNINITIALISED -> (``init``) READY -> (``begin``) IN_TRANSACTION -> (``commit`` /
``abort``) READY; FENCED once a newer producer took the transactional id (every call then
raises ``ProducerFencedError``: close the producer); back to UNINITIALISED when the
coordinator aborted the transaction after its timeout (``TransactionTimedOutError``: call
``init`` again, which moves to the next epoch).

- ``init``: InitProducerId at the coordinator: the producer id and epoch to write with (an
  older producer of the same id is fenced; its open transaction is aborted first).
- ``add``: before the first record of a transaction goes to a partition, the partition is
  added at the coordinator (AddPartitions), once per partition and transaction.
- ``commit``: flush (every record acknowledged; a send that failed for good makes the
  transaction uncommittable: abort it), then EndTxn(commit), which answers once every
  partition has its marker; the producer continues in the epoch it answers (KIP-890: the
  markers moved the producer to it, so a late write of the old epoch is fenced), under the
  producer id it answers (a new one, at epoch 0, once the old one's epochs ran out).
- ``abort``: waits for the sends in flight, then EndTxn(abort).
"""
from __future__ import annotations

import enum
import threading
from typing import Callable, Mapping

from . import errors
from ._client import Cluster
from ._txn_client import TxnRpc
from .proto import transactions_pb2 as tpb

__all__ = ["ProducerTransactions", "TxnPhase"]


class TxnPhase(enum.Enum):
    UNINITIALISED = "uninitialised"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    FENCED = "fenced"


class ProducerTransactions:
    def __init__(self, cluster: Cluster, transactional_id: str, timeout_ms: int, *, request_timeout_s: float) -> None:
        if not transactional_id or len(transactional_id) > 249:
            raise errors.InvalidConfigError("invalid value for 'transactional_id': 1 to 249 characters",
                                            key="transactional_id")
        if not isinstance(timeout_ms, int) or timeout_ms < 1:
            raise errors.InvalidConfigError("invalid value for 'transaction_timeout_ms': an integer >= 1",
                                            key="transaction_timeout_ms")
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.rpc = TxnRpc(cluster, timeout_s=max(request_timeout_s, 30.0))
        self.phase = TxnPhase.UNINITIALISED
        self.producer_id = -1
        self.epoch = -1
        self.committed_label = -1
        self._added: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self.failure: errors.SparkLogError | None = None  # a send of this transaction failed for good
        self.participant = False  # a Spark task's producer: joined a transaction the driver ends

    def _fenced(self, exc: errors.SparkLogError) -> errors.SparkLogError:
        if isinstance(exc, errors.TransactionTimedOutError):
            # the coordinator's timeout abort moved the epoch on and nobody took the id over
            # since (else the error would be ProducerFencedError): init_transactions() again
            self.phase = TxnPhase.UNINITIALISED
        elif isinstance(exc, errors.ProducerFencedError):
            self.phase = TxnPhase.FENCED
        return exc

    def _check(self, *allowed: TxnPhase) -> None:
        if self.phase is TxnPhase.FENCED:
            raise errors.ProducerFencedError(f"producer of {self.transactional_id!r} was fenced by a newer one; "
                                             "close it")
        if self.phase not in allowed:
            hint = {TxnPhase.UNINITIALISED: "call init_transactions() first",
                    TxnPhase.READY: "call begin_transaction() first",
                    TxnPhase.IN_TRANSACTION: "a transaction is already open"}[self.phase]
            raise errors.InvalidTxnStateError(f"transactional producer {self.transactional_id!r}: {hint}")

    def init(self) -> tuple[int, int]:
        self._check(TxnPhase.UNINITIALISED, TxnPhase.READY)
        request = tpb.InitProducerIdRequest(transactional_id=self.transactional_id,
                                            transaction_timeout_ms=self.timeout_ms)
        answer = self.rpc.call(self.transactional_id, "InitProducerId", request)
        self.producer_id, self.epoch = int(answer.producer_id), int(answer.producer_epoch)
        self.committed_label = int(answer.committed_label)
        self.phase = TxnPhase.READY
        return self.producer_id, self.epoch

    def join(self, label: int, run: str) -> bool:
        """A Spark write task: join the transaction of micro-batch ``label`` from writer
        ``run`` as a participant with a fresh producer id; False (write nothing) when that
        batch committed before.  The driver ends the transaction, not this producer."""
        self._check(TxnPhase.UNINITIALISED)
        request = tpb.JoinTxnRequest(transactional_id=self.transactional_id, label=label, run=run,
                                     transaction_timeout_ms=self.timeout_ms)
        answer = self.rpc.call(self.transactional_id, "JoinTxn", request, deadline_s=max(60.0, self.rpc.timeout_s))
        if answer.already_committed:
            return False
        self.producer_id, self.epoch = int(answer.producer_id), int(answer.producer_epoch)
        self.phase = TxnPhase.IN_TRANSACTION
        self.participant = True
        return True

    def begin(self) -> None:
        self._check(TxnPhase.READY)
        with self._lock:
            self._added.clear()
            self.failure = None
        self.phase = TxnPhase.IN_TRANSACTION

    def add(self, topic: str, partition: int) -> None:
        """Called before a record goes to ``(topic, partition)``."""
        self._check(TxnPhase.IN_TRANSACTION)
        with self._lock:
            if (topic, partition) in self._added:
                return
        request = tpb.AddPartitionsRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                           producer_epoch=self.epoch,
                                           partitions=[tpb.TopicPartition(topic=topic, partition=partition)])
        try:
            self.rpc.call(self.transactional_id, "AddPartitions", request)
        except errors.SparkLogError as exc:
            raise self._fenced(exc) from None
        with self._lock:
            self._added.add((topic, partition))

    def add_offsets(self, offsets: Mapping[tuple[str, int], int], group_id: str, member_id: str = "",
                    member_epoch: int = -1) -> None:
        self._check(TxnPhase.IN_TRANSACTION)
        if not offsets:
            raise errors.InvalidRequestError("send_offsets_to_transaction needs at least one offset")
        request = tpb.AddOffsetsRequest(
            transactional_id=self.transactional_id, producer_id=self.producer_id, producer_epoch=self.epoch,
            group_id=group_id, member_id=member_id, member_epoch=member_epoch,
            offsets=[tpb.GroupOffset(topic=t, partition=p, offset=int(o)) for (t, p), o in sorted(offsets.items())])
        try:
            self.rpc.call(self.transactional_id, "AddOffsets", request)
        except errors.SparkLogError as exc:
            raise self._fenced(exc) from None

    def end(self, commit: bool, flush: Callable[[], None]) -> tuple[int, int]:
        """Commit or abort the open transaction; returns the producer id and epoch to write
        with from now on (a new id once the old one's epochs ran out, KIP-890)."""
        self._check(TxnPhase.IN_TRANSACTION)
        if self.participant:
            raise errors.InvalidTxnStateError("a participant's transaction is ended by its driver, not by the task")
        try:
            flush()
        except errors.SparkLogError:
            if commit:
                raise
        if commit and self.failure is not None:
            raise errors.InvalidTxnStateError(
                f"a send of this transaction failed ({self.failure}); abort_transaction() and retry it") from None
        request = tpb.EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                    producer_epoch=self.epoch, commit=commit, label=-1)
        try:
            answer = self.rpc.call(self.transactional_id, "EndTxn", request, deadline_s=max(60.0, self.rpc.timeout_s))
        except errors.SparkLogError as exc:
            raise self._fenced(exc) from None
        if answer.producer_id:  # 0: a broker that predates new ids here (unchanged)
            self.producer_id = int(answer.producer_id)
        self.epoch = int(answer.producer_epoch)
        self.phase = TxnPhase.READY
        with self._lock:
            self._added.clear()
        return self.producer_id, self.epoch

    def note_failure(self, error: errors.SparkLogError) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = error
        if isinstance(error, errors.FencedEpochError):
            self._fenced(errors.ProducerFencedError(error.message))
