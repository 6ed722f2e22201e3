"""What the role logic may see of the core (``CoreView``) and ask of it (``Effect``).

The role modules (``election.py``, ``replication.py``) never change ``RaftCore``: each
handler reads a ``CoreView`` (read-only properties; the log only through
``RaftLogReader``) and returns a list of effects.  ``RaftCore._apply`` is the one place
that carries them out, in list order; a ``Become`` runs the core's role-change hooks at
that point, so an effect list reads like the sequence of steps it replaces (etcd's
``raft.go`` step functions produce messages and state changes for one owner; Kafka's
``QuorumState`` is the only writer of the role).

A handler that needs the state an earlier effect of its own list will produce (a vote
counted, the high watermark it raises) computes it itself with the same pure functions
(``states.record_vote``, ``quorum.majority_offset``); it never reads the core back in the
middle of a step.  The role modules do not import each other: where one needs a fact the
other owns (a pre-vote asks whether the leader was heard from recently), the core passes
it in.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol, Union

from spark_log.config import RaftConfig

from .log import RaftLogReader
from .messages import Entry, Message, Snapshot
from .states import RoleState

__all__ = [
    "CoreView",
    "Effect",
    "Send",
    "Become",
    "RecordVote",
    "Observe",
    "ResetElectionTimer",
    "AppendAsLeader",
    "AppendAsFollower",
    "TruncateLog",
    "InstallSnapshot",
    "RaiseHighWatermark",
]


class CoreView(Protocol):
    """The read-only face of ``RaftCore`` that the role logic works from."""

    @property
    def node_id(self) -> int: ...

    @property
    def voters(self) -> tuple[int, ...]: ...

    @property
    def is_voter(self) -> bool: ...

    @property
    def config(self) -> RaftConfig: ...

    @property
    def rng(self) -> random.Random:
        """The core's injected randomness (observers pick a voter to ask for the leader)."""
        ...

    @property
    def now(self) -> int:
        """Logical time in ticks."""
        ...

    @property
    def state(self) -> RoleState: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def log(self) -> RaftLogReader: ...


@dataclass(frozen=True, slots=True)
class Send:
    """Queue ``message`` for the next ``Ready.messages``."""

    message: Message


@dataclass(frozen=True, slots=True)
class Become:
    """Change role through ``states.transition`` (raises ``IllegalStateTransition``); the
    core then runs the hooks of the new role (a leader appends its leader-change entry, a
    follower resets its fetch timeout and fetches)."""

    state: RoleState


@dataclass(frozen=True, slots=True)
class RecordVote:
    """Count ``voter``'s answer in the current Prospective/Candidate tally (not a transition)."""

    voter: int
    granted: bool


@dataclass(frozen=True, slots=True)
class Observe:
    """Learn of ``epoch`` and its leader from a message (``RaftCore`` rules: a higher epoch
    or a new leader makes the node a follower or unattached)."""

    epoch: int
    leader_id: int | None


@dataclass(frozen=True, slots=True)
class ResetElectionTimer:
    """Draw a new randomised election (or fetch) timeout from now."""


@dataclass(frozen=True, slots=True)
class AppendAsLeader:
    """Append ``payloads`` in the leader's epoch (only while leading)."""

    payloads: tuple[bytes, ...]
    control: bool = False


@dataclass(frozen=True, slots=True)
class AppendAsFollower:
    """Append entries fetched from the leader at the log end."""

    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class TruncateLog:
    """Durably drop every entry at or above ``offset`` (a diverging follower)."""

    offset: int


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    """Replace the whole log by ``snapshot`` and have the shell restore the state machine."""

    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class RaiseHighWatermark:
    """The high watermark becomes ``max(current, offset)``: it never goes back."""

    offset: int


Effect = Union[
    Send,
    Become,
    RecordVote,
    Observe,
    ResetElectionTimer,
    AppendAsLeader,
    AppendAsFollower,
    TruncateLog,
    InstallSnapshot,
    RaiseHighWatermark,
]
