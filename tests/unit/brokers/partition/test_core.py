"""``PartitionCore``: the partition's decisions as a pure state machine (no lock, disk or clock).

The tests drive cores the way a data-plane simulation will: plain values in (log facts as
``LogEnds`` and epoch entries, times as ms), typed decisions out.  ``MemLog`` is the only
"log": one epoch per offset.  The last test runs a leader and two followers through
produce, follower fetches and a leader change on such logs and checks the replication
invariants of DESIGN.md section 6 (HW = min LEO over the ISR; a former leader's divergent
suffix is truncated; acks=all waits are fenced by the epoch of their append).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from brokers.partition import FollowerFetch, LeaderAndIsr, PartitionCore
from brokers.partition.messages import Append, Diverging, Duplicate, Isolation, LogEnds, SequenceGap
from brokers.partition.producer_state import ProducerRun
from spark_log.errors import (
    FencedEpochError,
    NotEnoughReplicasError,
    NotLeaderError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    UnknownTopicOrPartitionError,
)
from spark_log.frame import FrameHeader


@dataclass
class MemLog:
    """A log as the core sees it: the epoch of each offset, from ``start``."""

    epochs: list[int] = field(default_factory=list)
    start: int = 0

    @property
    def ends(self) -> LogEnds:
        return LogEnds(self.start, self.start + len(self.epochs))

    @property
    def leo(self) -> int:
        return self.start + len(self.epochs)

    def entries(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for i, epoch in enumerate(self.epochs):
            if not out or out[-1][0] != epoch:
                out.append((epoch, self.start + i))
        return out

    def truncate(self, offset: int) -> None:
        del self.epochs[offset - self.start:]


def header(base_offset: int, count: int, *, pid: int = -1, epoch: int = -1, seq: int = -1) -> FrameHeader:
    return FrameHeader(base_offset=base_offset, frame_length=100, partition_leader_epoch=0, crc=0, attributes=0,
                       producer_epoch=epoch, record_count=count, first_timestamp=0, max_timestamp=0,
                       producer_id=pid, base_sequence=seq, schema_id=0)


def core(broker_id: int = 1) -> PartitionCore:
    return PartitionCore(name="t-0", broker_id=broker_id)


def leading(log: MemLog, *, isr: tuple[int, ...] = (1, 2, 3), epoch: int = 5, now_ms: int = 1_000) -> PartitionCore:
    c = core()
    c.become(LeaderAndIsr(leader_id=1, leader_epoch=epoch, partition_epoch=7, replicas=(1, 2, 3), isr=isr),
             log.ends, now_ms)
    return c


def fetch(replica: int, offset: int, *, epoch: int = 5, last_epoch: int = -1) -> FollowerFetch:
    return FollowerFetch(replica_id=replica, fetch_offset=offset, current_leader_epoch=epoch,
                         last_fetched_epoch=last_epoch)


def append(c: PartitionCore, log: MemLog, count: int, run: ProducerRun | None = None) -> int:
    """Append ``count`` records in the leader's epoch as the shell would; returns the first offset."""
    run = run or ProducerRun(-1, -1, -1, count)
    first = log.leo
    log.epochs += [c.leader_epoch] * count
    c.on_leader_append(run, [header(first, count, pid=run.producer_id, epoch=run.producer_epoch,
                                    seq=run.first_sequence)], first, log.leo)
    return first


# -- high watermark and last stable offset ----------------------------------------------------

def test_rf1_hw_follows_the_leo_and_lso_is_the_hw() -> None:
    log = MemLog([5] * 4)
    c = core()
    c.become(LeaderAndIsr(leader_id=1, leader_epoch=5, replicas=(1,), isr=(1,)), log.ends, 0)
    assert c.high_watermark(log.leo) == 4
    append(c, log, 3)
    offsets = c.offsets(log.ends)
    assert (offsets.log_start_offset, offsets.high_watermark, offsets.last_stable_offset,
            offsets.log_end_offset) == (0, 7, 7, 7)
    assert c.read_bound(Isolation.READ_UNCOMMITTED, log.leo, None) == 7
    assert c.read_bound(Isolation.READ_COMMITTED, log.leo, 5) == 5


