"""Preferred-leader election: back to the first replica once it is live and in sync."""
from __future__ import annotations

from brokers.metadata import records as r
from brokers.controller.preferred_leader import preferred_leader_changes
from tests.unit.brokers.metadata.helpers import broker, build, topic


def test_balanced_cluster_needs_no_change() -> None:
    img = build([broker(1), broker(2), broker(3), *topic("a", [(1, 2, 3), (2, 3, 1), (3, 1, 2)])])
    assert preferred_leader_changes(img) == []


def test_leadership_returns_only_to_a_live_in_sync_preferred_replica() -> None:
    base = [broker(1), broker(2), broker(3), *topic("a", [(1, 2, 3), (1, 3, 2)])]
    # broker 1 failed: fenced, out of the ISRs, leaders moved to 2 and 3
    img = build([*base, r.FenceBrokerRecord(broker_id=1, broker_epoch=1),
                 r.PartitionChangeRecord(topic="a", partition=0, leader=2, isr=(2, 3)),
                 r.PartitionChangeRecord(topic="a", partition=1, leader=3, isr=(3, 2))])
    assert preferred_leader_changes(img) == []
    back = build([r.UnfenceBrokerRecord(broker_id=1, broker_epoch=1)], img)
    assert preferred_leader_changes(back) == []            # live but not caught up yet
    in_sync = build([r.PartitionChangeRecord(topic="a", partition=0, isr=(2, 3, 1))], back)
    assert preferred_leader_changes(in_sync) == [r.PartitionChangeRecord(topic="a", partition=0, leader=1)]


def test_offline_partitions_are_left_to_the_unfence_path() -> None:
    img = build([broker(1), broker(2), *topic("a", [(1, 2)]),
                 r.PartitionChangeRecord(topic="a", partition=0, leader=r.NO_LEADER)])
    assert preferred_leader_changes(img) == []
