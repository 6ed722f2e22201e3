"""OffsetIndex: sparse entries, lookup, truncation, file round trip, sanity checks."""
from __future__ import annotations

import struct
from pathlib import Path

from brokers.log.offset_index import OffsetIndex


def test_lookup_returns_the_floor_entry_or_the_segment_start(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 100)
    assert index.lookup(150) == (100, 0)
    index.append(110, 1000)
    index.append(120, 2000)
    assert index.lookup(105) == (100, 0)
    assert index.lookup(110) == (110, 1000)
    assert index.lookup(119) == (110, 1000)
    assert index.lookup(10**9) == (120, 2000)
    assert index.last() == (120, 2000)


def test_entries_out_of_order_or_at_the_start_are_ignored(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 100)
    index.append(100, 0)
    index.append(110, 1000)
    index.append(105, 2000)
    index.append(115, 900)
    index.append(100 + 2**32, 5000)  # relative offset does not fit in 4 bytes
    assert len(index) == 1


def test_write_load_round_trip_and_truncate(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 7)
    for i in range(1, 50):
        index.append(7 + 3 * i, 100 * i)
    index.write(fsync=True)
    assert path.stat().st_size == 49 * 8
    loaded = OffsetIndex.load(path, 7, data_size=10_000)
    assert loaded is not None and loaded.lookup(7 + 3 * 20 + 1) == (67, 2000)
    loaded.truncate_to(7 + 3 * 10)  # drops the entry at 37 and after
    assert loaded.last() == (7 + 27, 900)
    assert path.stat().st_size == 9 * 8
    loaded.append(1000, 5000)
    loaded.write(fsync=False)
    again = OffsetIndex.load(path, 7, data_size=10_000)
    assert again is not None and again.last() == (1000, 5000) and len(again) == 10


def test_load_refuses_damaged_files(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    assert OffsetIndex.load(path, 0, data_size=100) is None  # missing
    path.write_bytes(b"\x01\x00\x00")
    assert OffsetIndex.load(path, 0, data_size=100) is None  # partial entry
    path.write_bytes(struct.pack("<II", 5, 50) + struct.pack("<II", 4, 60))
    assert OffsetIndex.load(path, 0, data_size=100) is None  # offsets go back
    path.write_bytes(struct.pack("<II", 5, 50) + struct.pack("<II", 6, 500))
    assert OffsetIndex.load(path, 0, data_size=100) is None  # position past the data
    path.write_bytes(b"\0" * 16)
    assert OffsetIndex.load(path, 0, data_size=100) is None  # zeroed tail after a crash
    path.write_bytes(struct.pack("<II", 5, 50))
    assert OffsetIndex.load(path, 0, data_size=100) is not None
