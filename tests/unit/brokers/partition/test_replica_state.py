"""ReplicaState: HW = min LEO over the ISR, caught-up tracking, shrink and expand candidates."""
from __future__ import annotations

from brokers.partition.replica_state import ReplicaState


def leader(isr=(1, 2, 3), leo=10, hw=0) -> ReplicaState:
    state = ReplicaState(broker_id=1, high_watermark=hw)
    state.become_leader(leader_epoch=5, partition_epoch=7, replicas=(1, 2, 3), isr=isr, log_end_offset=leo,
                        log_start_offset=0, now_ms=1000)
    return state


def test_rf1_hw_is_the_leo() -> None:
    state = ReplicaState(broker_id=1)
    state.become_leader(leader_epoch=0, partition_epoch=0, replicas=(1,), isr=(1,), log_end_offset=4,
                        log_start_offset=0, now_ms=0)
    assert state.high_watermark == 4
    assert state.maybe_advance(9) and state.high_watermark == 9


def test_hw_waits_for_every_isr_member_then_is_the_min() -> None:
    state = leader()
    assert state.high_watermark == 0
    assert not state.on_follower_fetch(2, fetch_offset=10, log_end_offset=10, now_ms=1001)
    assert state.high_watermark == 0          # 3 has not fetched in this epoch
    assert state.on_follower_fetch(3, fetch_offset=6, log_end_offset=10, now_ms=1002)
    assert state.high_watermark == 6
    assert state.on_follower_fetch(3, fetch_offset=10, log_end_offset=10, now_ms=1003)
    assert state.high_watermark == 10


def test_hw_ignores_followers_outside_the_isr_and_never_goes_back() -> None:
    state = leader(isr=(1, 2))
    state.on_follower_fetch(3, fetch_offset=0, log_end_offset=10, now_ms=1001)
    state.on_follower_fetch(2, fetch_offset=8, log_end_offset=10, now_ms=1001)
    assert state.high_watermark == 8
    state.on_follower_fetch(2, fetch_offset=5, log_end_offset=10, now_ms=1002)   # after a truncation
    assert state.high_watermark == 8


def test_new_leader_starts_from_its_follower_hw_not_its_leo() -> None:
    state = ReplicaState(broker_id=1)
    state.become_follower(leader_epoch=4, partition_epoch=3, replicas=(1, 2, 3), isr=(1, 2, 3), log_end_offset=10)
    state.on_leader_high_watermark(7, 10)
    state.become_leader(leader_epoch=5, partition_epoch=4, replicas=(1, 2, 3), isr=(1, 2), log_end_offset=10,
                        log_start_offset=0, now_ms=0)
    assert state.high_watermark == 7
    state.on_follower_fetch(2, fetch_offset=10, log_end_offset=10, now_ms=1)
    assert state.high_watermark == 10


def test_out_of_sync_after_lag_and_caught_up_resets_it() -> None:
    state = leader()
    state.on_follower_fetch(2, fetch_offset=10, log_end_offset=10, now_ms=2000)
    state.on_follower_fetch(3, fetch_offset=4, log_end_offset=10, now_ms=2000)   # fetching, but behind
    assert state.out_of_sync(now_ms=1500, lag_ms=1000) == ()
    assert state.out_of_sync(now_ms=2500, lag_ms=1000) == (3,)
    state.on_follower_fetch(3, fetch_offset=10, log_end_offset=10, now_ms=2600)
    assert state.out_of_sync(now_ms=2700, lag_ms=1000) == ()


def test_expandable_needs_hw_and_epoch_start() -> None:
    state = leader(isr=(1, 2), leo=10)
    state.on_follower_fetch(2, fetch_offset=10, log_end_offset=10, now_ms=1001)
    assert state.high_watermark == 10
    state.on_follower_fetch(3, fetch_offset=9, log_end_offset=10, now_ms=1001)
    assert state.expandable() == ()
    state.on_follower_fetch(3, fetch_offset=10, log_end_offset=10, now_ms=1002)
    assert state.expandable() == (3,)


def test_a_follower_that_stopped_fetching_is_not_expandable_on_its_old_position() -> None:
    """Issue 19: a follower killed while caught up keeps its last LEO on the leader; on an
    idle partition that LEO stays at the HW, and the ISR updater used to add it back every
    other check (the controller accepts once the restarted broker is unfenced) and drop it
    a check later, as long as the restarted broker had not fetched: flapping ISRs."""
    state = leader(isr=(1, 2), leo=10)
    state.on_follower_fetch(2, fetch_offset=10, log_end_offset=10, now_ms=1001)
    state.on_follower_fetch(3, fetch_offset=10, log_end_offset=10, now_ms=1002)
    assert state.expandable(now_ms=1500, lag_ms=1000) == (3,)
    assert state.expandable(now_ms=2003, lag_ms=1000) == ()
    state.on_follower_fetch(3, fetch_offset=10, log_end_offset=10, now_ms=2500)
    assert state.expandable(now_ms=2600, lag_ms=1000) == (3,)


def test_follower_hw_is_capped_by_its_leo_and_followers_compute_nothing() -> None:
    state = ReplicaState(broker_id=2)
    state.become_follower(leader_epoch=1, partition_epoch=1, replicas=(1, 2), isr=(1, 2), log_end_offset=3)
    state.on_leader_high_watermark(9, 3)
    assert state.high_watermark == 3
    assert not state.on_follower_fetch(1, fetch_offset=3, log_end_offset=3, now_ms=0)
    assert state.out_of_sync(now_ms=10**9, lag_ms=1) == () and state.expandable() == ()


def test_same_epoch_metadata_update_keeps_positions() -> None:
    state = leader()
    state.on_follower_fetch(2, fetch_offset=10, log_end_offset=10, now_ms=1001)
    state.become_leader(leader_epoch=5, partition_epoch=8, replicas=(1, 2, 3), isr=(1, 2), log_end_offset=10,
                        log_start_offset=0, now_ms=1002)
    assert state.high_watermark == 10 and state.partition_epoch == 8


def test_pending_expansion_holds_the_hw_for_the_joining_member() -> None:
    state = leader(isr=(1, 2), leo=10)
    state.on_follower_fetch(2, fetch_offset=10, log_end_offset=10, now_ms=1001)
    state.on_follower_fetch(3, fetch_offset=10, log_end_offset=10, now_ms=1001)
    state.pending_isr = (1, 2, 3)
    state.on_follower_fetch(2, fetch_offset=15, log_end_offset=15, now_ms=1002)
    assert state.high_watermark == 10          # 3 has not got 10..14 yet
    state.become_leader(leader_epoch=5, partition_epoch=8, replicas=(1, 2, 3), isr=(1, 2, 3), log_end_offset=15,
                        log_start_offset=0, now_ms=1003)
    assert state.pending_isr == ()
