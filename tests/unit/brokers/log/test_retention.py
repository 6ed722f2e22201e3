"""retention.segments_to_delete and segments_below: table tests of the time and size rules
and of the high-watermark bound."""
from __future__ import annotations

import pytest

from brokers.log.retention import segments_below, segments_to_delete

SEGMENTS = [(100, 1_000), (100, 2_000), (100, 3_000), (50, 4_000)]  # (size, max timestamp); last is active


@pytest.mark.parametrize(
    "retention_ms, retention_bytes, now_ms, expected",
    [
        (-1, -1, 10_000, 0),  # keep forever
        (0, -1, 10_000, 3),  # everything old, but never the active segment
        (7_500, -1, 10_000, 2),  # 9_000 and 8_000 ms old go, 7_000 stays
        (8_000, -1, 10_000, 1),  # the second is not strictly older
        (-1, 350, 0, 0),  # exactly at the limit
        (-1, 249, 0, 1),  # 101 bytes over: the first segment (100) goes, the next would overshoot
        (-1, 0, 0, 3),
        (8_000, 100, 10_000, 2),  # time takes one, size one more
    ],
)
def test_segments_to_delete(retention_ms: int, retention_bytes: int, now_ms: int, expected: int) -> None:
    assert segments_to_delete(SEGMENTS, retention_ms=retention_ms, retention_bytes=retention_bytes, now_ms=now_ms) == expected


def test_a_lone_active_segment_never_goes() -> None:
    assert segments_to_delete([(10**9, 0)], retention_ms=0, retention_bytes=0, now_ms=10**12) == 0


@pytest.mark.parametrize(
    "offset, expected",
    [
        (0, 0),      # nothing below the HW: nothing may go
        (9, 0),      # [0, 10) is not entirely below 9
        (10, 1),     # the next segment starts at the HW: [0, 10) is below it
        (24, 1),
        (25, 2),
        (10**9, 3),  # never the active segment
    ],
)
def test_segments_below(offset: int, expected: int) -> None:
    assert segments_below([0, 10, 25, 40], offset) == expected
