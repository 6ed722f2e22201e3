"""The Raft core's vocabulary: log entries, snapshot ids, the hard state and the RPCs.

Every type is a frozen dataclass, so a message can be duplicated, reordered and
replayed by a network (real or simulated) without anyone mutating it.  Offsets are
KRaft's: an ``Entry`` has a dense ``offset`` starting at 0; an *end offset* is the
offset after the last entry (exclusive).  Epoch 0 means "no leader ever"; the first
elected leader has epoch 1.

RPCs (KIP-595 names, pull-based replication):

- ``VoteRequest`` / ``VoteResponse``: an election (``pre_vote=False``) or a pre-vote
  (``pre_vote=True``, KIP-996, Raft thesis section 9.6) that changes no state on the
  receiver, except that a pre-vote in a later epoch moves it to that epoch, as any request
  does (KRaft).  A pre-vote request carries the sender's *current* epoch; the epoch it
  would campaign in is ``epoch + 1``.
- ``BeginQuorumEpoch``: a new leader announces itself to the other voters (again every
  heartbeat to those that have not fetched from it).  A voter already in a later epoch
  answers ``BeginQuorumEpochResponse`` with that epoch and the leader it knows (KRaft's
  FENCED_LEADER_EPOCH answer), and the announcing leader steps down at once (voters that
  moved to a later epoch in an election that failed never follow a leader of an earlier
  one; their next pre-vote would move it too).
- ``FetchRequest`` / ``FetchResponse``: followers and observers pull the log.  The
  response holds entries, or a ``diverging`` hint (the follower truncates), or a
  ``snapshot_id`` (the fetch offset is below the leader's log start), or only
  ``leader_id``/``epoch`` when the receiver is not the leader.
- ``FetchSnapshotRequest`` / ``FetchSnapshotResponse``: the whole snapshot in one
  message (metadata snapshots are small).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

__all__ = [
    "Entry",
    "SnapshotId",
    "Snapshot",
    "HardState",
    "VoteRequest",
    "VoteResponse",
    "BeginQuorumEpoch",
    "BeginQuorumEpochResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "Message",
]


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry.  ``control`` entries (the leader-change marker each new leader
    appends) are replicated and committed like any other but never handed to the state
    machine."""

    offset: int
    epoch: int
    payload: bytes
    control: bool = False


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """A snapshot holds the state after applying every entry with offset < ``end_offset``;
    ``epoch`` is the epoch of the entry at ``end_offset - 1`` (KRaft's OffsetAndEpoch)."""

    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    snapshot_id: SnapshotId
    data: bytes


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be durable before a node acts on it (KRaft's ``quorum-state`` file)."""

    epoch: int = 0
    voted_for: int | None = None
    leader_id: int | None = None


@dataclass(frozen=True, slots=True)
class VoteRequest:
    src: int
    dst: int
    epoch: int
    last_epoch: int
    end_offset: int
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    src: int
    dst: int
    epoch: int
    granted: bool
    pre_vote: bool = False
    leader_id: int | None = None


@dataclass(frozen=True, slots=True)
class BeginQuorumEpoch:
    src: int
    dst: int
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    src: int
    dst: int
    epoch: int  # the answering voter's, later than the announcement's
    leader_id: int | None  # the leader of ``epoch`` it knows, if any


@dataclass(frozen=True, slots=True)
class FetchRequest:
    src: int
    dst: int
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int | None
    fetch_offset: int = 0  # echoed from the request, to discard stale responses
    last_fetched_epoch: int = 0
    entries: tuple[Entry, ...] = field(default=())
    high_watermark: int = 0
    diverging: SnapshotId | None = None  # (end offset, epoch) to truncate to
    snapshot_id: SnapshotId | None = None  # fetch this snapshot first
    not_leader: bool = False


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    src: int
    dst: int
    epoch: int
    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int | None
    snapshot: Snapshot | None = None  # None: the leader no longer has it / is not leader


Message = Union[
    VoteRequest,
    VoteResponse,
    BeginQuorumEpoch,
    BeginQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
]
