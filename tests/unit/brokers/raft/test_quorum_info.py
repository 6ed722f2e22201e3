"""The leader's view of the quorum (``RaftCore.describe_quorum``, ``quorum_info.FetchWatch``):
Kafka's DescribeQuorum (KIP-595 "DescribeQuorum", KIP-836 last fetch / caught-up times)."""
from __future__ import annotations

import pytest

from brokers.raft.quorum_info import OBSERVER_TIMEOUT_MS, FetchWatch, ReplicaProgress
from spark_log.errors import NotControllerError
from tests.unit.brokers.raft.test_core import CFG, Net


def _rounds(net: Net, count: int, nodes: tuple[int, ...]) -> None:
    """Tick ``nodes``; messages to or from any other node are lost."""
    for _ in range(count):
        for node in nodes:
            net.tick(node)
        net.deliver(keep=lambda m: m.src in nodes and m.dst in nodes)


def test_leader_reports_voters_observers_and_lag() -> None:
    """KIP-595: the leader tracks each replica's fetch offset; a voter that stops fetching
    keeps its last offset and falls behind by what the leader appended since."""
    net = Net([1, 2, 3], observers=(9,))
    net.campaign(1)
    net.deliver()
    _rounds(net, 5, (1, 2, 3, 9))
    leader = net.cores[1]
    info = leader.describe_quorum()
    assert (info.leader_id, info.epoch) == (1, 1)
    assert [v.node_id for v in info.voters] == [1, 2, 3] and [o.node_id for o in info.observers] == [9]
    end = leader.log.end_offset
    assert info.leader_end_offset == end and info.high_watermark == end
    assert all(r.log_end_offset == end for r in info.voters + info.observers), info
    assert info.voters[0] == ReplicaProgress(1, end, 0, 0)
    assert all(r.last_caught_up_age_ms is not None for r in info.voters + info.observers)

    # node 3 goes silent; the leader appends: 3 lags by exactly what was appended since
    leader.propose([b"a", b"b", b"c"])
    net.drain(1)
    _rounds(net, 3, (1, 2, 9))
    info = leader.describe_quorum()
    by_id = {r.node_id: r for r in info.voters + info.observers}
    assert by_id[2].log_end_offset == leader.log.end_offset == by_id[9].log_end_offset
    assert by_id[3].log_end_offset == end == leader.log.end_offset - 3
    stale = by_id[3].last_fetch_age_ms
    assert stale is not None and stale >= 3 * CFG.tick_ms


def test_followers_refuse_and_name_the_leader() -> None:
    net = Net([1, 2, 3])
    net.campaign(2)
    net.deliver()
    with pytest.raises(NotControllerError) as info:
        net.cores[1].describe_quorum()
    assert info.value.details["leader_id"] == 2


def test_a_new_leader_knows_nothing_until_replicas_fetch() -> None:
    """Fresh progress per epoch (Kafka's LeaderState): voters that have not fetched from the
    new leader show no log end offset, not the old leader's numbers."""
    net = Net([1, 2, 3])
    net.campaign(1)
    net.deliver(keep=lambda m: type(m).__name__ != "FetchRequest")
    info = net.cores[1].describe_quorum()
    assert [(v.node_id, v.log_end_offset, v.last_fetch_age_ms) for v in info.voters[1:]] == [(2, None, None),
                                                                                            (3, None, None)]


def test_caught_up_follows_kafkas_rule() -> None:
    """KIP-836 lastCaughtUpTimestamp: caught up now when fetching at the leader's end;
    caught up as of the previous fetch when it reaches the end the leader had then."""
    watch = FetchWatch()
    watch.on_valid_fetch(2, 10, leader_end=10, now=5)
    assert watch.caught_up[2] == 5
    watch.on_valid_fetch(2, 10, leader_end=20, now=8)   # behind: still caught up as of tick 5
    assert watch.caught_up[2] == 5
    watch.on_valid_fetch(2, 20, leader_end=30, now=12)  # reached the end of tick 8: caught up as of 8
    assert watch.caught_up[2] == 8
    watch.on_valid_fetch(2, 25, leader_end=40, now=15)  # short of 30: no change
    assert watch.caught_up[2] == 8


def test_silent_observers_are_dropped() -> None:
    watch = FetchWatch()
    watch.on_valid_fetch(9, 0, leader_end=0, now=0)
    watch.on_valid_fetch(2, 0, leader_end=0, now=0)
    late = OBSERVER_TIMEOUT_MS // CFG.tick_ms + 1
    info = watch.describe(leader_id=1, epoch=1, voters=(1, 2), high_watermark=0, leader_end=0, now=late,
                          tick_ms=CFG.tick_ms)
    assert [o.node_id for o in info.observers] == [] and [v.node_id for v in info.voters] == [1, 2]
    info = watch.describe(leader_id=1, epoch=1, voters=(1, 2), high_watermark=0, leader_end=0, now=late - 2,
                          tick_ms=CFG.tick_ms)
    assert [o.node_id for o in info.observers] == [9]