def test_hw_is_the_min_leo_over_the_isr_once_each_member_fetched_in_the_epoch() -> None:
    log = MemLog([5] * 10)
    c = leading(log)
    assert c.high_watermark(log.leo) == 0
    assert not c.on_follower_fetch(fetch(2, 10), log.ends, log.entries(), 1_001).hw_grew
    decision = c.on_follower_fetch(fetch(3, 6), log.ends, log.entries(), 1_002)
    assert (decision.hw_grew, decision.high_watermark, decision.diverging) == (True, 6, None)


# -- produce ----------------------------------------------------------------------------------

def test_produce_is_refused_off_the_leader_and_once_removed() -> None:
    log = MemLog()
    follower = core(2)
    follower.become(LeaderAndIsr(leader_id=1, leader_epoch=5, replicas=(1, 2), isr=(1, 2)), log.ends, 0)
    with pytest.raises(NotLeaderError, match="no longer leads t-0"):
        follower.decide_produce(ProducerRun(-1, -1, -1, 1))
    c = leading(log)
    c.close()
    with pytest.raises(UnknownTopicOrPartitionError, match="removed"):
        c.decide_produce(ProducerRun(-1, -1, -1, 1))


@pytest.mark.parametrize(("required", "outcome"), [
    (-1, Append()), (5, Append()), (4, FencedEpochError), (6, NotLeaderError),
], ids=["unchecked", "current", "stale", "unseen"])
def test_produce_epoch_fencing(required: int, outcome: object) -> None:
    c = leading(MemLog())
    run = ProducerRun(-1, -1, -1, 1)
    if isinstance(outcome, type):
        with pytest.raises(outcome):
            c.decide_produce(run, required_leader_epoch=required)
    else:
        assert c.decide_produce(run, required_leader_epoch=required) == outcome


def test_acks_all_needs_min_insync_replicas() -> None:
    c = leading(MemLog(), isr=(1, 2))
    run = ProducerRun(-1, -1, -1, 1)
    assert c.decide_produce(run, min_insync_replicas=2) == Append()
    with pytest.raises(NotEnoughReplicasError, match="min.insync.replicas=3"):
        c.decide_produce(run, min_insync_replicas=3)


def test_producer_sequences_append_duplicate_gap_fenced_out_of_order() -> None:
    log = MemLog()
    c = leading(log, isr=(1,))
    assert c.decide_produce(ProducerRun(7, 0, 0, 3)) == Append()
    append(c, log, 3, ProducerRun(7, 0, 0, 3))
    append(c, log, 2)                                                  # someone else: offsets 3..4
    assert c.decide_produce(ProducerRun(7, 0, 0, 3)) == Duplicate(0, 2)
    assert c.decide_produce(ProducerRun(7, 0, 5, 1)) == SequenceGap()
    assert "the last appended is 2 in epoch 0" in c.sequence_gap_error(ProducerRun(7, 0, 5, 1)).message
    assert c.decide_produce(ProducerRun(7, 0, 3, 1)) == Append()
    with pytest.raises(OutOfOrderSequenceError):
        c.decide_produce(ProducerRun(7, 0, 2, 2))                      # straddles the last sequence
    assert c.decide_produce(ProducerRun(7, 1, 0, 1)) == Append()      # a new epoch starts at 0
    append(c, log, 1, ProducerRun(7, 1, 0, 1))
    with pytest.raises(FencedEpochError):
        c.decide_produce(ProducerRun(7, 0, 3, 1))


def test_an_acks_all_wait_is_fenced_by_the_epoch_of_its_append() -> None:
    log = MemLog()
    c = leading(log, isr=(1, 2))
    append(c, log, 5)
    assert not c.replicated(4, 5, log.leo)
    c.become(LeaderAndIsr(leader_id=1, leader_epoch=6, replicas=(1, 2), isr=(1,)), log.ends, 2_000)
    assert c.replicated(4, 6, log.leo)
    with pytest.raises(NotLeaderError, match="not acknowledged"):
        c.replicated(4, 5, log.leo)


# -- follower fetches at the leader -----------------------------------------------------------

