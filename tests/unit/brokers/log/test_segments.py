"""Segments: ordered by base offset with floor lookup."""
from __future__ import annotations

from pathlib import Path

import pytest

from brokers.log.segment import Segment
from brokers.log.segments import Segments


def test_floor_higher_and_range(tmp_path: Path) -> None:
    segments = Segments()
    made = [Segment.create(tmp_path, base, index_interval_bytes=0, now_ms=0) for base in (0, 10, 25)]
    for segment in made:
        segments.add(segment)
    assert segments.floor(-1) is None
    assert segments.floor(0) is made[0] and segments.floor(24) is made[1] and segments.floor(99) is made[2]
    assert segments.higher(made[0]) is made[1] and segments.higher(made[2]) is None
    assert segments.from_offset(12) == made[1:] and segments.from_offset(0) == made
    assert segments.active is made[2] and segments.first is made[0]
    with pytest.raises(ValueError):
        segments.add(Segment.create(tmp_path, 20, index_interval_bytes=0, now_ms=0))
    segments.remove(made[1])
    assert segments.floor(24) is made[0] and len(segments) == 2
    for segment in made:
        segment.close()
