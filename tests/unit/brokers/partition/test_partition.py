"""``Partition``, the shell: real logs on disk, the injected clock, checked frames.

- Deadlines (a producer's sequence gap, an acks=all wait) run on the injected clock: with a
  ``ManualClock`` a wait ends when the clock passes its deadline and the partition is
  woken, never by real time passing.
- A frame's CRC is computed once on the leader's produce path (by ``check_frames``), not
  again by the log; raw bytes and follower appends are still verified.
- Two partitions replicate through their typed methods alone (``fetch_position``,
  ``answer_follower_fetch``, ``apply_fetched``), with no gRPC in between.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pytest

import spark_log.frame as frame_module
from brokers.log.append import CheckedFrames, check_frames
from brokers.partition import FetchedData, FollowerFetch, LeaderAndIsr, Partition
from brokers.partition.messages import Isolation
from brokers.partition.producer_state import PRODUCER_ID_EXPIRATION_MS
from spark_log.clock import ManualClock
from spark_log.config import TopicConfig
from spark_log.errors import (
    CorruptRecordError, FencedEpochError, InvalidRequestError, NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
    OutOfOrderSequenceError,
)
from spark_log.frame import encode_batch
from tests.support.segment_closes import removed, watch_closes

ME, FOLLOWER = 1, 2
WATCHED = "watched-by-the-clock"


def _frame(rows: int, *, pid: int = -1, seq: int = -1) -> bytes:
    batch = pa.record_batch({"value": pa.array([b"v" * 10] * rows, pa.binary())})
    return encode_batch(batch, producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                        compression="none")


def _checked(data: bytes) -> CheckedFrames:
    return check_frames(data, max_message_bytes=1 << 20)


class ThreadClock(ManualClock):
    """A ``ManualClock`` that counts the calls made from the thread named ``WATCHED``."""

    def __init__(self) -> None:
        super().__init__(monotonic_ms=0)
        self.watched_calls = 0
        self.called = threading.Condition()

    def monotonic_ms(self) -> int:
        if threading.current_thread().name == WATCHED:
            with self.called:
                self.watched_calls += 1
                self.called.notify_all()
        return super().monotonic_ms()

    def wait_for_calls(self, count: int) -> None:
        with self.called:
            assert self.called.wait_for(lambda: self.watched_calls >= count, timeout=10), \
                f"the watched thread made {self.watched_calls} clock calls, expected {count}"


@pytest.fixture()
def clock() -> ThreadClock:
    return ThreadClock()


def _open(directory: Path, clock: ManualClock, broker_id: int, config: TopicConfig | None = None) -> Partition:
    return Partition(topic="t", partition=0, topic_id="id-t", directory=directory, config=config or TopicConfig(),
                     broker_id=broker_id, clock=clock)


@pytest.fixture()
def leader(tmp_path: Path, clock: ThreadClock) -> Iterator[Partition]:
    partition = _open(tmp_path / "leader", clock, ME)
    partition.become(LeaderAndIsr(leader_id=ME, leader_epoch=1, partition_epoch=1, replicas=(ME, FOLLOWER),
                                  isr=(ME, FOLLOWER)), config=partition.config)
    try:
        yield partition
    finally:
        partition.close()


def _in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)
    thread = threading.Thread(target=run, name=WATCHED, daemon=True)
    thread.start()
    return thread, outcome


def test_a_sequence_gap_times_out_on_the_injected_clock(leader: Partition, clock: ThreadClock) -> None:
    early = _checked(_frame(2, pid=7, seq=5))  # sequences 0..4 never come
    thread, outcome = _in_thread(lambda: leader.append_as_leader(early, gap_timeout_ms=60_000))
    clock.wait_for_calls(2)           # the deadline, then the first "remaining" under the lock: it waits now
    clock.advance(60_001)
    leader.append_as_leader(_checked(_frame(1)))  # another producer's append wakes it
    thread.join(timeout=10)
    assert not thread.is_alive(), "the gap wait did not end when the injected clock passed its deadline"
    (error,) = outcome
    assert isinstance(error, OutOfOrderSequenceError) and "nothing was appended yet" in error.message
    assert leader.offsets().log_end_offset == 1   # only the other producer's record


def test_an_acks_all_wait_times_out_on_the_injected_clock(leader: Partition, clock: ThreadClock) -> None:
    outcome_of_append = leader.append_as_leader(_checked(_frame(3)))
    assert leader.wait_for_high_watermark(outcome_of_append.last_offset, 0) is False  # nobody replicated it
    thread, outcome = _in_thread(lambda: leader.wait_for_high_watermark(outcome_of_append.last_offset, 60_000))
    clock.wait_for_calls(2)
    clock.advance(60_001)
    leader.become(LeaderAndIsr(leader_id=ME, leader_epoch=1, partition_epoch=1, replicas=(ME, FOLLOWER),
                               isr=(ME, FOLLOWER)), config=leader.config)  # wakes the waiter, changes nothing
    thread.join(timeout=10)
    assert not thread.is_alive() and outcome == [False]


def test_acks_all_below_min_insync_replicas_appends_nothing(tmp_path: Path, clock: ThreadClock) -> None:
    partition = _open(tmp_path / "p", clock, ME, TopicConfig(min_insync_replicas=2))
    try:
        partition.become(LeaderAndIsr(leader_id=ME, leader_epoch=1, replicas=(ME, FOLLOWER), isr=(ME,)),
                         config=partition.config)
        with pytest.raises(NotEnoughReplicasError, match="min.insync.replicas=2"):
            partition.append_as_leader(_checked(_frame(2)), acks_all=True)
        assert partition.offsets().log_end_offset == 0
        assert partition.append_as_leader(_checked(_frame(2))).last_offset == 1  # acks=1 is not refused
    finally:
        partition.close()


def test_acks_all_is_refused_when_the_isr_shrank_below_min_insync_before_the_hw_passed(
        tmp_path: Path, clock: ThreadClock) -> None:
    """Kafka's check when an acks=all produce completes: the ISR that passed the append's
    check (2 of min.insync.replicas=2) shrank to the leader alone before the follower had the
    records; the HW then moved with the leader alone, and the produce was acknowledged with the
    records on one replica (the fault test of the slow follower saw it once in a busy CI
    run: "DID NOT RAISE NotEnoughReplicasError").  Now NotEnoughReplicasAfterAppendError;
    a wait that is not a producer's (coordinators' own writes) is unchanged."""
    partition = _open(tmp_path / "p", clock, ME, TopicConfig(min_insync_replicas=2))
    try:
        partition.become(LeaderAndIsr(leader_id=ME, leader_epoch=1, partition_epoch=1, replicas=(ME, FOLLOWER),
                                      isr=(ME, FOLLOWER)), config=partition.config)
        appended = partition.append_as_leader(_checked(_frame(2)), acks_all=True)
        assert partition.wait_for_high_watermark(appended.last_offset, 0, acks_all=True) is False  # not yet
        partition.become(LeaderAndIsr(leader_id=ME, leader_epoch=1, partition_epoch=2, replicas=(ME, FOLLOWER),
                                      isr=(ME,)), config=partition.config)  # the image: the follower left
        with pytest.raises(NotEnoughReplicasAfterAppendError, match="min.insync.replicas=2"):
            partition.wait_for_high_watermark(appended.last_offset, 0, acks_all=True)
        assert partition.wait_for_high_watermark(appended.last_offset, 0) is True
    finally:
        partition.close()


def test_each_frame_is_crc_checked_once_on_the_leader(leader: Partition, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _frame(2) + _frame(3)
    computed: list[int] = []
    original = frame_module.crc32c

    def counting(data: bytes | bytearray | memoryview) -> int:
        computed.append(len(data))
        return original(data)
    monkeypatch.setattr(frame_module, "crc32c", counting)
    checked = _checked(data)                  # what the produce path does: one CRC per frame
    assert len(computed) == 2
    leader.append_as_leader(checked)
    assert len(computed) == 2, "the log verified checked frames again"
    assert leader.offsets().log_end_offset == 5


def test_checked_frames_come_only_from_check_frames() -> None:
    checked = _checked(_frame(1))
    with pytest.raises(TypeError, match="check_frames"):
        CheckedFrames(object(), checked.view, checked.frames, None)
    with pytest.raises(AttributeError):
        checked.frames = ()
    with pytest.raises(CorruptRecordError):
        _checked(_frame(1)[:-1])


def _fetch_once(leader: Partition, follower: Partition, *, max_bytes: int = 1 << 20) -> None:
    position = follower.fetch_position(ME)
    assert position is not None
    answer = leader.answer_follower_fetch(FollowerFetch(FOLLOWER, position.fetch_offset, position.current_leader_epoch,
                                                        position.last_fetched_epoch), max_bytes=max_bytes)
    follower.apply_fetched(ME, position.current_leader_epoch,
                           FetchedData(answer.diverging, answer.records, answer.offsets.high_watermark))


def test_two_partitions_replicate_through_their_typed_methods(tmp_path: Path, leader: Partition,
                                                              clock: ThreadClock) -> None:
    follower = _open(tmp_path / "follower", clock, FOLLOWER)
    try:
        follower.become(LeaderAndIsr(leader_id=ME, leader_epoch=1, partition_epoch=1, replicas=(ME, FOLLOWER),
                                     isr=(ME, FOLLOWER)), config=follower.config)
        first = leader.append_as_leader(_checked(_frame(3, pid=7, seq=0)))
        leader.append_as_leader(_checked(_frame(2, pid=7, seq=3)))
        assert leader.high_watermark == 0
        _fetch_once(leader, follower)                          # copies 0..4
        assert follower.offsets().log_end_offset == 5 and leader.high_watermark == 0
        _fetch_once(leader, follower)                          # its LEO reaches the leader: HW 5
        assert leader.high_watermark == 5 and follower.high_watermark == 5
        assert leader.wait_for_high_watermark(first.last_offset, 0, leader_epoch=first.leader_epoch)

        # an answer that starts inside frames the follower holds appends only what is new
        whole = leader.read(0, max_bytes=1 << 20).result.data
        leader.append_as_leader(_checked(_frame(1)))
        new = leader.answer_follower_fetch(FollowerFetch(FOLLOWER, 5, 1, 1), max_bytes=1 << 20).records
        follower.apply_fetched(ME, 1, FetchedData(None, bytes(whole) + new, 5))
        assert follower.offsets().log_end_offset == 6
        # an answer to a fetch of an older epoch is discarded
        follower.apply_fetched(ME, 0, FetchedData(None, _frame(1), 6))
        assert follower.offsets().log_end_offset == 6

        # the producer state followed the frames: as the new leader, the follower knows
        # producer 7's sequences and acknowledges a replay with the original offsets
        follower.become(LeaderAndIsr(leader_id=FOLLOWER, leader_epoch=2, partition_epoch=2, replicas=(ME, FOLLOWER),
                                     isr=(FOLLOWER,)), config=follower.config)
        replay = follower.append_as_leader(_checked(_frame(2, pid=7, seq=3)))
        assert (replay.duplicate, replay.base_offset, replay.last_offset) == (True, 3, 4)
    finally:
        follower.close()


def test_a_follower_truncates_its_divergent_suffix(tmp_path: Path, leader: Partition, clock: ThreadClock) -> None:
    old = _open(tmp_path / "old", clock, FOLLOWER)
    try:
        # broker 2 led epoch 0 and wrote 4 records nobody else has
        old.become(LeaderAndIsr(leader_id=FOLLOWER, leader_epoch=0, replicas=(ME, FOLLOWER), isr=(FOLLOWER,)),
                   config=old.config)
        old.append_as_leader(_checked(_frame(4)))
        leader.append_as_leader(_checked(_frame(2)))           # epoch 1 on the new leader: offsets 0..1
        old.become(LeaderAndIsr(leader_id=ME, leader_epoch=1, partition_epoch=1, replicas=(ME, FOLLOWER),
                                isr=(ME, FOLLOWER)), config=old.config)
        _fetch_once(leader, old)                               # diverging: epoch 0 ends at 0 on the leader
        assert old.offsets().log_end_offset == 0
        _fetch_once(leader, old)
        _fetch_once(leader, old)
        assert old.offsets().log_end_offset == 2 and old.high_watermark == 2
        assert old.read(0, max_bytes=1 << 20).result.data == leader.read(0, max_bytes=1 << 20).result.data
    finally:
        old.close()


def test_a_producer_writing_old_timestamps_keeps_its_sequences_while_it_writes(tmp_path: Path, leader: Partition,
                                                                                clock: ThreadClock) -> None:
    """A producer's idleness counts from when this replica saw its write, not from its
    records' own timestamps: a producer writing history (event times decades ago, as a
    Spark job replaying old rows does) keeps its sequences through the partition's upkeep,
    so a retry is acknowledged as a duplicate on the leader and on a follower that takes
    over; a producer idle for producer.id.expiration.ms is still forgotten."""
    batch = pa.record_batch({"value": pa.array([b"v" * 10] * 2, pa.binary())})
    old = _checked(encode_batch(batch, producer_id=9, producer_epoch=0, base_sequence=0, compression="none",
                                timestamp_ms=1))
    first = leader.append_as_leader(old)
    leader.maintenance()
    again = leader.append_as_leader(old)
    assert (again.duplicate, again.base_offset) == (True, first.base_offset)
    follower = _open(tmp_path / "follower", clock, FOLLOWER)
    try:
        follower.become(LeaderAndIsr(leader_id=ME, leader_epoch=1, partition_epoch=1, replicas=(ME, FOLLOWER),
                                     isr=(ME, FOLLOWER)), config=follower.config)
        _fetch_once(leader, follower)
        follower.maintenance()
        follower.become(LeaderAndIsr(leader_id=FOLLOWER, leader_epoch=2, partition_epoch=2, replicas=(ME, FOLLOWER),
                                     isr=(FOLLOWER,)), config=follower.config)
        retried = follower.append_as_leader(old)
        assert (retried.duplicate, retried.base_offset) == (True, first.base_offset)
        clock.advance(PRODUCER_ID_EXPIRATION_MS + 1)
        follower.maintenance()
        assert follower._core._producers.last_sequence(9) is None
    finally:
        follower.close()


def test_retention_closes_the_segments_it_deletes_after_letting_go_of_the_lock(
        tmp_path: Path, clock: ThreadClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last close of a deleted segment file frees its pages (31 ms for 127 MiB here):
    under the partition's lock it would stall the partition's appends and reads."""
    config = TopicConfig(segment_bytes=1024, retention_bytes=2048)
    partition = _open(tmp_path / "p", clock, ME, config)
    partition.become(LeaderAndIsr(leader_id=ME, leader_epoch=1, partition_epoch=1, replicas=(ME,), isr=(ME,)),
                     config=config)
    try:
        for _ in range(40):
            partition.append_as_leader(_checked(_frame(20)))
        before = list(partition._log._segments)
        closes = watch_closes(monkeypatch, partition)
        partition.maintenance()
        kept = list(partition._log._segments)
        deleted = removed(before, partition)
        assert len(deleted) >= 3 and partition.offsets().log_start_offset == kept[0].base_offset > 0
        assert {id(s) for s, _ in closes} == {id(s) for s in deleted}  # each deleted one closed, once
        assert not [s for s, locked in closes if locked]
        assert not [s for s in deleted if s.log_path.exists()] and all(s._fd < 0 for s in deleted)
    finally:
        partition.close()