def test_follower_fetch_fencing_and_membership() -> None:
    log = MemLog([5] * 3)
    c = leading(log)
    with pytest.raises(FencedEpochError, match="stale"):
        c.on_follower_fetch(fetch(2, 0, epoch=4), log.ends, log.entries(), 0)
    with pytest.raises(NotLeaderError, match="not seen leader epoch 6"):
        c.on_follower_fetch(fetch(2, 0, epoch=6), log.ends, log.entries(), 0)
    with pytest.raises(NotLeaderError, match="not a replica"):
        c.on_follower_fetch(fetch(9, 0), log.ends, log.entries(), 0)
    log.start = 2
    log.epochs = [5]
    with pytest.raises(OffsetOutOfRangeError, match="below the log start"):
        c.on_follower_fetch(fetch(2, 0), log.ends, log.entries(), 0)


def test_a_diverging_follower_gets_the_epoch_end_and_is_not_counted() -> None:
    log = MemLog([1, 1, 3, 3])
    c = leading(log, epoch=5)
    decision = c.on_follower_fetch(fetch(2, 3, last_epoch=2), log.ends, log.entries(), 1_001)
    assert decision.diverging == Diverging(1, 2) and not decision.hw_grew
    assert c.replica_view(log.leo, 1_001).log_end_offsets[2] == -1


def test_a_caught_up_follower_outside_the_isr_is_an_expand_candidate_once() -> None:
    log = MemLog([5] * 4)
    c = leading(log, isr=(1, 2))
    c.on_follower_fetch(fetch(2, 4), log.ends, log.entries(), 1_001)
    assert c.on_follower_fetch(fetch(3, 4), log.ends, log.entries(), 1_002).expand_candidate
    change = c.isr_change(1_003, 10_000)
    assert change is not None and (change.isr, change.new_isr, change.caught_up) == ((1, 2), (1, 2, 3), (3,))
    assert not c.on_follower_fetch(fetch(3, 4), log.ends, log.entries(), 1_004).expand_candidate  # in flight
    c.clear_pending_isr()
    assert c.on_follower_fetch(fetch(3, 4), log.ends, log.entries(), 1_005).expand_candidate


def test_isr_shrink_candidates_after_the_lag_time() -> None:
    log = MemLog([5] * 4)
    c = leading(log, now_ms=1_000)
    c.on_follower_fetch(fetch(2, 4), log.ends, log.entries(), 5_000)
    c.on_follower_fetch(fetch(3, 1), log.ends, log.entries(), 5_000)   # fetching, but behind
    assert c.isr_change(10_000, 10_000) is None
    change = c.isr_change(11_001, 10_000)
    assert change is not None
    assert (change.leader_epoch, change.partition_epoch, change.new_isr, change.out_of_sync) == (5, 7, (1, 2), (3,))


# -- following --------------------------------------------------------------------------------

def test_fetch_position_and_follows() -> None:
    log = MemLog([1, 1, 4])
    c = core(2)
    assert c.fetch_position(1, log.ends, log.entries()) is None                # follows nobody yet
    c.become(LeaderAndIsr(leader_id=1, leader_epoch=6, replicas=(1, 2), isr=(1, 2)), log.ends, 0)
    position = c.fetch_position(1, log.ends, log.entries())
    assert position is not None
    assert (position.fetch_offset, position.current_leader_epoch, position.last_fetched_epoch) == (3, 6, 4)
    assert c.fetch_position(3, log.ends, log.entries()) is None
    assert c.follows(1, 6) and not c.follows(1, 5) and not c.follows(3, 6)
    c.close()
    assert not c.follows(1, 6)


def test_truncation_forgets_producer_state_and_caps_the_hw() -> None:
    log = MemLog([1] * 6)
    c = core(2)
    c.become(LeaderAndIsr(leader_id=1, leader_epoch=1, replicas=(1, 2), isr=(1, 2)), log.ends, 0)
    c.record_frames([header(0, 6, pid=7, epoch=0, seq=0)])
    c.on_leader_high_watermark(6, log.leo)
    assert c.high_watermark(log.leo) == 6
    log.truncate(c.truncation_offset(Diverging(0, 4), log.leo, log.entries()))
    assert log.leo == 0                                                   # it never had epoch 0
    c.on_truncated(log.leo)
    c.become(LeaderAndIsr(leader_id=2, leader_epoch=2, replicas=(1, 2), isr=(2,)), log.ends, 0)
    assert c.high_watermark(log.leo) == 0
    assert c.decide_produce(ProducerRun(7, 0, 6, 1)) == SequenceGap()    # producer 7 forgotten


