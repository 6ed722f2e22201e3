"""The transaction coordinator's values: one transactional id's metadata, as immutable data.

Every transactional id ``T`` lives in partition ``partition_for(T, N)`` of the compacted
internal topic ``__transaction_state``; the leader of that partition is T's coordinator.
``TxnMeta`` is everything the coordinator knows of T, and each change is one record holding
the whole new ``TxnMeta`` (``records.py``), so the latest record of T is its state.

States (Kafka's ``TransactionState``)::

    EMPTY ──AddPartitions/JoinTxn──> ONGOING ──EndTxn(commit)──> PREPARE_COMMIT ──markers──> COMPLETE_COMMIT
                                        │     ──EndTxn(abort), timeout, InitProducerId──> PREPARE_ABORT ──> COMPLETE_ABORT

The owner is the producer that called ``InitProducerId`` (``producer_id``,
``producer_epoch``); a Spark sink's id has none (``producer_id`` -1): its transactions are
labelled by the micro-batch id and the writer instance (``run``) whose tasks joined.  The participants are the producers that write in the open
transaction, each with the partitions it added: for a producer's transaction only the
owner itself; for a Spark micro-batch every write task, each with a fresh producer id
(``JoinTxn``).  ``commit_pids`` are the participants a PREPARE_COMMIT commits; the others'
records are aborted (a task attempt whose result the driver did not take).

Epochs: a marker moves its participant to ``epoch + 1`` in every partition it touched
(KIP-890's bump), so a late write of the old epoch is fenced there; the owner moves on too
when it wrote itself (a producer's transaction).  InitProducerId and a timeout bump the
owner's epoch to fence the old one.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from brokers.coordination.keys import partition_for as partition_for  # the id's partition of the topic

__all__ = ["INTERNAL_TOPIC", "TxnState", "Participant", "TxnMeta", "GroupOffset", "TopicPartition",
           "partition_for", "TxnConfig", "MAX_EPOCH"]

INTERNAL_TOPIC = "__transaction_state"
MAX_EPOCH = 32_767 - 2  # the frame header's producer epoch is an int16; leave room for the marker bump

TopicPartition = tuple[str, int]


class TxnState(str, enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def idle(self) -> bool:
        """No transaction is open or being completed: a new one may start."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(frozen=True, slots=True)
class Participant:
    producer_id: int
    epoch: int
    partitions: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class GroupOffset:
    """An offset ``send_offsets_to_transaction`` committed with the transaction."""

    group_id: str
    topic: str
    partition: int
    offset: int
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class TxnMeta:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    label: int = -1                 # the open (or last) transaction's label (a Spark batch id)
    committed_label: int = -1       # the highest label committed
    participants: tuple[Participant, ...] = ()
    commit_pids: frozenset[int] = frozenset()
    offsets: tuple[GroupOffset, ...] = ()
    started_ms: int = -1            # wall clock: when the open transaction started
    prev_epoch: int = -1            # the owner's epoch before the last bump (an EndTxn retry)
    prev_producer_id: int = -1      # the owner's producer id before its epochs ran out (an EndTxn retry)
    timed_out: bool = False         # the last abort was the coordinator's (timeout)
    updated_ms: int = -1
    run: str = ""                   # a Spark sink's transaction: the writer instance (query run) that opened it

    @property
    def spark(self) -> bool:
        """A Spark sink's transactional id (no owning producer: tasks join, the driver ends)."""
        return self.producer_id < 0

    def participant(self, producer_id: int) -> Participant | None:
        for p in self.participants:
            if p.producer_id == producer_id:
                return p
        return None

    def with_participant(self, participant: Participant) -> "TxnMeta":
        others = tuple(p for p in self.participants if p.producer_id != participant.producer_id)
        return replace(self, participants=others + (participant,))

    def markers(self) -> list[tuple[Participant, bool]]:
        """For a PREPARE_* state: each participant with partitions and whether its records commit."""
        commit = self.state is TxnState.PREPARE_COMMIT
        return [(p, commit and p.producer_id in self.commit_pids) for p in self.participants if p.partitions]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnConfig:
    """The coordinator's settings (``BrokerConfig.transaction_*``)."""

    max_timeout_ms: int = 3_600_000        # transaction.max.timeout.ms (Kafka: 15 min; Spark batches can be slow)
    default_timeout_ms: int = 60_000
    partitions: int = 8                    # transaction.state.log.num.partitions
    replication_factor: int = 3
    segment_bytes: int = 100 * 1024 * 1024
