"""The ``RaftLog`` contract, run against both implementations (``MemoryRaftLog`` and the
durable ``MetadataLog`` over ``PartitionLog``), plus crash/recovery of each.

KIP-595 "Fetch" (end offset for epoch, truncation), KIP-630 (snapshots and log start).
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Callable, Iterator

import pytest

from brokers.raft.entry_buffer import end_offset_for_epoch
from brokers.raft.log import MemoryRaftLog, RaftLog
from brokers.raft.messages import Entry, Snapshot, SnapshotId
from brokers.raft.metadata_log import MetadataLog


@pytest.fixture(params=["memory", "metadata"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], RaftLog]]:
    opened: list[MetadataLog] = []

    def make() -> RaftLog:
        if request.param == "memory":
            return MemoryRaftLog()
        log = MetadataLog(tmp_path / "meta")
        opened.append(log)
        return log

    yield make
    for log in opened:
        log.close()


def _fill(log: RaftLog) -> None:
    """Epoch 1: offsets 0-2, epoch 3: 3-4, epoch 4: 5."""
    log.append_as_leader([b"a", b"b"], 1, control=False)
    log.append_as_leader([b"c"], 1)
    log.append_as_leader([b"lc"], 3, control=True)
    log.append_as_leader([b"d"], 3)
    log.append_as_follower([Entry(5, 4, b"e")])


def test_append_read_and_epochs(make_log: Callable[[], RaftLog]) -> None:
    log = make_log()
    assert (log.start_offset, log.end_offset, log.last_epoch) == (0, 0, 0)
    _fill(log)
    assert log.end_offset == 6 and log.last_epoch == 4
    assert [e.payload for e in log.read(2, 3)] == [b"c", b"lc", b"d"]
    assert log.read(3, 1)[0].control
    assert log.read(6, 10) == []
    assert [log.epoch_at(o) for o in (-1, 0, 2, 3, 5)] == [0, 1, 1, 3, 4]


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [(0, SnapshotId(0, 0)), (1, SnapshotId(3, 1)), (2, SnapshotId(3, 1)), (3, SnapshotId(5, 3)),
     (4, SnapshotId(6, 4)), (9, SnapshotId(6, 4))],
)
def test_end_offset_for_epoch(make_log: Callable[[], RaftLog], epoch: int, expected: SnapshotId) -> None:
    log = make_log()
    _fill(log)
    assert log.end_offset_for_epoch(epoch) == expected


# Entries 10-19: epoch 3 from 10, epoch 5 from 14; the snapshot below 10 ends in epoch 2.
_STARTS = [(3, 10), (5, 14)]


@pytest.mark.parametrize(
    ("starts", "snapshot_epoch", "epoch", "expected"),
    [
        (_STARTS, 2, 3, SnapshotId(14, 3)),   # the lookup: epoch 3 ends where 5 starts
        (_STARTS, 2, 4, SnapshotId(14, 3)),   # the lookup: largest epoch <= 4 is 3
        (_STARTS, 2, 5, SnapshotId(20, 5)),   # the lookup: the latest epoch ends at the log end
        (_STARTS, 2, 9, SnapshotId(20, 5)),   # lookup "unknown" (above the latest): KRaft's log end
        (_STARTS, 2, 2, SnapshotId(10, 2)),   # below every held epoch: the snapshot boundary
        (_STARTS, 2, 1, SnapshotId(10, 0)),   # older than the snapshot too: epoch 0
        (_STARTS, 0, 2, SnapshotId(10, 0)),   # no snapshot epoch known
        ([], 2, 7, SnapshotId(10, 2)),        # nothing held: the snapshot boundary
        ([], 2, 1, SnapshotId(10, 0)),
        ([], 0, 0, SnapshotId(10, 0)),
    ],
)
def test_raft_end_offset_for_epoch_maps_the_shared_lookup(
        starts: list[tuple[int, int]], snapshot_epoch: int, epoch: int, expected: SnapshotId) -> None:
    """KIP-595 DivergingEpoch over ``brokers.log.epoch_lookup``, with Raft's two explicit
    answers where the storage lookup says "unknown" (KRaft ``KafkaMetadataLog.endOffsetForEpoch``)."""
    end = 20 if starts else 10
    assert end_offset_for_epoch(starts, end, 10, snapshot_epoch, epoch) == expected


def test_follower_append_must_continue_the_log(make_log: Callable[[], RaftLog]) -> None:
    log = make_log()
    _fill(log)
    with pytest.raises(ValueError):
        log.append_as_follower([Entry(7, 4, b"gap")])
    with pytest.raises(ValueError):
        log.append_as_follower([Entry(6, 2, b"old epoch")])


def test_truncate_inside_a_frame_keeps_the_head(make_log: Callable[[], RaftLog]) -> None:
    log = make_log()
    _fill(log)
    log.truncate_to(1)  # offsets 0-1 were one frame
    assert [e.payload for e in log.read(0, 10)] == [b"a"]
    assert log.flushed_end_offset == log.end_offset == 1 or isinstance(log, MemoryRaftLog)
    log.append_as_leader([b"x"], 5)
    assert log.end_offset_for_epoch(3) == SnapshotId(1, 1)


def test_snapshot_moves_the_log_start(make_log: Callable[[], RaftLog]) -> None:
    log = make_log()
    _fill(log)
    log.flush()
    log.create_snapshot(Snapshot(SnapshotId(4, 3), b"state"))
    assert (log.start_offset, log.end_offset) == (4, 6)
    assert log.latest_snapshot() == Snapshot(SnapshotId(4, 3), b"state")
    assert log.epoch_at(3) == 3
    assert log.end_offset_for_epoch(1) == SnapshotId(4, 0)
    assert log.end_offset_for_epoch(3) == SnapshotId(5, 3)
    log.install_snapshot(Snapshot(SnapshotId(10, 6), b"newer"))
    assert (log.start_offset, log.end_offset, log.last_epoch) == (10, 10, 6)


def test_memory_log_crash_loses_only_unflushed_entries() -> None:
    log = MemoryRaftLog()
    log.append_as_leader([b"a", b"b"], 1)
    log.flush()
    log.append_as_leader([b"c", b"d", b"e"], 1)
    log.crash()
    assert [e.payload for e in log.read(0, 10)] == [b"a", b"b"]
    log.append_as_leader([b"c", b"d", b"e"], 1)
    log.crash(keep_unflushed=1)  # a torn write: part of the tail made it
    assert log.end_offset == 3 and log.flushed_end_offset == 3


def test_metadata_log_recovers_flushed_entries_and_snapshot(tmp_path: Path) -> None:
    log = MetadataLog(tmp_path)
    _fill(log)
    log.flush()
    log.create_snapshot(Snapshot(SnapshotId(3, 1), b"s3"))
    log.append_as_leader([b"f"], 4)
    log.flush()
    log.close()
    again = MetadataLog(tmp_path)
    try:
        assert (again.start_offset, again.end_offset) == (3, 7)
        assert [e.payload for e in again.read(3, 10)] == [b"lc", b"d", b"e", b"f"]
        assert again.latest_snapshot() == Snapshot(SnapshotId(3, 1), b"s3")
    finally:
        again.close()


def test_metadata_log_cuts_a_torn_tail(tmp_path: Path) -> None:
    log = MetadataLog(tmp_path)
    log.append_as_leader([b"a" * 100], 1)
    log.flush()
    log.append_as_leader([b"b" * 100], 1)
    log.flush()
    log.close()
    segment = sorted((tmp_path / "log").glob("*.log"))[-1]
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) - 7])  # the last frame is torn
    again = MetadataLog(tmp_path)
    try:
        assert [e.payload for e in again.read(0, 10)] == [b"a" * 100]
    finally:
        again.close()


def test_metadata_log_matches_memory_log_under_random_operations(tmp_path: Path) -> None:
    rng = random.Random(7)
    memory, durable = MemoryRaftLog(), MetadataLog(tmp_path)
    epoch = 1
    try:
        for step in range(200):
            op = rng.random()
            if op < 0.5:
                epoch += rng.random() < 0.2
                payloads = [b"%d-%d" % (step, i) for i in range(rng.randint(1, 3))]
                assert memory.append_as_leader(payloads, epoch) == durable.append_as_leader(payloads, epoch)
            elif op < 0.65 and memory.end_offset > memory.start_offset:
                target = rng.randint(memory.start_offset, memory.end_offset)
                memory.truncate_to(target)
                durable.truncate_to(target)
            elif op < 0.72 and memory.end_offset > memory.start_offset:
                end = rng.randint(memory.start_offset + 1, memory.end_offset)
                snap = Snapshot(SnapshotId(end, memory.epoch_at(end - 1)), b"s%d" % step)
                memory.create_snapshot(snap)
                durable.create_snapshot(snap)
            else:
                memory.flush()
                durable.flush()
            for probe in range(0, epoch + 2):
                assert memory.end_offset_for_epoch(probe) == durable.end_offset_for_epoch(probe)
            assert memory.read(memory.start_offset, 1000) == durable.read(durable.start_offset, 1000)
        durable.flush()
        durable.close()
        reopened = MetadataLog(tmp_path)
        assert reopened.read(reopened.start_offset, 1000) == memory.read(memory.start_offset, 1000)
        reopened.close()
    finally:
        if not durable._log._closed:  # noqa: SLF001 - closed above on success
            durable.close()