# -- a leader and two followers, driven like a simulation ------------------------------------

def _replicate(leader: PartitionCore, leader_log: MemLog, follower: PartitionCore, follower_log: MemLog,
               now_ms: int) -> None:
    """One fetch round trip of ``follower`` (broker id = its core's) from ``leader``."""
    position = follower.fetch_position(1, follower_log.ends, follower_log.entries())
    assert position is not None
    decision = leader.on_follower_fetch(
        FollowerFetch(follower.broker_id, position.fetch_offset, position.current_leader_epoch,
                      position.last_fetched_epoch), leader_log.ends, leader_log.entries(), now_ms)
    assert follower.follows(1, position.current_leader_epoch)
    if decision.diverging is not None:
        follower_log.truncate(follower.truncation_offset(decision.diverging, follower_log.leo, follower_log.entries()))
        follower.on_truncated(follower_log.leo)
        return
    new = leader_log.epochs[position.fetch_offset - leader_log.start:]
    follower_log.epochs += new
    follower.on_leader_high_watermark(decision.high_watermark, follower_log.leo)


def test_three_replicas_converge_and_the_hw_is_what_every_isr_member_holds() -> None:
    logs = {b: MemLog() for b in (1, 2, 3)}
    cores = {b: core(b) for b in (1, 2, 3)}
    state = LeaderAndIsr(leader_id=1, leader_epoch=1, replicas=(1, 2, 3), isr=(1, 2, 3))
    for b in (1, 2, 3):
        cores[b].become(state, logs[b].ends, 0)
    leader, now = cores[1], 0
    for round_ in range(5):
        append(leader, logs[1], 3)
        for b in (2, 3):
            now += 1
            _replicate(leader, logs[1], cores[b], logs[b], now)
            hw = leader.high_watermark(logs[1].leo)
            assert all(logs[m].leo >= hw for m in (1, 2, 3)), f"round {round_}: HW {hw} past an ISR member's log"
    for b in (2, 3):
        _replicate(leader, logs[1], cores[b], logs[b], now)
    assert leader.high_watermark(logs[1].leo) == 15
    assert logs[2].epochs == logs[3].epochs == logs[1].epochs

    # broker 1 appends records only it holds, then broker 2 takes over in epoch 2
    append(leader, logs[1], 4)
    state = LeaderAndIsr(leader_id=2, leader_epoch=2, replicas=(1, 2, 3), isr=(2, 3))
    for b in (1, 2, 3):
        cores[b].become(state, logs[b].ends, now)
    assert not leader.is_leader
    with pytest.raises(NotLeaderError):
        leader.replicated(logs[1].leo - 1, 1, logs[1].leo)               # never acknowledged
    new_leader = cores[2]
    logs[2].epochs += [2] * 2
    new_leader.on_leader_append(ProducerRun(-1, -1, -1, 2), [header(15, 2)], 15, logs[2].leo)
    position = cores[1].fetch_position(2, logs[1].ends, logs[1].entries())
    assert position is not None and position.last_fetched_epoch == 1
    decision = new_leader.on_follower_fetch(
        FollowerFetch(1, position.fetch_offset, 2, position.last_fetched_epoch), logs[2].ends, logs[2].entries(), now)
    assert decision.diverging == Diverging(1, 15)
    cut = cores[1].truncation_offset(decision.diverging, logs[1].leo, logs[1].entries())
    logs[1].truncate(cut)
    assert logs[1].epochs == logs[2].epochs[:15]


# -- regressions found by the fault tests ----------------------------------------------------

