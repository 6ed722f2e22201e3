"""Server-side assignors (brokers/groups/assignors.py): table tests of balance, stickiness,
eligibility and determinism.  KIP-848 names them ``uniform`` and ``range``."""
from __future__ import annotations

import itertools
import random
from typing import Collection, Mapping

import pytest

from brokers.groups.assignors import assign, range_assign, uniform
from spark_log.errors import UnsupportedAssignorError


def _owners(result: dict[str, frozenset[tuple[str, int]]]) -> dict[tuple[str, int], str]:
    owners: dict[tuple[str, int], str] = {}
    for member, parts in result.items():
        for tp in parts:
            assert tp not in owners, f"{tp} given to {owners[tp]} and {member}"
            owners[tp] = member
    return owners


def _check_complete(result: dict[str, frozenset[tuple[str, int]]], subscriptions: Mapping[str, Collection[str]],
                    partitions: Mapping[str, int]) -> None:
    owners = _owners(result)
    wanted = {(t, p) for ts in subscriptions.values() for t in ts if t in partitions for p in range(partitions[t])}
    assert set(owners) == wanted
    for tp, member in owners.items():
        assert tp[0] in subscriptions[member], f"{member} got {tp} without subscribing to {tp[0]}"


@pytest.mark.parametrize("members,parts", [(1, 6), (2, 6), (3, 6), (4, 6), (6, 6), (7, 6), (5, 23), (20, 40)])
def test_uniform_balances_identical_subscriptions(members: int, parts: int) -> None:
    subs = {f"m{i:02d}": frozenset({"t"}) for i in range(members)}
    result = uniform(subs, {"t": parts}, {})
    _check_complete(result, subs, {"t": parts})
    counts = sorted(len(v) for v in result.values())
    assert counts[-1] - counts[0] <= 1
    assert counts[-1] == -(-parts // members)


def test_uniform_join_moves_only_what_balance_needs() -> None:
    subs = {"a": frozenset({"t"}), "b": frozenset({"t"})}
    before = uniform(subs, {"t": 6}, {})
    subs3 = {**subs, "c": frozenset({"t"})}
    after = uniform(subs3, {"t": 6}, before)
    _check_complete(after, subs3, {"t": 6})
    assert [len(after[m]) for m in "abc"] == [2, 2, 2]
    # a and b keep 2 of their 3 each: exactly two partitions move, both to c
    assert after["a"] <= before["a"] and after["b"] <= before["b"]
    assert len(after["c"]) == 2


def test_uniform_leave_keeps_the_survivors_partitions() -> None:
    subs = {m: frozenset({"t"}) for m in "abc"}
    before = uniform(subs, {"t": 6}, {})
    subs2 = {m: subs[m] for m in "ab"}
    after = uniform(subs2, {"t": 6}, {m: before[m] for m in "ab"})
    assert before["a"] <= after["a"] and before["b"] <= after["b"]
    assert sorted(len(v) for v in after.values()) == [3, 3]


def test_uniform_heterogeneous_subscriptions_respect_eligibility() -> None:
    subs = {"a": frozenset({"x"}), "b": frozenset({"x", "y"}), "c": frozenset({"y"})}
    parts = {"x": 4, "y": 4}
    result = uniform(subs, parts, {})
    _check_complete(result, subs, parts)
    assert sorted(len(v) for v in result.values()) == [2, 3, 3]


def test_uniform_ignores_topics_without_partitions_and_members_without_subscriptions() -> None:
    subs = {"a": frozenset({"missing"}), "b": frozenset()}
    assert uniform(subs, {"t": 3}, {}) == {"a": frozenset(), "b": frozenset()}


def test_uniform_drops_previous_partitions_that_no_longer_exist() -> None:
    subs = {"a": frozenset({"t"})}
    result = uniform(subs, {"t": 2}, {"a": frozenset({("t", 0), ("t", 5), ("gone", 0)})})
    assert result == {"a": frozenset({("t", 0), ("t", 1)})}


def test_uniform_is_deterministic_whatever_the_input_order() -> None:
    rng = random.Random(7)
    names = [f"m{i}" for i in range(8)]
    subs = {m: frozenset(rng.sample(["a", "b", "c"], rng.randint(1, 3))) for m in names}
    parts = {"a": 5, "b": 7, "c": 3}
    expected = uniform(subs, parts, {})
    for order in itertools.islice(itertools.permutations(names), 5):
        assert uniform({m: subs[m] for m in order}, dict(reversed(list(parts.items()))), {}) == expected
    _check_complete(expected, subs, parts)


@pytest.mark.parametrize("seed", range(20))
def test_uniform_random_churn_stays_valid_and_balanced(seed: int) -> None:
    """Random joins and leaves with identical subscriptions: always complete, balanced
    within one, and a surviving member never loses a partition it can keep."""
    rng = random.Random(seed)
    parts = {"t": rng.randint(1, 30), "u": rng.randint(1, 10)}
    members: dict[str, frozenset[str]] = {}
    previous: dict[str, frozenset[tuple[str, int]]] = {}
    for step in range(15):
        if members and rng.random() < 0.4:
            members.pop(rng.choice(sorted(members)))
        else:
            members[f"m{step}"] = frozenset({"t", "u"})
        if not members:
            continue
        result = uniform(members, parts, {m: previous.get(m, frozenset()) for m in members})
        _check_complete(result, members, parts)
        counts = [len(v) for v in result.values()]
        assert max(counts) - min(counts) <= 1
        quota = -(-sum(parts.values()) // len(members))
        for m in members:
            kept = previous.get(m, frozenset()) & result[m]
            assert len(kept) >= min(len(previous.get(m, frozenset())), quota - 1)
        previous = result


def test_range_gives_contiguous_ranges_first_members_one_more() -> None:
    subs = {"b": frozenset({"t"}), "a": frozenset({"t"}), "c": frozenset({"t"})}
    result = range_assign(subs, {"t": 7}, {})
    assert result == {"a": frozenset({("t", 0), ("t", 1), ("t", 2)}), "b": frozenset({("t", 3), ("t", 4)}),
                      "c": frozenset({("t", 5), ("t", 6)})}


def test_range_co_partitions_topics() -> None:
    subs = {"a": frozenset({"x", "y"}), "b": frozenset({"x", "y"})}
    result = range_assign(subs, {"x": 4, "y": 4}, {})
    for member in "ab":
        assert {p for t, p in result[member] if t == "x"} == {p for t, p in result[member] if t == "y"}


def test_range_only_subscribers_of_a_topic_share_it() -> None:
    subs = {"a": frozenset({"x"}), "b": frozenset({"y"})}
    result = range_assign(subs, {"x": 2, "y": 3}, {})
    assert result == {"a": frozenset({("x", 0), ("x", 1)}), "b": frozenset({("y", 0), ("y", 1), ("y", 2)})}


def test_assign_by_name_and_unknown_assignor() -> None:
    subs = {"a": frozenset({"t"})}
    assert assign("range", subs, {"t": 1}, {}) == assign("uniform", subs, {"t": 1}, {})
    with pytest.raises(UnsupportedAssignorError):
        assign("sticky", subs, {"t": 1}, {})
