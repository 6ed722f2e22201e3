"""TimeIndex: entries only when the max timestamp grows, lookup, sanity checks."""
from __future__ import annotations

import struct
from pathlib import Path

from brokers.log.time_index import TimeIndex


def test_lookup_finds_the_last_entry_below_the_target(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 0)
    assert index.lookup(5) is None and index.max_timestamp is None
    index.maybe_append(100, 10)
    index.maybe_append(100, 20)  # timestamp did not grow: ignored
    index.maybe_append(200, 30)
    index.maybe_append(150, 40)  # went back: ignored
    assert len(index) == 2 and index.max_timestamp == 200
    assert index.lookup(100) is None
    assert index.lookup(101) == 10
    assert index.lookup(200) == 10
    assert index.lookup(201) == 30


def test_round_trip_truncate_and_damage(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    index = TimeIndex(path, 50)
    for i in range(10):
        index.maybe_append(1000 + i, 50 + 10 * i)
    index.write(fsync=True)
    loaded = TimeIndex.load(path, 50, next_offset=200)
    assert loaded is not None and loaded.lookup(1005) == 90
    assert TimeIndex.load(path, 50, next_offset=100) is None  # entries past the segment end
    loaded.truncate_to(100)
    assert loaded.max_timestamp == 1004 and path.stat().st_size == 5 * 12
    path.write_bytes(struct.pack("<qI", 5, 1) + struct.pack("<qI", 5, 2))
    assert TimeIndex.load(path, 0, next_offset=10) is None  # timestamps must grow
    path.write_bytes(b"\0" * 13)
    assert TimeIndex.load(path, 0, next_offset=10) is None
