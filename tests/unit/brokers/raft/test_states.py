"""The role transition table (states.py docstring; Kafka QuorumState, KIP-595, KIP-996)."""
from __future__ import annotations

import pytest

from brokers.raft.messages import HardState
from brokers.raft.states import (
    Candidate, Follower, IllegalStateTransition, Leader, Prospective, Resigned, RoleState, Unattached, Voted,
    initial_state, transition,
)

LEGAL: list[tuple[RoleState, RoleState]] = [
    (Unattached(1), Unattached(2)),
    (Unattached(1), Voted(1, 2)),
    (Unattached(1), Prospective(1, None)),
    (Unattached(1), Follower(1, 2)),
    (Voted(1, 2), Follower(1, 3, 2)),
    (Voted(1, 2), Prospective(1, 2)),
    (Prospective(1, None), Candidate(2, 1)),
    (Prospective(1, None), Voted(1, 3)),
    (Prospective(1, 2), Follower(1, 2, 2)),
    (Candidate(2, 1), Leader(2, 1, 0)),
    (Candidate(2, 1), Prospective(2, 1)),
    (Candidate(2, 1), Follower(2, 3, 1)),
    (Candidate(2, 1), Unattached(3)),
    (Leader(2, 1, 0), Resigned(2, 1)),
    (Leader(2, 1, 0), Follower(3, 2)),
    (Follower(1, 2), Prospective(1, None)),
    (Follower(1, 2), Follower(2, 3)),
    (Resigned(2, 1), Prospective(2, 1)),
    (Resigned(2, 1), Unattached(3)),
]

ILLEGAL: list[tuple[RoleState, RoleState, str]] = [
    (Unattached(2), Unattached(1), "epoch"),
    (Voted(1, 2), Voted(1, 3), "epoch"),  # Raft 5.2: one vote per epoch
    (Prospective(1, 2), Voted(1, 3), "voted"),
    (Unattached(1), Leader(1, 1, 0), "table"),  # only a Candidate becomes Leader
    (Unattached(1), Candidate(2, 1), "pre-vote"),  # with pre-vote a campaign starts Prospective
    (Prospective(1, None), Candidate(3, 1), "epoch"),
    (Candidate(2, 1), Leader(3, 1, 0), "epoch"),
    (Leader(2, 1, 0), Follower(2, 3), "epoch"),  # one leader per epoch
    (Leader(2, 1, 0), Prospective(2, 1), "table"),
    (Follower(1, 2), Follower(1, 3), "epoch"),
    (Follower(1, 2, 2), Unattached(1), "observer"),
    (Resigned(2, 1), Leader(2, 1, 0), "table"),  # a resigned leader never leads that epoch again
]


@pytest.mark.parametrize(("old", "new"), LEGAL, ids=lambda s: type(s).__name__)
def test_legal_transitions(old: RoleState, new: RoleState) -> None:
    assert transition(old, new) is new


@pytest.mark.parametrize(("old", "new", "why"), ILLEGAL, ids=lambda s: type(s).__name__ if not isinstance(s, str) else s)
def test_illegal_transitions_raise(old: RoleState, new: RoleState, why: str) -> None:
    with pytest.raises(IllegalStateTransition):
        transition(old, new)


def test_without_pre_vote_a_follower_becomes_candidate_directly() -> None:
    assert transition(Follower(1, 2), Candidate(2, 1), pre_vote=False) == Candidate(2, 1)


def test_observers_are_only_unattached_or_follower() -> None:
    assert transition(Follower(1, 2), Unattached(1), is_voter=False) == Unattached(1)
    with pytest.raises(IllegalStateTransition):
        transition(Unattached(1), Prospective(1, None), is_voter=False)
    with pytest.raises(IllegalStateTransition):
        transition(Unattached(1), Voted(1, 2), is_voter=False)


@pytest.mark.parametrize(
    ("hard", "voter", "expected"),
    [
        (HardState(), True, Unattached(0)),
        (HardState(3, 1, 1), True, Resigned(3, 1)),  # was leader: restart as Resigned (KRaft)
        (HardState(3, 2, 2), True, Follower(3, 2, 2)),
        (HardState(3, 2, None), True, Voted(3, 2)),
        (HardState(3, None, 2), False, Follower(3, 2)),
    ],
)
def test_initial_state(hard: HardState, voter: bool, expected: RoleState) -> None:
    assert initial_state(hard, 1, is_voter=voter) == expected
