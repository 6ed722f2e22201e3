"""Compaction of hosted replicas (``Partition.clean``): plans in the log, applied by every
replica once committed, the same records at the same offsets on every replica below the
cleaned offset (whatever their segment bounds and clocks), also after a leader change;
producer state kept; nothing applied before it is committed."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from brokers.log.append import check_frames
from brokers.log.cleaner.records import KeySpec
from brokers.log.cleaner.throttle import Throttler
from brokers.partition import FetchedData, FollowerFetch, LeaderAndIsr, Partition
from spark_log.clock import ManualClock
from spark_log.config import TopicConfig
from spark_log.errors import CompactionConflictError, NotLeaderError, TopicNotCompactedError
from spark_log.frame import iter_frames, marker_of, parse_header
from spark_log.schemas import BYTES_SCHEMA
from tests.support.compaction import Record, expected, keyed_frame, log_records
from tests.support.segment_closes import removed, watch_closes

A, B = 1, 2
SPEC = KeySpec("bytes", (), "", lambda schema_id: BYTES_SCHEMA if schema_id == 0 else None)
DAY = 24 * 3600 * 1000
NOW = 1_800_000_000_000


def _config(segment_bytes: int, **more: object) -> TopicConfig:
    values: dict[str, object] = dict(segment_bytes=segment_bytes, cleanup_policy="compact", index_interval_bytes=256,
                                     delete_retention_ms=DAY)
    values.update(more)
    return TopicConfig(**values)  # type: ignore[arg-type]


def _open(directory: Path, clock: ManualClock, broker_id: int, config: TopicConfig) -> Partition:
    return Partition(topic="t", partition=0, topic_id="id-t", directory=directory, config=config, broker_id=broker_id,
                     clock=clock)


def _lead(partition: Partition, leader: int, epoch: int, replicas: tuple[int, ...]) -> None:
    partition.become(LeaderAndIsr(leader_id=leader, leader_epoch=epoch, partition_epoch=epoch, replicas=replicas,
                                  isr=replicas), config=partition.config)


def _clean_all(partition: Partition) -> list[str]:
    done: list[str] = []
    throttle = Throttler(0, clock=ManualClock(), wait=lambda s: False)
    for _ in range(10):
        outcome = partition.clean(SPEC, throttle=throttle, budget_bytes=1 << 24, stop=lambda: False)
        if outcome is None:
            return done
        done.append(outcome)
    raise AssertionError(f"cleaning did not settle: {done}")


def _fetch(leader: Partition, follower: Partition, leader_id: int, follower_id: int) -> None:
    for _ in range(1000):  # a read answers from one segment: small segments, many fetches
        position = follower.fetch_position(leader_id)
        assert position is not None
        answer = leader.answer_follower_fetch(FollowerFetch(follower_id, position.fetch_offset,
                                                            position.current_leader_epoch, position.last_fetched_epoch),
                                              max_bytes=1 << 20)
        follower.apply_fetched(leader_id, position.current_leader_epoch,
                               FetchedData(answer.diverging, answer.records, answer.offsets.high_watermark))
        if not answer.records and follower.offsets().high_watermark == leader.offsets().high_watermark:
            return
    raise AssertionError("the follower did not catch up")


class Writer:
    """Keyed writes with an idempotent producer; remembers every record written."""

    def __init__(self, clock: ManualClock, producer_id: int = 7) -> None:
        self.clock, self.producer_id, self.sequence = clock, producer_id, 0
        self.records: list[Record] = []

    def write(self, partition: Partition, keys: list[bytes], values: list[bytes | None]) -> None:
        stamp = self.clock.wall_ms()
        frame = keyed_frame(keys, values, timestamp=stamp, producer_id=self.producer_id, producer_epoch=0,
                            base_sequence=self.sequence)
        outcome = partition.append_as_leader(check_frames(frame, max_message_bytes=1 << 20))
        assert not outcome.duplicate
        self.records += [Record(outcome.base_offset + i, k, v, stamp) for i, (k, v) in enumerate(zip(keys, values))]
        self.sequence += len(keys)

    def rounds(self, partition: Partition, count: int, *, first: int = 0) -> None:
        for i in range(first, first + count):
            keys = [f"k{(i * 3 + j) % 13}".encode() for j in range(3)]
            values: list[bytes | None] = [None if (i + j) % 11 == 0 else f"v{i}.{j}".encode() * 3 for j in range(3)]
            self.write(partition, keys, values)
            self.clock.advance(1_000)


@pytest.fixture()
def clock() -> ManualClock:
    return ManualClock(monotonic_ms=0, wall_ms=NOW)


@pytest.fixture()
def pair(tmp_path: Path, clock: ManualClock) -> Iterator[tuple[Partition, Partition]]:
    """A leader (4 KiB segments) and a follower (1.5 KiB segments, its own clock)."""
    leader = _open(tmp_path / "a", clock, A, _config(4096))
    follower = _open(tmp_path / "b", ManualClock(monotonic_ms=5, wall_ms=NOW - 3_600_000), B, _config(1500))
    _lead(leader, A, 1, (A, B))
    _lead(follower, A, 1, (A, B))
    try:
        yield leader, follower
    finally:
        leader.close()
        follower.close()


def _plan_of(partition: Partition) -> tuple[int, int]:
    status = partition.compaction_status()
    assert status.plan is not None
    return status.cleaned_offset, status.plan.tombstone_horizon_ms


def test_a_single_replica_cleans_to_the_model(tmp_path: Path, clock: ManualClock) -> None:
    partition = _open(tmp_path / "p", clock, A, _config(4096))
    _lead(partition, A, 1, (A,))
    writer = Writer(clock)
    writer.rounds(partition, 120)
    clock.advance(2 * DAY)  # every tombstone is past delete.retention.ms now
    done = _clean_all(partition)
    assert any("planned" in d for d in done) and any("applied" in d for d in done)
    end, horizon = _plan_of(partition)
    assert end > 0 and horizon == clock.wall_ms() - DAY
    records = log_records(partition._log)
    assert records == expected(writer.records, end=end, tombstone_horizon_ms=horizon)
    assert len(records) < len(writer.records) // 3
    partition.close()
    reopened = _open(tmp_path / "p", clock, A, _config(4096))  # the cleaner checkpoint: nothing is redone
    _lead(reopened, A, 2, (A,))
    assert reopened.compaction_status().cleaned_offset == end and _clean_all(reopened) == []
    reopened.close()


def test_the_swap_closes_the_replaced_segments_after_letting_go_of_the_lock(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    # the last close of a deleted segment file frees its pages (31 ms for 127 MiB here): done
    # under the partition's lock, it would stall the partition's appends and reads
    partition = _open(tmp_path / "p", clock, A, _config(4096))
    _lead(partition, A, 1, (A,))
    Writer(clock).rounds(partition, 120)
    old = list(partition._log._segments)
    closes = watch_closes(monkeypatch, partition)
    done = _clean_all(partition)
    assert any("applied" in d for d in done)
    replaced = removed(old, partition)
    assert replaced and {id(s) for s, _ in closes} >= {id(s) for s in replaced}  # every replaced one closed
    assert not [s for s, locked in closes if locked]
    assert all(s._fd < 0 for s in replaced)
    partition.close()


def test_replicas_return_the_same_records_below_the_cleaned_offset_also_after_a_leader_change(
        pair: tuple[Partition, Partition], clock: ManualClock) -> None:
    leader, follower = pair
    writer = Writer(clock)
    writer.rounds(leader, 150)
    _fetch(leader, follower, A, B)
    assert any("planned" in d for d in _clean_all(leader))
    assert follower.compaction_status().applied_plan_offset == -1  # its copy of the plan is not committed yet
    _fetch(leader, follower, A, B)  # the plan frame and the HW past it
    _clean_all(leader)
    assert any("applied" in d for d in _clean_all(follower))
    end, horizon = _plan_of(leader)
    assert _plan_of(follower) == (end, horizon)
    model = expected(writer.records, end=end, tombstone_horizon_ms=horizon)
    assert log_records(leader._log) == log_records(follower._log) == model
    assert leader._log.segment_base_offsets != follower._log.segment_base_offsets  # different bounds, same records

    # B leads now (its wall clock is an hour behind A's): plans keep going, horizons do not go back
    _lead(follower, B, 2, (A, B))
    _lead(leader, B, 2, (A, B))
    second = Writer(clock, producer_id=8)
    second.rounds(follower, 100, first=200)
    _fetch(follower, leader, B, A)
    follower.request_compaction()
    assert any("planned" in d for d in _clean_all(follower))
    _fetch(follower, leader, B, A)
    _clean_all(follower)
    _clean_all(leader)
    new_end, new_horizon = _plan_of(follower)
    assert new_end > end and new_horizon >= horizon and _plan_of(leader) == (new_end, new_horizon)
    model = expected(writer.records + second.records, end=new_end, tombstone_horizon_ms=new_horizon)
    assert log_records(leader._log) == log_records(follower._log) == model


def test_a_producers_state_survives_when_compaction_empties_its_last_frame(tmp_path: Path,
                                                                            clock: ManualClock) -> None:
    partition = _open(tmp_path / "p", clock, A, _config(2048))
    _lead(partition, A, 1, (A,))
    quiet, busy = Writer(clock, producer_id=21), Writer(clock, producer_id=22)
    quiet.write(partition, [b"a", b"b"], [b"1", b"2"])  # then it pauses; busy overwrites its keys
    for _ in range(60):
        busy.write(partition, [b"a", b"b", b"c"], [b"x" * 30, b"y" * 30, b"z" * 30])
    _clean_all(partition)
    end, _ = _plan_of(partition)
    assert all(r.offset >= 2 for r in log_records(partition._log)) and end > 2
    first = parse_header(bytes(partition._log.read(0, max_bytes=1).data))
    assert (first.version, first.record_count, first.producer_id, first.last_sequence) == (2, 0, 21, 1)
    partition.close()
    reopened = _open(tmp_path / "p", clock, A, _config(2048))  # the producer state is rebuilt from the log
    _lead(reopened, A, 2, (A,))
    assert reopened._core._producers.last_sequence(21) == (0, 1)
    quiet.write(reopened, [b"d"], [b"4"])  # sequence 2 appends: no gap, no duplicate
    reopened.close()


def test_requests_are_for_leaders_of_compacted_topics(tmp_path: Path, clock: ManualClock) -> None:
    plain = _open(tmp_path / "plain", clock, A, TopicConfig())
    _lead(plain, A, 1, (A,))
    with pytest.raises(TopicNotCompactedError, match="cleanup.policy=delete"):
        plain.request_compaction()
    plain.close()
    follower = _open(tmp_path / "f", clock, B, _config(4096))
    _lead(follower, A, 1, (A, B))
    with pytest.raises(NotLeaderError):
        follower.request_compaction()
    follower.close()


def test_a_plan_with_an_offered_map_needs_the_current_cleaned_offset(tmp_path: Path, clock: ManualClock) -> None:
    from brokers.log.cleaner.offset_map import OffsetMap

    partition = _open(tmp_path / "p", clock, A, _config(1024, min_cleanable_dirty_ratio=1.0))
    _lead(partition, A, 1, (A,))
    writer = Writer(clock)
    writer.rounds(partition, 40)
    assert _clean_all(partition) == []  # ratio 1.0: nothing planned by itself
    limit = partition.compaction_status().cleanable_end
    with pytest.raises(CompactionConflictError, match="cleaned offset is 0"):
        partition.plan_with_map(5, limit, OffsetMap(start=5, budget_bytes=1))
    latest: dict[bytes, int] = {}
    for record in writer.records:
        if record.offset < limit and record.key is not None:
            latest[record.key] = record.offset
    import numpy as np
    import pyarrow as pa

    offered = OffsetMap.from_arrow(pa.table({"key": pa.array(list(latest), pa.binary()),
                                             "offset": pa.array(np.array(list(latest.values()), dtype=np.int64))}),
                                   start=0, end=limit)
    at = partition.plan_with_map(0, limit, offered)
    with pytest.raises(CompactionConflictError, match="still being applied"):
        partition.plan_with_map(0, limit, offered)
    _clean_all(partition)
    assert partition.compaction_status().applied_plan_offset == at.offset
    assert log_records(partition._log) == expected(writer.records, end=limit,
                                                   tombstone_horizon_ms=at.plan.tombstone_horizon_ms)
    partition.close()


def _markers_in(partition: Partition) -> list[int]:
    """Base offsets of the transaction markers the log holds."""
    log, out = partition._log, []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, max_bytes=1 << 22, verify=True)
        out += [header.base_offset for position, header in iter_frames(result.data)
                if marker_of(result.data, header, position) is not None]
        offset = result.next_offset
    return out


def test_markers_go_with_their_transactions_records_and_a_reopened_log_holds_no_open_transaction(
        tmp_path: Path, clock: ManualClock) -> None:
    """Kafka's rule: a marker is removed once no record of its transaction is left and it is
    past delete.retention.ms, unless it is its producer's last frame (the bumped epoch).  A
    replay of the cleaned log then finds no transactional record without its marker: the
    last stable offset is the high watermark, and the producer's epoch is still fenced."""
    partition = _open(tmp_path / "p", clock, A, _config(2048))
    _lead(partition, A, 1, (A,))
    pid, epoch, markers = 31, 0, []
    for round_ in range(40):
        keys = [b"a", b"b", f"r{round_}".encode()] + ([b"kept"] if round_ == 5 else [])  # never written again
        frame = keyed_frame(keys, [b"x" * 40] * len(keys), timestamp=clock.wall_ms(),
                            producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
        partition.append_as_leader(check_frames(frame, max_message_bytes=1 << 20))
        markers.append(partition.append_marker(producer_id=pid, producer_epoch=epoch + 1, commit=round_ % 3 != 0,
                                               coordinator_epoch=0).base_offset)
        epoch += 1
        clock.advance(1_000)
    plain = Writer(clock, producer_id=32)
    for _ in range(40):  # every transactional key written again outside transactions; rolls the last segments
        plain.write(partition, [b"a", b"b"] + [f"r{i}".encode() for i in range(40)], [b"y" * 40] * 42)
    clock.advance(2 * DAY)
    _clean_all(partition)
    end, _ = _plan_of(partition)
    assert end > markers[-1]
    # round 5's marker stays with its record "kept" (a commit); the last one holds the producer's epoch
    assert _markers_in(partition) == [markers[5], markers[-1]]
    hw = partition.high_watermark
    partition.close()
    reopened = _open(tmp_path / "p", clock, A, _config(2048))
    _lead(reopened, A, 2, (A,))
    assert reopened.last_stable_offset == reopened.high_watermark == hw
    assert [r.value for r in log_records(reopened._log) if r.key == b"kept"] == [b"x" * 40]
    assert reopened._core._producers.last_sequence(pid)[0] == epoch  # the old epochs stay fenced
    reopened.close()
