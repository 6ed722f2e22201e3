"""Majority math for a fixed voter set, kept apart so that it can be table-tested.

Raft paper section 5.2 (elections need a majority) and 5.3/5.4.2 (an entry is committed
once a majority of voters store it); KIP-595 "high watermark": the leader advances it
to the largest offset that a majority of voters have fetched past.
"""
from __future__ import annotations

import enum
from typing import Iterable, Mapping

__all__ = ["VoteResult", "majority", "vote_result", "majority_offset"]


class VoteResult(enum.Enum):
    PENDING = "pending"
    WON = "won"
    LOST = "lost"


def majority(voter_count: int) -> int:
    """Smallest number of voters that is more than half of ``voter_count``."""
    if voter_count < 1:
        raise ValueError("a quorum needs at least one voter")
    return voter_count // 2 + 1


def vote_result(voters: Iterable[int], granted: Iterable[int], rejected: Iterable[int]) -> VoteResult:
    """WON once a majority granted, LOST once a majority can no longer be reached.

    Votes from non-voters are ignored.
    """
    voter_set = frozenset(voters)
    need = majority(len(voter_set))
    yes = len(voter_set.intersection(granted))
    no = len(voter_set.intersection(rejected) - voter_set.intersection(granted))
    if yes >= need:
        return VoteResult.WON
    if len(voter_set) - no < need:
        return VoteResult.LOST
    return VoteResult.PENDING


def majority_offset(voters: Iterable[int], offsets: Mapping[int, int]) -> int:
    """The largest offset that at least a majority of ``voters`` have reached.

    A voter missing from ``offsets`` counts as offset 0.  Offsets of non-voters
    (observers) never count.
    """
    values = sorted((offsets.get(v, 0) for v in frozenset(voters)), reverse=True)
    return values[majority(len(values)) - 1]
