"""Explicit Raft roles and the only transitions allowed between them.

Each role is a frozen dataclass; a node's role changes only through ``transition``,
which raises ``IllegalStateTransition`` for anything not in this table (the shape of
Kafka's ``QuorumState`` and KIP-595/KIP-996).  ``E`` is the current epoch; the
condition says what the new state's epoch must be.

    from \\ to    Unattached Voted  Prospective Candidate Leader Follower Resigned
    Unattached   > E        >= E   = E         +1 (a)    -      >= E     -
    Voted        > E        > E    = E         +1 (a)    -      >= E     -
    Prospective  > E        >= E(b)= E         +1        -      >= E     -
    Candidate    > E        > E    = E         +1 (a)    = E    >= E     -
    Leader       > E        > E    -           -         -      > E      = E
    Follower     >= E (c)   > E    = E         +1 (a)    -      > E      -
    Resigned     > E        > E    = E         +1 (a)    -      > E      -

    (a) only with pre-vote disabled; with pre-vote every campaign starts Prospective.
    (b) = E only if the Prospective node has not voted in E.
    (c) = E is an observer whose fetch timeout fired: it forgets the leader.

Rules written down (the paper's section 5.1/5.2 and KIP-595):

1. Epochs never decrease.  Moving to a higher epoch forgets the leader and the vote.
2. A vote cast in epoch E is kept for all of E: a transition within E carries the same
   ``voted_for`` (Candidate, Leader and Resigned have voted for themselves).
3. Observers (non-voters) only ever are Unattached or Follower.
4. Restart: the persisted ``HardState`` decides the first role (``initial_state``):
   leader of E -> Resigned(E) (it may not have all of E's entries flushed, and must not
   lead again in E); follower of L in E -> Follower(E, L); voted in E -> Voted(E);
   otherwise Unattached(E).
5. Counting a vote is not a transition: ``record_vote`` returns the same Prospective or
   Candidate, same epoch and vote, with the answer added to its tally.

Only ``RaftCore`` holds a role; the role logic proposes changes as effects
(``effects.Become``, ``effects.RecordVote``) and the core applies them through these
functions.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Union

from .messages import HardState

__all__ = [
    "IllegalStateTransition",
    "Unattached",
    "Voted",
    "Prospective",
    "Candidate",
    "Leader",
    "Follower",
    "Resigned",
    "RoleState",
    "transition",
    "record_vote",
    "initial_state",
]


class IllegalStateTransition(RuntimeError):
    """A bug in the Raft core: it tried a role change the table forbids.

    Not a ``SparkLogError``: it never crosses the wire and no caller can handle it.
    """


@dataclass(frozen=True, slots=True)
class Unattached:
    epoch: int

    @property
    def voted_for(self) -> int | None:
        return None

    @property
    def leader_id(self) -> int | None:
        return None


@dataclass(frozen=True, slots=True)
class Voted:
    epoch: int
    voted_for: int

    @property
    def leader_id(self) -> int | None:
        return None


@dataclass(frozen=True, slots=True)
class Prospective:
    """Pre-vote phase (KIP-996): asks whether it could win epoch + 1, changes nothing."""

    epoch: int
    voted_for: int | None
    granted: frozenset[int] = field(default=frozenset())
    rejected: frozenset[int] = field(default=frozenset())

    @property
    def leader_id(self) -> int | None:
        return None


@dataclass(frozen=True, slots=True)
class Candidate:
    epoch: int
    node_id: int
    granted: frozenset[int] = field(default=frozenset())
    rejected: frozenset[int] = field(default=frozenset())

    @property
    def voted_for(self) -> int | None:
        return self.node_id

    @property
    def leader_id(self) -> int | None:
        return None


@dataclass(frozen=True, slots=True)
class Leader:
    epoch: int
    node_id: int
    epoch_start_offset: int  # offset of this leader's first entry (its leader-change marker)

    @property
    def voted_for(self) -> int | None:
        return self.node_id

    @property
    def leader_id(self) -> int | None:
        return self.node_id


@dataclass(frozen=True, slots=True)
class Follower:
    epoch: int
    leader_id: int
    voted_for: int | None = None


@dataclass(frozen=True, slots=True)
class Resigned:
    """A former leader of ``epoch`` that stopped leading (check-quorum, or restart)."""

    epoch: int
    node_id: int

    @property
    def voted_for(self) -> int | None:
        return self.node_id

    @property
    def leader_id(self) -> int | None:
        return None


RoleState = Union[Unattached, Voted, Prospective, Candidate, Leader, Follower, Resigned]

_GT, _GE, _EQ, _NEXT = ">", ">=", "=", "+1"
_U, _V, _P, _C, _L, _F, _R = Unattached, Voted, Prospective, Candidate, Leader, Follower, Resigned

# (from, to) -> epoch rule.  Missing pairs are illegal.
_TABLE: dict[tuple[type, type], str] = {
    (_U, _U): _GT, (_U, _V): _GE, (_U, _P): _EQ, (_U, _C): _NEXT, (_U, _F): _GE,
    (_V, _U): _GT, (_V, _V): _GT, (_V, _P): _EQ, (_V, _C): _NEXT, (_V, _F): _GE,
    (_P, _U): _GT, (_P, _V): _GE, (_P, _P): _EQ, (_P, _C): _NEXT, (_P, _F): _GE,
    (_C, _U): _GT, (_C, _V): _GT, (_C, _P): _EQ, (_C, _C): _NEXT, (_C, _L): _EQ, (_C, _F): _GE,
    (_L, _U): _GT, (_L, _V): _GT, (_L, _F): _GT, (_L, _R): _EQ,
    (_F, _U): _GE, (_F, _V): _GT, (_F, _P): _EQ, (_F, _C): _NEXT, (_F, _F): _GT,
    (_R, _U): _GT, (_R, _V): _GT, (_R, _P): _EQ, (_R, _C): _NEXT, (_R, _F): _GT,
}
_VOTER_ONLY = (Voted, Prospective, Candidate, Leader, Resigned)


def transition(old: RoleState, new: RoleState, *, is_voter: bool = True, pre_vote: bool = True) -> RoleState:
    """Return ``new`` if ``old -> new`` is in the table, else raise ``IllegalStateTransition``."""
    rule = _TABLE.get((type(old), type(new)))

    def illegal(why: str) -> IllegalStateTransition:
        return IllegalStateTransition(f"{old!r} -> {new!r}: {why}")

    if rule is None:
        raise illegal("not in the transition table")
    if not is_voter and isinstance(new, _VOTER_ONLY):
        raise illegal("an observer is only ever Unattached or Follower")
    if isinstance(old, Follower) and isinstance(new, Unattached) and is_voter and new.epoch == old.epoch:
        raise illegal("only an observer forgets its leader within an epoch")
    if isinstance(new, Candidate) and not isinstance(old, Prospective) and pre_vote:
        raise illegal("with pre-vote a campaign starts Prospective")
    ok = {
        _GT: new.epoch > old.epoch,
        _GE: new.epoch >= old.epoch,
        _EQ: new.epoch == old.epoch,
        _NEXT: new.epoch == old.epoch + 1,
    }[rule]
    if not ok:
        raise illegal(f"epoch must be {rule} {old.epoch}")
    if new.epoch == old.epoch and old.voted_for is not None and new.voted_for != old.voted_for:
        raise illegal(f"voted for {old.voted_for} in epoch {old.epoch}; a vote is kept for the epoch")
    return new


def record_vote(state: Prospective | Candidate, voter: int, granted: bool) -> Prospective | Candidate:
    """``state`` with ``voter``'s answer counted (rule 5: a tally, not a transition)."""
    if granted:
        return replace(state, granted=state.granted | {voter})
    return replace(state, rejected=state.rejected | {voter})


def initial_state(hard: HardState, node_id: int, *, is_voter: bool) -> RoleState:
    """The role a node restarts in, from its persisted hard state (rule 4 above)."""
    if hard.leader_id == node_id and is_voter:
        return Resigned(hard.epoch, node_id)
    if hard.leader_id is not None:
        voted = hard.voted_for if is_voter else None
        return Follower(hard.epoch, hard.leader_id, voted)
    if hard.voted_for is not None and is_voter:
        return Voted(hard.epoch, hard.voted_for)
    return Unattached(hard.epoch)
