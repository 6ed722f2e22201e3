"""Caught-up tracking under steady load (Kafka's ``Replica.updateFetchState``:
``lastFetchLeaderLogEndOffset`` / ``lastFetchTimeMs``).

A follower that fetches every round and each time reaches the leader's LEO as of its
*previous* fetch keeps up: it is caught up as of that previous fetch, so it is never shrunk
out of the ISR, although under continuous appends it never reaches the LEO of the moment.
"""
from __future__ import annotations

from brokers.partition.core import PartitionCore
from brokers.partition.messages import FollowerFetch, LeaderAndIsr, LogEnds
from brokers.partition.replica_state import ReplicaState

LAG_MS = 30_000


def leader() -> ReplicaState:
    state = ReplicaState(broker_id=1)
    state.become_leader(leader_epoch=5, partition_epoch=7, replicas=(1, 2), isr=(1, 2), log_end_offset=0,
                        log_start_offset=0, now_ms=0)
    return state


def test_reaching_the_leo_of_the_previous_fetch_counts_as_caught_up_then() -> None:
    state = leader()
    state.on_follower_fetch(2, fetch_offset=0, log_end_offset=10, now_ms=1000)   # behind the LEO now
    assert state.followers[2].last_caught_up_ms == 0      # as of becoming leader
    state.on_follower_fetch(2, fetch_offset=10, log_end_offset=20, now_ms=2000)  # reached 10, the LEO at 1000
    assert state.followers[2].last_caught_up_ms == 1000
    state.on_follower_fetch(2, fetch_offset=15, log_end_offset=30, now_ms=2500)  # short of 20, the LEO at 2000
    assert state.followers[2].last_caught_up_ms == 1000
    state.on_follower_fetch(2, fetch_offset=20, log_end_offset=20, now_ms=3000)  # reached the LEO now
    assert state.followers[2].last_caught_up_ms == 3000


def test_a_follower_falling_behind_is_still_shrunk() -> None:
    state = leader()
    leo = 0
    for now in range(1000, 40_000, 1000):
        leo += 10
        state.on_follower_fetch(2, fetch_offset=leo // 2, log_end_offset=leo, now_ms=now)  # half of it only
    assert state.out_of_sync(now_ms=40_000, lag_ms=LAG_MS) == (2,)


def test_a_follower_one_round_behind_under_steady_appends_stays_in_the_isr() -> None:
    """Reviewer's reproduction: 200 rounds of 500 ms, an append between any two fetches."""
    core = PartitionCore(name="t-0", broker_id=1)
    now = 0
    core.become(LeaderAndIsr(leader_id=1, leader_epoch=0, partition_epoch=0, replicas=(1, 2), isr=(1, 2)),
                LogEnds(0, 0), now)
    leo, follower_leo = 0, 0
    for _ in range(200):
        now += 250
        leo += 10
        core.on_follower_fetch(FollowerFetch(2, follower_leo, 0, 0 if follower_leo else -1),
                               LogEnds(0, leo), [(0, 0)], now)
        follower_leo = leo   # the answer brings it up to the LEO of this fetch
        now += 250
        change = core.isr_change(now, LAG_MS)
        assert change is None or 2 not in change.out_of_sync, f"shrunk at {now} ms: {change}"