def test_retention_never_deletes_records_above_the_high_watermark(tmp_path: Path, clock: ThreadClock) -> None:
    """Kafka's ``deletableSegments``: a segment goes only once the next one starts at or
    below the high watermark, on the leader (records the ISR has not copied stay) and on a
    follower (its own HW: the leader's, capped by its LEO), so the log start never passes
    the HW."""
    config = TopicConfig(segment_bytes=1024, retention_bytes=0)
    assignment = LeaderAndIsr(leader_id=ME, leader_epoch=1, partition_epoch=1, replicas=(ME, FOLLOWER),
                              isr=(ME, FOLLOWER))
    leader, follower = _open(tmp_path / "leader", clock, ME, config), _open(tmp_path / "follower", clock, FOLLOWER, config)
    try:
        leader.become(assignment, config=config)
        follower.become(assignment, config=config)
        for _ in range(40):   # acks=1: the follower, in the ISR, has copied none of it
            leader.append_as_leader(_checked(_frame(20)))
        assert len(leader._log.segment_base_offsets) > 3
        leader.maintenance()
        assert leader.offsets().log_start_offset == leader.high_watermark == 0
        _fetch_once(leader, follower)          # the follower copies some segments; the HW it was told is 0
        assert follower.offsets().log_end_offset > 0
        follower.maintenance()
        assert follower.offsets().log_start_offset == follower.high_watermark == 0
        for _ in range(100):                   # until both HWs reach the LEO
            if follower.high_watermark == leader.offsets().log_end_offset:
                break
            _fetch_once(leader, follower)
        for replica in (leader, follower):
            replica.maintenance()
            offsets = replica.offsets()
            assert 0 < offsets.log_start_offset <= offsets.high_watermark == offsets.log_end_offset
    finally:
        leader.close()
        follower.close()


