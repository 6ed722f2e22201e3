"""The cleaner's passes over a real log: the offset map's bounds, groups, unchanged groups,
offered maps checked before anything is swapped, and swaps refused when the log moved on."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pytest

from brokers.log import PartitionLog
from brokers.log.cleaner.cleaner import build_map, prepare, producer_frames
from brokers.log.cleaner.offset_map import OffsetMap
from brokers.log.cleaner.plan import CompactionPlan
from brokers.log.cleaner.records import KeySpec
from brokers.log.cleaner.throttle import Throttler
from spark_log.clock import ManualClock
from spark_log.config import TopicConfig
from spark_log.errors import CorruptRecordError, InvalidOffsetMapError
from spark_log.schemas import BYTES_SCHEMA
from tests.support.compaction import Record, expected, keyed_frame, log_records

SPEC = KeySpec("bytes", (), "", lambda schema_id: BYTES_SCHEMA if schema_id == 0 else None)
FREE = Throttler(0, clock=ManualClock(), wait=lambda s: False)


@pytest.fixture()
def written(tmp_path: Path) -> Iterator[tuple[PartitionLog, list[Record]]]:
    config = TopicConfig(segment_bytes=2048, index_interval_bytes=256, retention_ms=-1, cleanup_policy="compact")
    log = PartitionLog(tmp_path / "p", config)
    records: list[Record] = []
    for i in range(60):
        keys = [f"k{(i * 2 + j) % 9}".encode() for j in range(2)]
        info = log.append_as_leader(keyed_frame(keys, [b"v" * 30, b"w" * 30], timestamp=1_000 + i, producer_id=3,
                                                producer_epoch=0, base_sequence=2 * i), leader_epoch=1)
        records += [Record(info.first_offset + j, k, v, 1_000 + i) for j, (k, v) in enumerate(zip(keys, [b"v" * 30, b"w" * 30]))]
    try:
        yield log, records
    finally:
        log.close()


def _latest_map(records: list[Record], start: int, end: int) -> OffsetMap:
    latest: dict[bytes, int] = {}
    for r in records:
        if start <= r.offset < end and r.key is not None:
            latest[r.key] = r.offset
    table = pa.table({"key": pa.array(list(latest), pa.binary()),
                      "offset": pa.array(np.array(list(latest.values()), dtype=np.int64))})
    return OffsetMap.from_arrow(table, start=start, end=end)


def _clean(log: PartitionLog, plan: CompactionPlan, offsets: OffsetMap, *, checking: bool = False) -> int:
    snapshot = log.cleaner_snapshot(plan.end_offset)
    try:
        prepared = prepare(snapshot, plan=plan, spec=SPEC, offset_map=offsets, checking=checking,
                           last_frame_of=producer_frames(snapshot, plan.end_offset), throttle=FREE, stop=lambda: False)
    finally:
        snapshot.close()
    if prepared.groups:
        assert log.replace_segments(prepared.groups)
        replaced = log.take_retired()
        assert len(replaced) >= len(prepared.groups) and not log.take_retired()
        for segment in replaced:  # the old segments, out of the log: the caller closes them
            assert segment.base_offset in log.segment_base_offsets or not segment.log_path.exists()
            segment.close()
    return len(prepared.groups)


def test_a_clean_gives_the_model_and_skips_groups_that_do_not_change(
        written: tuple[PartitionLog, list[Record]]) -> None:
    log, records = written
    end = log.segment_base_offsets[-1]
    snapshot = log.cleaner_snapshot(end)
    offsets = build_map(snapshot, start=0, end=end, spec=SPEC, budget_bytes=1 << 20, throttle=FREE, stop=lambda: False)
    snapshot.close()
    assert offsets.end == end and len(offsets) == 9
    plan = CompactionPlan(end, 0, 0)
    assert _clean(log, plan, offsets) >= 1
    assert log_records(log) == expected(records, end=end, tombstone_horizon_ms=0)
    segments = len(log.segment_base_offsets)
    for _ in range(3):  # a clean log cleaned again: only small cleaned segments merge, then nothing
        again = OffsetMap(start=end, budget_bytes=1 << 20)
        if _clean(log, plan, again) == 0:
            break
    else:
        raise AssertionError("cleaning a clean log kept rewriting it")
    assert log_records(log) == expected(records, end=end, tombstone_horizon_ms=0)
    assert len(log.segment_base_offsets) < segments and not list(log.directory.glob("*.cleaned"))


def test_the_map_stops_at_the_last_frame_that_fits_the_budget(written: tuple[PartitionLog, list[Record]]) -> None:
    log, _ = written
    end = log.segment_base_offsets[-1]
    snapshot = log.cleaner_snapshot(end)
    try:
        small = build_map(snapshot, start=0, end=end, spec=SPEC, budget_bytes=100, throttle=FREE, stop=lambda: False)
        young = build_map(snapshot, start=0, end=end, spec=SPEC, budget_bytes=1 << 20, throttle=FREE,
                          stop=lambda: False, young_after_ms=1_009)
    finally:
        snapshot.close()
    assert 0 < small.end < end and small.nbytes <= 100
    assert young.end == 20  # the frame written at 1_010 (offsets 20, 21) is too young


def test_a_wrong_offered_map_is_refused_before_anything_is_swapped(written: tuple[PartitionLog, list[Record]]) -> None:
    log, records = written
    end = log.segment_base_offsets[-1]
    bad = _latest_map(records, 0, end - 2)  # misses the last frame: its keys' latest offsets are older
    bad.end = end
    with pytest.raises(InvalidOffsetMapError):
        _clean(log, CompactionPlan(end, 0, 0), bad, checking=True)
    assert log_records(log) == records and not list(log.directory.glob("*.cleaned"))
    assert _clean(log, CompactionPlan(end, 0, 0), _latest_map(records, 0, end), checking=True) >= 1
    assert log_records(log) == expected(records, end=end, tombstone_horizon_ms=0)


def test_a_swap_is_refused_when_the_log_moved_on(written: tuple[PartitionLog, list[Record]]) -> None:
    log, records = written
    end = log.segment_base_offsets[-1]
    snapshot = log.cleaner_snapshot(end)
    prepared = prepare(snapshot, plan=CompactionPlan(end, 0, 0), spec=SPEC, offset_map=_latest_map(records, 0, end),
                       checking=False, last_frame_of={}, throttle=FREE, stop=lambda: False)
    snapshot.close()
    log.truncate_to(end - 1)  # a truncation since the snapshot: records the map counted may be gone
    assert prepared.groups and not log.replace_segments(prepared.groups)
    assert log_records(log) == [r for r in records if r.offset < log.log_end_offset]
    assert not list(log.directory.glob("*.cleaned"))


def test_compacted_logs_roll_by_max_compaction_lag_and_retention_needs_delete(tmp_path: Path) -> None:
    clock = ManualClock(monotonic_ms=0, wall_ms=10**13)
    compact = TopicConfig(segment_ms=3_600_000, max_compaction_lag_ms=1_000, cleanup_policy="compact", retention_ms=1)
    with PartitionLog(tmp_path / "c", compact, clock=clock) as log:
        log.append_as_leader(keyed_frame([b"a"], [b"1"], timestamp=1), leader_epoch=1)
        clock.advance(1_001)
        log.maybe_roll()
        assert len(log.segment_base_offsets) == 2  # closed in time for the cleaner
        assert log.apply_retention(high_watermark=log.log_end_offset) == 0  # compact only: the old record is a key's latest, kept
    both = TopicConfig(segment_ms=1_000, cleanup_policy="compact,delete", retention_ms=1)
    with PartitionLog(tmp_path / "d", both, clock=clock) as log:
        log.append_as_leader(keyed_frame([b"a"], [b"1"], timestamp=1), leader_epoch=1)
        clock.advance(1_001)
        log.maybe_roll()
        assert log.apply_retention(high_watermark=log.log_end_offset) == 1 and log.log_start_offset == 1


def test_a_damaged_frame_fails_the_clean_before_anything_is_written_though_the_map_pass_skips_crcs(
        tmp_path: Path) -> None:
    config = TopicConfig(segment_bytes=4096, index_interval_bytes=256, retention_ms=-1, cleanup_policy="compact")
    log = PartitionLog(tmp_path / "p", config)
    try:
        for i in range(40):
            log.append_as_leader(keyed_frame([f"k{i % 5}".encode()], [b"value-%04d" % i], timestamp=1_000 + i,
                                             compression=None), leader_epoch=1)
        end = log.segment_base_offsets[-1]
        first = sorted(log.directory.glob("*.log"))[0]
        data = bytearray(first.read_bytes())
        at = data.index(b"value-0003")  # a value byte: the keys still decode, the frame's CRC no longer holds
        data[at] ^= 0x01
        first.write_bytes(bytes(data))
        before = {p.name: p.read_bytes() for p in log.directory.glob("*.log")}
        snapshot = log.cleaner_snapshot(end)
        try:
            offsets = build_map(snapshot, start=0, end=end, spec=SPEC, budget_bytes=1 << 20, throttle=FREE,
                                stop=lambda: False)
            assert offsets.end == end and len(offsets) == 5  # the map's pass read the damaged frame's key
            with pytest.raises(CorruptRecordError, match="CRC"):
                prepare(snapshot, plan=CompactionPlan(end, 0, 0), spec=SPEC, offset_map=offsets, checking=False,
                        last_frame_of={}, throttle=FREE, stop=lambda: False)
        finally:
            snapshot.close()
        assert not list(log.directory.glob("*.cleaned"))
        assert {p.name: p.read_bytes() for p in log.directory.glob("*.log")} == before
    finally:
        log.close()
