"""Plans and the planning rules (pure)."""
from __future__ import annotations

import pytest

from brokers.log.cleaner.plan import (
    CompactionPlan,
    clean_reason,
    cleanable_end,
    dirty_ratio,
    next_plan,
    plan_frame,
    read_plan,
)
from spark_log.config import TopicConfig
from spark_log.errors import CorruptRecordError
from spark_log.frame import encode_control, parse_header

DAY = 24 * 3600 * 1000


def test_a_plan_round_trips_through_its_control_frame() -> None:
    plan = CompactionPlan(1234, 5_000, -7)
    frame = plan_frame(plan, timestamp_ms=99)
    header = parse_header(frame)
    assert header.is_control and header.producer_id == -1
    assert read_plan(frame, header) == plan


def test_other_control_frames_and_damaged_plans() -> None:
    other = encode_control(1, b"a commit marker", timestamp_ms=1)
    assert read_plan(other, parse_header(other)) is None
    with pytest.raises(CorruptRecordError):
        CompactionPlan.decode(b"short")
    with pytest.raises(CorruptRecordError, match="unknown"):
        CompactionPlan.decode(bytes([9]) + CompactionPlan(1, 2, 3).encode()[1:])


def test_next_plan_horizons_come_from_the_clock_and_never_go_back() -> None:
    config = TopicConfig(delete_retention_ms=DAY)
    first = next_plan(previous=None, end_offset=100, now_ms=10 * DAY, config=config, producer_expiration_ms=2 * DAY)
    assert first == CompactionPlan(100, 9 * DAY, 8 * DAY)
    # a new leader whose clock is behind: the horizons stay where the last plan put them
    second = next_plan(previous=first, end_offset=200, now_ms=5 * DAY, config=config, producer_expiration_ms=2 * DAY)
    assert second == CompactionPlan(200, 9 * DAY, 8 * DAY)
    # a longer delete.retention.ms later does not bring removed tombstones back either
    third = next_plan(previous=second, end_offset=150, now_ms=11 * DAY,
                      config=TopicConfig(delete_retention_ms=5 * DAY), producer_expiration_ms=2 * DAY)
    assert third == CompactionPlan(200, 9 * DAY, 9 * DAY)


@pytest.mark.parametrize("lso, active, young, end", [(100, 80, None, 80), (50, 80, None, 50), (100, 80, 60, 60),
                                                      (100, 80, 90, 80)])
def test_the_cleanable_end_is_the_lowest_bound(lso: int, active: int, young: int | None, end: int) -> None:
    assert cleanable_end(last_stable_offset=lso, active_base_offset=active, young_from=young) == end


def test_dirty_ratio() -> None:
    assert dirty_ratio(clean_bytes=0, dirty_bytes=0) == 0.0
    assert dirty_ratio(clean_bytes=300, dirty_bytes=100) == 0.25


@pytest.mark.parametrize("ratio, minimum, requested, first_ts, why", [
    (0.6, 0.5, False, None, "dirty ratio"),
    (0.5, 0.5, False, None, None),  # strictly above, as Kafka
    (1.0, 1.0, False, None, None),  # 1.0 turns ratio-driven cleaning off
    (0.1, 0.5, True, None, "requested"),
    (0.1, 0.5, False, 1_000, "max.compaction.lag.ms"),
    (0.1, 0.5, False, 9_500, None),
])
def test_clean_reason(ratio: float, minimum: float, requested: bool, first_ts: int | None, why: str | None) -> None:
    config = TopicConfig(min_cleanable_dirty_ratio=minimum, max_compaction_lag_ms=5_000)
    reason = clean_reason(ratio=ratio, dirty_bytes=10, first_dirty_timestamp_ms=first_ts, now_ms=10_000, config=config,
                          requested=requested)
    assert (reason is None) == (why is None) and (why is None or why in (reason or ""))


def test_nothing_dirty_is_never_cleaned() -> None:
    assert clean_reason(ratio=1.0, dirty_bytes=0, first_dirty_timestamp_ms=0, now_ms=10**12, config=TopicConfig(),
                        requested=True) is None