def test_a_new_leader_answers_offset_not_available_until_its_hw_reaches_its_epoch_start() -> None:
    """The lost write of ``test_isolated_old_leader_cannot_acknowledge_and_truncates_after_healing``
    (KIP-207): broker 1 follows broker 2, holds offsets 0..60 but knows HW 56 (the HW that
    acknowledged 56..60 reached it with no fetch answer yet), then a preferred-leader election
    makes it leader.  Its HW is still 56; "latest" must not be answered as 56, which hides
    acknowledged records 56..60 from a reader that stops at "latest"."""
    log = MemLog([3] * 61)
    c = core(1)
    c.become(LeaderAndIsr(leader_id=2, leader_epoch=3, partition_epoch=5, replicas=(1, 2, 3), isr=(1, 2, 3)),
             log.ends, 0)
    c.on_leader_high_watermark(56, log.leo)
    assert c.listable_offsets(log.ends).high_watermark == 56      # a follower answers what it knows
    c.become(LeaderAndIsr(leader_id=1, leader_epoch=4, partition_epoch=6, replicas=(1, 2, 3), isr=(1, 2, 3)),
             log.ends, 1_000)
    assert c.high_watermark(log.leo) == 56
    with pytest.raises(OffsetNotAvailableError, match="start of its epoch"):
        c.listable_offsets(log.ends)
    c.on_follower_fetch(fetch(2, 61, epoch=4, last_epoch=3), log.ends, log.entries(), 1_001)
    with pytest.raises(OffsetNotAvailableError):
        c.listable_offsets(log.ends)
    c.on_follower_fetch(fetch(3, 61, epoch=4, last_epoch=3), log.ends, log.entries(), 1_002)
    assert c.listable_offsets(log.ends).high_watermark == 61      # every ISR member fetched in epoch 4


def test_an_expansion_counts_in_the_hw_until_the_image_settles_it() -> None:
    """An expansion the controller accepted is in its ISR before this leader's image shows
    it; the next check asks again on the old partition epoch and is fenced as stale.  The
    joiner must stay counted (``clear_pending_isr`` is for definite refusals only), or the
    HW passes records the joiner lacks while a preferred-leader election may already make
    it leader.  The image's new partition epoch settles it."""
    log = MemLog([5] * 10)
    c = leading(log, isr=(1, 2))
    c.on_follower_fetch(fetch(2, 10), log.ends, log.entries(), 1_001)
    c.on_follower_fetch(fetch(3, 10), log.ends, log.entries(), 1_002)       # 3 caught up: expandable
    change = c.isr_change(1_003, lag_ms=10_000)
    assert change is not None and change.caught_up == (3,) and change.new_isr == (1, 2, 3)
    # the controller commits it (partition epoch 7 -> 8); our image still shows epoch 7
    again = c.isr_change(1_500, lag_ms=10_000)                               # the next check
    assert again is not None and again.partition_epoch == 7                  # fenced as stale: no clear
    append(c, log, 5)
    c.on_follower_fetch(fetch(2, 15), log.ends, log.entries(), 1_600)
    assert c.high_watermark(log.leo) == 10, "the HW passed records joiner 3 lacks while it may be in the ISR"
    c.become(LeaderAndIsr(leader_id=1, leader_epoch=5, partition_epoch=8, replicas=(1, 2, 3), isr=(1, 2, 3)),
             log.ends, 1_700)
    assert c.isr == (1, 2, 3) and c.replica_view(log.leo, 1_700).pending_isr == ()
    c.on_follower_fetch(fetch(3, 15), log.ends, log.entries(), 1_800)
    assert c.high_watermark(log.leo) == 15


def test_a_new_partition_epoch_in_the_image_drops_an_expansion_it_does_not_show() -> None:
    """The image moved to a new partition epoch without the joiner (another change won):
    the request built on the old epoch can no longer be applied, so it stops counting."""
    log = MemLog([5] * 10)
    c = leading(log, isr=(1, 2))
    c.on_follower_fetch(fetch(2, 10), log.ends, log.entries(), 1_001)
    c.on_follower_fetch(fetch(3, 10), log.ends, log.entries(), 1_002)
    assert c.isr_change(1_003, lag_ms=10_000) is not None
    c.become(LeaderAndIsr(leader_id=1, leader_epoch=5, partition_epoch=8, replicas=(1, 2, 3), isr=(1, 2)),
             log.ends, 1_100)
    assert c.replica_view(log.leo, 1_100).pending_isr == ()
    append(c, log, 5)
    c.on_follower_fetch(fetch(2, 15), log.ends, log.entries(), 1_200)
    assert c.high_watermark(log.leo) == 15
