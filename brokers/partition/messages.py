"""The partition unit's typed values: what goes into ``PartitionCore`` / ``Partition`` and
what comes out.  All immutable, plain data (ints, tuples, bytes): a simulation can build
them, compare them and print them.  The ones made per request on the hot paths (produce,
fetch, follower fetch) are ``NamedTuple``s, which cost a fifth of a frozen dataclass to
make; the rest are frozen dataclasses.

Offsets are record offsets; times are milliseconds (``*_ms``); epochs are leader epochs
unless named otherwise; ``-1`` means "none / unknown" where a field says so.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

from brokers.log.results import ReadResult

from .replica_state import ReplicaView

__all__ = [
    "LeaderAndIsr", "Leadership", "NO_LEADERSHIP", "LogEnds", "PartitionOffsets", "PartitionRead", "Isolation",
    "Append", "APPEND", "Duplicate", "SequenceGap", "SEQUENCE_GAP", "ProduceDecision", "AppendOutcome",
    "FollowerFetch", "Diverging", "FollowerFetchDecision", "FollowerFetchAnswer", "FetchPosition", "FetchedData",
    "IsrChange", "ReplicationView",
]


# -- leadership -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsr:
    """One partition as the metadata image last said (the input of ``become``).
    ``leader_id`` None: no leader."""

    leader_id: int | None
    leader_epoch: int
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Leadership:
    """Who leads, as this replica last applied it; replaced whole on every change, so a
    reader without the lock still sees one consistent snapshot."""

    leader_id: int | None
    leader_epoch: int
    is_leader: bool


NO_LEADERSHIP = Leadership(leader_id=None, leader_epoch=0, is_leader=False)


class LogEnds(NamedTuple):
    """Log facts the core decides with: first offset still stored, next offset (LEO)."""

    log_start_offset: int
    log_end_offset: int


class PartitionOffsets(NamedTuple):
    """Offsets read together under the partition's lock.  ``last_stable_offset`` is the
    first offset of the oldest open transaction, capped by ``high_watermark``."""

    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    log_end_offset: int


class Isolation(enum.Enum):
    """How far a consumer may read: the high watermark or the last stable offset."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class PartitionRead(NamedTuple):
    """A consumer read: whole frames (``result``), the offsets at the time of the read and,
    for ``READ_COMMITTED``, the aborted transactions with records among those frames
    (``txn_index.AbortedTxn``: producer id, first offset, abort marker's offset)."""

    result: ReadResult
    offsets: PartitionOffsets
    aborted: tuple[tuple[int, int, int], ...] = ()


# -- produce ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Append:
    """Produce decision: append the entry (one instance: ``APPEND``)."""


APPEND = Append()


@dataclass(frozen=True, slots=True)
class Duplicate:
    """Produce decision: already appended at ``first_offset..last_offset``; acknowledge, append nothing."""

    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class SequenceGap:
    """Produce decision: an earlier sequence of this producer has not arrived yet; wait for
    it (pipelined requests can arrive out of order), then ask again (one instance:
    ``SEQUENCE_GAP``)."""


SEQUENCE_GAP = SequenceGap()


ProduceDecision = Append | Duplicate | SequenceGap


class AppendOutcome(NamedTuple):
    """An acknowledged produce entry: its offsets (the original ones for a duplicate), the
    log start and high watermark after it, and the leader epoch it was appended (or found)
    in, which an acks=all wait must still lead in."""

    base_offset: int
    last_offset: int
    duplicate: bool
    log_start_offset: int
    high_watermark: int
    leader_epoch: int = -1


# -- replication: the leader's side -----------------------------------------------------------

class FollowerFetch(NamedTuple):
    """One partition of a follower's fetch: its LEO (``fetch_offset``), the epoch of its last
    record (-1: empty log) and the leader epoch it follows (-1: not checked)."""

    replica_id: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int


class Diverging(NamedTuple):
    """The leader's diverging-epoch hint (KIP-320/595): its largest epoch <= the follower's
    last fetched epoch and where that epoch ends in the leader's log."""

    epoch: int
    end_offset: int


class FollowerFetchDecision(NamedTuple):
    """The core's answer to a follower fetch: ``diverging`` (send no records), or send from
    ``fetch_offset``; ``high_watermark`` after the fetch was counted; ``hw_grew`` (wake
    acks=all waiters and long polls); ``expand_candidate`` (the follower may rejoin the ISR:
    poke the ISR updater)."""

    diverging: Diverging | None
    high_watermark: int
    hw_grew: bool = False
    expand_candidate: bool = False


class FollowerFetchAnswer(NamedTuple):
    """The shell's answer: the decision plus the records read (whole frames from
    ``fetch_offset``, not capped by the HW) and the offsets at the time."""

    diverging: Diverging | None
    records: bytes | memoryview  # a read-only view of a buffer read for this answer alone
    next_fetch_offset: int
    offsets: PartitionOffsets
    hw_grew: bool
    expand_candidate: bool
    # the follower was caught up and nothing waits on it: the same fetch again may be answered
    # by ``Partition.settled_follower_fetch`` with this token (None: answer it in full)
    settle_token: tuple[object, ...] | None = None


# -- replication: the follower's side ---------------------------------------------------------

class FetchPosition(NamedTuple):
    """What a follower asks its leader for: ``fetch_offset`` (its LEO), the epoch of its last
    record, the leader epoch it follows and its log start."""

    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int


class FetchedData(NamedTuple):
    """The leader's answer for one partition: a diverging hint, or whole frames (possibly
    starting below the follower's LEO) and the leader's high watermark."""

    diverging: Diverging | None
    records: bytes | memoryview
    high_watermark: int


# -- ISR and describe -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class IsrChange:
    """An ISR change to ask the controller for (AlterPartition): ``new_isr`` replaces ``isr``
    in ``leader_epoch`` / ``partition_epoch``; ``out_of_sync`` leave, ``caught_up`` join."""

    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    new_isr: tuple[int, ...]
    out_of_sync: tuple[int, ...]
    caught_up: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ReplicationView:
    """Describe: the replication state and offsets, read together."""

    replica: ReplicaView
    offsets: PartitionOffsets
