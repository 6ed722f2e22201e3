"""Majority math (Raft paper 5.2: elections need a majority; 5.3/5.4.2 and KIP-595
"high watermark": commit at the offset a majority has reached)."""
from __future__ import annotations

import pytest

from brokers.raft.quorum import VoteResult, majority, majority_offset, vote_result


@pytest.mark.parametrize(("voters", "needed"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)])
def test_majority(voters: int, needed: int) -> None:
    assert majority(voters) == needed


def test_majority_of_nobody_is_an_error() -> None:
    with pytest.raises(ValueError):
        majority(0)


@pytest.mark.parametrize(
    ("voters", "granted", "rejected", "expected"),
    [
        ([1], [1], [], VoteResult.WON),
        ([1, 2, 3], [1], [], VoteResult.PENDING),
        ([1, 2, 3], [1, 2], [], VoteResult.WON),
        ([1, 2, 3], [1], [2], VoteResult.PENDING),
        ([1, 2, 3], [1], [2, 3], VoteResult.LOST),
        ([1, 2, 3, 4], [1, 2], [3], VoteResult.PENDING),
        ([1, 2, 3, 4], [1, 2], [3, 4], VoteResult.LOST),
        ([1, 2, 3, 4, 5], [1, 2, 3], [4, 5], VoteResult.WON),
        ([1, 2, 3], [1, 9, 8], [], VoteResult.PENDING),  # non-voters do not count
        ([1, 2, 3], [1, 2], [2], VoteResult.WON),  # a grant wins over a stale rejection
    ],
)
def test_vote_result(voters: list[int], granted: list[int], rejected: list[int], expected: VoteResult) -> None:
    assert vote_result(voters, granted, rejected) is expected


@pytest.mark.parametrize(
    ("voters", "offsets", "expected"),
    [
        ([1], {1: 7}, 7),
        ([1, 2, 3], {1: 10, 2: 5, 3: 0}, 5),
        ([1, 2, 3], {1: 10}, 0),
        ([1, 2, 3], {1: 10, 2: 10, 3: 3}, 10),
        ([1, 2, 3, 4], {1: 9, 2: 8, 3: 7, 4: 6}, 7),
        ([1, 2, 3, 4, 5], {1: 5, 2: 4, 3: 3, 4: 2, 5: 1}, 3),
        ([1, 2, 3], {1: 4, 2: 4, 99: 100}, 4),  # observers never count
    ],
)
def test_majority_offset(voters: list[int], offsets: dict[int, int], expected: int) -> None:
    assert majority_offset(voters, offsets) == expected
