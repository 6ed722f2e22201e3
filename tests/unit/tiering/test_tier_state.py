"""The pure parts of tiering: the tier frame, ``TierState`` (which frame counts), and the
tiered log's local retention (only segments entirely below the tiered end)."""
from __future__ import annotations

from brokers.log.retention import tiered_segments_to_delete
from brokers.partition.tiering import TierState, read_tier_frame, tier_frame
from spark_log.frame import encode_control, iter_frames


def test_tier_frame_round_trip_and_other_frames_ignored() -> None:
    data = tier_frame(start=3, end=42, timestamp_ms=1000)
    (position, header), = list(iter_frames(data))
    assert header.is_control and read_tier_frame(data, header, position) == (3, 42)
    plan = encode_control(16, b"whatever", timestamp_ms=1)
    (position, header), = list(iter_frames(plan))
    assert read_tier_frame(plan, header, position) is None


def test_only_a_frame_below_the_high_watermark_counts() -> None:
    state = TierState()
    assert state.committed(100) is None
    state.note(10, 0, 8)
    state.note(20, 0, 15)
    assert state.committed(15).end == 8          # the frame at 20 may still be truncated away
    assert state.committed(21).end == 15
    assert state.latest().end == 15
    state.note(20, 0, 12)                        # the log was truncated and the offset reused
    assert state.latest().end == 12 and state.committed(21).end == 12
    state.reset()
    assert state.latest() is None


def test_tiered_retention_deletes_only_below_the_tiered_end() -> None:
    # (base offset, size, max timestamp): four segments, the last one active
    segments = [(0, 100, 10), (10, 100, 20), (20, 100, 30), (30, 50, 40)]
    everything = dict(retention_ms=0, retention_bytes=-1, now_ms=1000)
    assert tiered_segments_to_delete(segments, below=0, **everything) == 0
    assert tiered_segments_to_delete(segments, below=9, **everything) == 0    # [0, 10) not entirely below 9
    assert tiered_segments_to_delete(segments, below=10, **everything) == 1
    assert tiered_segments_to_delete(segments, below=25, **everything) == 2
    assert tiered_segments_to_delete(segments, below=1000, **everything) == 3  # never the active segment
    assert tiered_segments_to_delete(segments, below=1000, retention_ms=-1, retention_bytes=-1, now_ms=1000) == 0
    assert tiered_segments_to_delete(segments, below=1000, retention_ms=-1, retention_bytes=150, now_ms=1000) == 2
    assert tiered_segments_to_delete(segments, below=1000, retention_ms=985, retention_bytes=-1, now_ms=1000) == 1