def _txn_frame(pid: int, epoch: int, seq: int) -> CheckedFrames:
    batch = pa.record_batch({"value": pa.array([b"v"], pa.binary())})
    return _checked(encode_batch(batch, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True,
                                 compression="none"))


def test_a_late_copy_of_a_marker_does_not_end_the_producers_next_transaction(tmp_path: Path,
                                                                              clock: ThreadClock) -> None:
    """T1 (epoch 0) commits with its marker in epoch 1; T2 is then written in epoch 1.  A
    second copy of T1's marker (a deposed coordinator's resend) is refused: T2 stays open
    (the LSO holds at its record), and T2's own abort puts it in the aborted index."""
    partition = _open(tmp_path / "p", clock, ME)
    partition.become(LeaderAndIsr(leader_id=ME, leader_epoch=0, partition_epoch=0, replicas=(ME,), isr=(ME,)),
                     config=partition.config)
    pid = 7
    try:
        partition.append_as_leader(_txn_frame(pid, 0, 0))  # 0: T1
        partition.append_marker(producer_id=pid, producer_epoch=1, commit=True, coordinator_epoch=0)  # 1
        partition.append_as_leader(_txn_frame(pid, 1, 0))  # 2: T2
        with pytest.raises(FencedEpochError):
            partition.append_marker(producer_id=pid, producer_epoch=1, commit=True, coordinator_epoch=0)
        assert partition.last_stable_offset == 2
        partition.append_marker(producer_id=pid, producer_epoch=2, commit=False, coordinator_epoch=0)  # 3
        assert partition.last_stable_offset == 4
        read = partition.read(0, max_bytes=1 << 20, isolation=Isolation.READ_COMMITTED)
        assert [(t.producer_id, t.first_offset) for t in read.aborted] == [(pid, 2)]
        # a copy of a marker when nothing is open ends nothing (and is no error)
        partition.append_marker(producer_id=pid, producer_epoch=2, commit=False, coordinator_epoch=0)
        assert partition.last_stable_offset == partition.high_watermark
    finally:
        partition.close()


