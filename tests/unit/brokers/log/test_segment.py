"""Segment: append, locate, read, timestamps, truncate, trusted open and recovery."""
from __future__ import annotations

from pathlib import Path

import pytest

from brokers.log.segment import Segment
from spark_log.errors import CorruptRecordError
from spark_log.frame import set_offset_and_epoch

from .support import BASE_TS, make_frame


def fill(segment: Segment, count: int, *, records: int = 2) -> list[bytes]:
    frames = []
    for i in range(count):
        raw = bytearray(make_frame(records, tag=i, ts=BASE_TS + 10 * i))
        base = segment.next_offset
        set_offset_and_epoch(raw, base, 0)
        segment.append([bytes(raw)], [(base, base + records, len(raw), BASE_TS + 10 * i)], now_ms=0)
        frames.append(bytes(raw))
    return frames


@pytest.fixture
def segment(tmp_path: Path):
    segment = Segment.create(tmp_path, 100, index_interval_bytes=500, now_ms=0)
    yield segment
    segment.close()


def test_append_builds_sparse_indexes(segment: Segment) -> None:
    frames = fill(segment, 30)
    assert segment.next_offset == 160 and segment.size == sum(map(len, frames))
    assert 0 < len(segment.offset_index) < 30
    assert segment.max_timestamp == BASE_TS + 290
    assert segment.log_path.name == "00000000000000000100.log"


def test_locate_and_read(segment: Segment) -> None:
    frames = fill(segment, 30)
    n = len(frames[0])
    for offset in range(100, 160):
        header = segment.locate(offset)
        assert header is not None and header.base_offset == offset - offset % 2 and header.position == (offset - 100) // 2 * n
    assert segment.locate(160) is None
    assert segment.read(n, 2 * n) == frames[1] + frames[2]
    assert segment.read(29 * n, 10 * n) == frames[29]


def test_find_timestamp(segment: Segment) -> None:
    fill(segment, 30)
    assert segment.find_timestamp(0) == 100
    assert segment.find_timestamp(BASE_TS + 55) == 112
    assert segment.find_timestamp(BASE_TS + 290) == 158
    assert segment.find_timestamp(BASE_TS + 291) is None


def test_truncate_to(segment: Segment) -> None:
    frames = fill(segment, 30)
    segment.truncate_to(121)
    assert segment.next_offset == 120 and segment.size == 10 * len(frames[0])
    assert segment.max_timestamp == BASE_TS + 90
    assert segment.find_timestamp(BASE_TS + 95) is None
    fill(segment, 1)
    assert segment.next_offset == 122


def test_open_trusted_and_recover(tmp_path: Path, segment: Segment) -> None:
    frames = fill(segment, 30)
    segment.write_indexes(fsync=True)
    trusted = Segment.open_trusted(tmp_path, 100, index_interval_bytes=500, now_ms=0)
    assert (trusted.next_offset, trusted.size, trusted.max_timestamp) == (160, segment.size, segment.max_timestamp)
    trusted.close()
    with segment.log_path.open("ab") as handle:
        handle.write(frames[0][:70])  # a torn frame
    with pytest.raises(CorruptRecordError):
        Segment.open_trusted(tmp_path, 100, index_interval_bytes=500, now_ms=0)
    recovered = Segment(tmp_path, 100, index_interval_bytes=500, now_ms=0)
    stop = recovered.recover()
    assert stop is not None and stop.position == segment.size and "torn" in stop.reason
    assert recovered.next_offset == 160 and recovered.log_path.stat().st_size == segment.size
    recovered.close()


def test_a_wrong_index_entry_is_detected_and_rebuilt(tmp_path: Path, segment: Segment) -> None:
    fill(segment, 30)
    entries = len(segment.offset_index)
    segment.offset_index._second[1] += 1  # points inside a frame now
    assert segment.locate(150) is not None and segment.locate(150).base_offset == 150  # type: ignore[union-attr]
    assert len(segment.offset_index) == entries


def test_an_index_entry_pointing_inside_a_frame_is_rebuilt(segment: Segment) -> None:
    frames = fill(segment, 30)
    for i in range(len(segment.offset_index)):
        segment.offset_index._second[i] += 3  # every entry now points inside a frame
    for offset in (100, 131, 159):
        header = segment.locate(offset)
        assert header is not None and header.base_offset == offset - offset % 2
    assert segment.offset_index.lookup(159)[1] % len(frames[0]) == 0


def test_rebuild_on_damaged_data_raises_and_changes_nothing(segment: Segment) -> None:
    frames = fill(segment, 30)
    n = len(frames[0])
    with segment.log_path.open("r+b") as handle:  # wreck the magic of frame 20
        handle.seek(20 * n + 16)
        handle.write(b"XX")
    size, next_offset, entries = segment.size, segment.next_offset, len(segment.offset_index)
    with pytest.raises(CorruptRecordError):
        segment.rebuild_indexes()
    assert (segment.size, segment.next_offset, len(segment.offset_index)) == (size, next_offset, entries)
    assert segment.locate(101) is not None  # before the damage: still served
    with pytest.raises(CorruptRecordError):
        segment.locate(141)
