"""Scripted divergence histories: a follower converges to the leader's log (KIP-101/320/595).

A log is scripted as one epoch per offset (``[1, 1, 2]``: offsets 0-1 written in epoch 1,
offset 2 in epoch 2).  ``converge`` runs the fetch protocol (leader check, truncation,
append from the leader) until the follower holds the leader's log; it fails after a few
rounds, which would mean the truncation logic loops.
"""
from __future__ import annotations

import pytest

from brokers.log.epoch_cache import EpochCache
from brokers.partition.divergence import (
    end_offset_for_epoch,
    epoch_of_last_record,
    follower_truncation_offset,
    leader_check,
)


def entries(log: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for offset, epoch in enumerate(log):
        if not out or out[-1][0] != epoch:
            out.append((epoch, offset))
    return out


def converge(leader: list[int], follower: list[int]) -> tuple[list[int], int, list[int]]:
    """Returns (follower log after convergence, rounds, truncation points)."""
    follower = list(follower)
    cuts: list[int] = []
    for rounds in range(1, 10):
        answer = leader_check(entries(leader), log_start_offset=0, log_end_offset=len(leader),
                              fetch_offset=len(follower),
                              last_fetched_epoch=epoch_of_last_record(entries(follower), len(follower)))
        if answer is None:
            follower.extend(leader[len(follower):])
            return follower, rounds, cuts
        cut = follower_truncation_offset(entries(follower), len(follower), answer)
        cuts.append(cut)
        del follower[cut:]
    raise AssertionError(f"no convergence: leader {leader}, follower {follower}")


@pytest.mark.parametrize(
    "name, leader, follower, first_cut",
    [
        ("prefix", [1, 1, 2, 2], [1, 1], None),
        ("equal", [1, 1, 2], [1, 1, 2], None),
        ("empty follower", [1, 2, 3], [], None),
        ("follower ahead in same epoch (unacked tail of old leader)", [1, 1, 1], [1, 1, 1, 1, 1], 3),
        ("old leader wrote in an epoch the new leader never saw", [1, 1, 3, 3], [1, 1, 2, 2, 2], 2),
        ("KIP-101 case: same offsets, different epochs", [1, 2, 2], [1, 1, 1], 1),
        ("new leader has not written yet; follower has a higher epoch", [1, 1], [1, 1, 2, 2], 2),
        ("several stale epochs on the follower", [1, 4, 4, 4], [1, 2, 2, 3, 3], 1),
        ("leader epochs the follower skipped", [1, 1, 2, 3, 3], [1, 1], None),
        ("follower behind with a stale last epoch", [1, 1, 3, 3, 3, 3], [1, 1, 2], 2),
    ],
)
def test_scripted_history_converges(name: str, leader: list[int], follower: list[int], first_cut: int | None) -> None:
    result, rounds, cuts = converge(leader, follower)
    assert result == leader, name
    assert (cuts[0] if cuts else None) == first_cut, (name, cuts)
    assert rounds <= 4, (name, rounds)


def test_never_truncates_below_the_common_prefix() -> None:
    # the records both logs agree on (same offset, same epoch) are never cut
    leader, follower = [1, 1, 2, 2, 4], [1, 1, 2, 3, 3]
    _, _, cuts = converge(leader, follower)
    assert min(cuts) >= 3


def test_end_offset_for_epoch_matches_the_storage_epoch_cache(tmp_path) -> None:
    table = [(1, 0), (3, 5), (4, 9)]
    cache = EpochCache(tmp_path / "cache", list(table))
    for epoch in range(-1, 7):
        assert end_offset_for_epoch(table, epoch, 12) == cache.end_offset_for(epoch, 12), epoch


def test_epoch_of_last_record() -> None:
    assert epoch_of_last_record([], 0) == -1
    assert epoch_of_last_record([(1, 0), (3, 5)], 5) == 1
    assert epoch_of_last_record([(1, 0), (3, 5)], 6) == 3
