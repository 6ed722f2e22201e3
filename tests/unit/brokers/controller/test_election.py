"""Leader election on fence/unfence (clean and unclean)."""
from __future__ import annotations

import pytest

from brokers.controller.election import elect_leader, fence_changes, unfence_changes
from brokers.metadata import records as r
from brokers.metadata.image import PartitionInfo
from spark_log.config import TopicConfig
from tests.unit.brokers.metadata.helpers import broker, build, topic

LIVE = {1, 2, 3}


@pytest.mark.parametrize(
    ("replicas", "isr", "leader", "live", "unclean", "expected"),
    [
        ((1, 2, 3), (1, 2, 3), 1, {1, 2, 3}, False, (1, (1, 2, 3))),  # keep a live leader
        ((1, 2, 3), (2, 3), 1, {2, 3}, False, (2, (2, 3))),  # first live ISR replica
        ((1, 2, 3), (3,), 1, {2, 3}, False, (3, (3,))),
        ((1, 2, 3), (1,), 1, {2, 3}, False, (None, (1,))),  # offline: clean only
        ((1, 2, 3), (1,), 1, {2, 3}, True, (2, (2,))),  # unclean: first live replica
        ((1, 2, 3), (1,), None, set(), True, (None, (1,))),
    ],
)
def test_elect_leader(replicas, isr, leader, live, unclean, expected) -> None:  # type: ignore[no-untyped-def]
    info = PartitionInfo(replicas=replicas, isr=isr, leader=leader)
    assert elect_leader(info, is_live=lambda b: b in live, unclean=unclean) == expected


def test_fence_moves_leadership_and_shrinks_isrs() -> None:
    img = build([broker(1), broker(2), broker(3), *topic("a", [(1, 2, 3), (2, 1, 3), (3, 2)])])
    changes = fence_changes(img, 1)
    assert changes == [
        r.PartitionChangeRecord(topic="a", partition=0, leader=2, isr=(2, 3)),
        r.PartitionChangeRecord(topic="a", partition=1, isr=(2, 3)),
    ]


def test_fencing_the_last_isr_member_goes_offline_or_unclean() -> None:
    base = [broker(1), broker(2), *topic("a", [(1, 2)])]
    img = build([*base, r.PartitionChangeRecord(topic="a", partition=0, isr=(1,))])
    assert fence_changes(img, 1) == [r.PartitionChangeRecord(topic="a", partition=0, leader=r.NO_LEADER)]
    unclean = build([r.ConfigRecord(topic="a", config=TopicConfig(unclean_leader_election_enable=True))], img)
    assert fence_changes(unclean, 1) == [r.PartitionChangeRecord(topic="a", partition=0, leader=2, isr=(2,))]


def test_unfence_brings_offline_partitions_back() -> None:
    img = build([broker(1), broker(2), *topic("a", [(1, 2), (1, 2)])])
    img = build(
        [
            r.PartitionChangeRecord(topic="a", partition=0, leader=r.NO_LEADER, isr=(1,)),
            r.PartitionChangeRecord(topic="a", partition=1, leader=r.NO_LEADER, isr=(1,)),
        ],
        img,
    )
    assert unfence_changes(img, 1) == [
        r.PartitionChangeRecord(topic="a", partition=0, leader=1),
        r.PartitionChangeRecord(topic="a", partition=1, leader=1),
    ]
    assert unfence_changes(img, 2) == []
    unclean = build([r.ConfigRecord(topic="a", config=TopicConfig(unclean_leader_election_enable=True))], img)
    assert unfence_changes(unclean, 2)[0] == r.PartitionChangeRecord(topic="a", partition=0, leader=2, isr=(2,))
