"""Replica placement: distinct replicas, spread across domains, balanced leaders."""
from __future__ import annotations

from collections import Counter

import pytest

from brokers.controller.placement import BrokerSlot, interleave_by_domain, place_replicas
from spark_log.errors import InvalidPartitionsError, InvalidReplicationFactorError


def slots(*domains: str) -> list[BrokerSlot]:
    return [BrokerSlot(i, d) for i, d in enumerate(domains)]


@pytest.mark.parametrize(
    ("domains", "partitions", "rf"),
    [
        (("h",) * 3, 3, 3),
        (("h",) * 3, 6, 1),
        (("h",) * 3, 7, 2),
        (("a", "b", "c"), 12, 3),
        (("a", "a", "b", "b"), 8, 2),
        (("a", "a", "b", "b", "c", "c"), 12, 3),
        (("a", "b", "a", "b", "a", "b"), 30, 2),
        (("x",) * 5, 4, 5),
    ],
)
def test_balanced_and_spread(domains: tuple[str, ...], partitions: int, rf: int) -> None:
    brokers = slots(*domains)
    placed = place_replicas(brokers, partitions, rf)
    assert len(placed) == partitions
    domain_of = {s.broker_id: s.domain for s in brokers}
    for replicas in placed:
        assert len(replicas) == rf and len(set(replicas)) == rf
        assert len({domain_of[b] for b in replicas}) == min(rf, len(set(domains)))
    leaders = Counter(replicas[0] for replicas in placed)
    load = Counter(b for replicas in placed for b in replicas)
    all_ids = [s.broker_id for s in brokers]
    assert max(leaders[b] for b in all_ids) - min(leaders[b] for b in all_ids) <= 1
    assert max(load[b] for b in all_ids) - min(load[b] for b in all_ids) <= 1


def test_existing_load_steers_new_leaders() -> None:
    placed = place_replicas(slots("h", "h", "h"), 1, 1, replica_load={0: 4, 1: 4}, leader_load={0: 4, 1: 4})
    assert placed == [(2,)]


def test_successive_topics_spread_leaders() -> None:
    brokers = slots("h", "h", "h")
    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    for _ in range(3):
        (placed,) = place_replicas(brokers, 1, 2, replica_load=replicas, leader_load=leaders)
        leaders[placed[0]] += 1
        replicas.update(placed)
    assert sorted(leaders.values()) == [1, 1, 1]


def test_deterministic() -> None:
    brokers = slots("a", "b", "c", "a")
    assert place_replicas(brokers, 9, 3) == place_replicas(list(reversed(brokers)), 9, 3)


def test_interleave() -> None:
    order = interleave_by_domain(slots("a", "a", "a", "b", "c"))
    assert [s.domain for s in order] == ["a", "b", "c", "a", "a"]


@pytest.mark.parametrize(
    ("partitions", "rf", "error"),
    [(0, 1, InvalidPartitionsError), (1, 0, InvalidReplicationFactorError), (1, 4, InvalidReplicationFactorError)],
)
def test_refusals(partitions: int, rf: int, error: type[Exception]) -> None:
    with pytest.raises(error):
        place_replicas(slots("h", "h", "h"), partitions, rf)