def test_a_marker_in_an_epoch_a_frame_cannot_hold_is_refused_with_a_typed_error(tmp_path: Path,
                                                                                 clock: ThreadClock) -> None:
    partition = _open(tmp_path / "p", clock, ME)
    partition.become(LeaderAndIsr(leader_id=ME, leader_epoch=0, partition_epoch=0, replicas=(ME,), isr=(ME,)),
                     config=partition.config)
    try:
        partition.append_as_leader(_txn_frame(7, 32_767, 0))
        with pytest.raises(InvalidRequestError):
            partition.append_marker(producer_id=7, producer_epoch=32_768, commit=True, coordinator_epoch=0)
        assert partition.offsets().log_end_offset == 1
    finally:
        partition.close()


def test_a_consumer_whose_records_this_log_no_longer_has_is_told_where_it_diverges(tmp_path: Path,
                                                                                   clock: ThreadClock) -> None:
    """KIP-320 for consumers: epoch 0 holds offsets 0-4, epoch 2 offsets 5-9.  A consumer at 8
    whose last record was in epoch 1 (a leader this log never followed) diverges at 5;
    one whose last record is in epoch 2 does not; one past the log in an epoch above this
    log's (a new leader that has not written yet) diverges at the log end."""
    partition = _open(tmp_path / "p", clock, ME)
    try:
        for epoch in (0, 2):
            partition.become(LeaderAndIsr(leader_id=ME, leader_epoch=epoch, partition_epoch=epoch, replicas=(ME,),
                                          isr=(ME,)), config=partition.config)
            partition.append_as_leader(_checked(_frame(5)))
        assert partition.consumer_divergence(8, 1) == (0, 5)
        assert partition.consumer_divergence(8, 2) is None
        assert partition.consumer_divergence(5, 0) is None
        assert partition.consumer_divergence(8, -1) is None  # nothing read yet: nothing to check
        assert partition.consumer_divergence(12, 3) == (2, 10)
    finally:
        partition.close()
