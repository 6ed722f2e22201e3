"""Enabling ``unclean.leader.election.enable`` elects offline partitions at once (KIP-704 era
Kafka: a dynamic topic config change triggers the election; no fence/unfence is needed)."""
from __future__ import annotations

import itertools

from brokers.controller.controller import QuorumController
from brokers.controller.election import offline_elections
from brokers.metadata import records as r
from spark_log.clock import ManualClock
from tests.unit.brokers.metadata.helpers import broker, build, topic

from .local_raft import LocalRaft


def offline_image():
    img = build([broker(1), broker(2), broker(3, fenced=True), *topic("a", [(1, 2), (3, 2), (2, 1)])])
    return build([r.PartitionChangeRecord(topic="a", partition=0, leader=r.NO_LEADER, isr=(3,)),
                  r.PartitionChangeRecord(topic="a", partition=1, leader=r.NO_LEADER, isr=(3,))], img)


def test_offline_elections_clean_and_unclean() -> None:
    img = offline_image()
    # clean: the only ISR member (3) is fenced, so nothing can lead
    assert offline_elections(img, "a", unclean=False) == []
    # unclean: the first live replica leads with an ISR of itself; the led partition is untouched
    assert offline_elections(img, "a", unclean=True) == [
        r.PartitionChangeRecord(topic="a", partition=0, leader=1, isr=(1,)),
        r.PartitionChangeRecord(topic="a", partition=1, leader=2, isr=(2,)),
    ]
    assert offline_elections(img, "missing", unclean=True) == []


def test_alter_configs_enabling_unclean_elects_out_of_sync_replica() -> None:
    clock = ManualClock()
    ids = (f"topic-{i}" for i in itertools.count())
    c = QuorumController(node_id=1, clock=clock, session_timeout_ms=1000, id_factory=lambda: next(ids))
    LocalRaft(c).win_leadership()
    for b in (1, 2):
        c.register_broker(broker_id=b, incarnation=f"i{b}", address=f"127.0.0.1:{9100 + b}")
    c.create_topic(name="t", partitions=1, replication_factor=2)
    info = c.image.partition("t", 0)
    leader, follower = info.leader, next(b for b in info.replicas if b != info.leader)
    # the follower misses its lease: fenced, out of the ISR
    clock.advance(600)
    c.heartbeat(broker_id=leader, broker_epoch=1)
    clock.advance(600)
    assert c.check_leases() == [follower]
    assert c.image.partition("t", 0).isr == (leader,)
    # then the leader: the partition goes offline (unclean election is off by default)
    clock.advance(1200)
    assert c.check_leases() == [leader]
    c.register_broker(broker_id=follower, incarnation="again", address=f"127.0.0.1:{9100 + follower}")
    offline = c.image.partition("t", 0)
    assert offline.leader is None and offline.isr == (leader,)
    # a config change that does not enable unclean election elects nobody
    c.alter_configs(topic="t", set={"retention.ms": "1000"})
    assert c.image.partition("t", 0).leader is None
    c.alter_configs(topic="t", set={"unclean.leader.election.enable": "true"})
    after = c.image.partition("t", 0)
    assert (after.leader, after.isr) == (follower, (follower,))
    assert after.leader_epoch == offline.leader_epoch + 1
