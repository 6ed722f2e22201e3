"""OffsetMap: latest offset per key, its memory budget, and checking an offered map."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from brokers.log.cleaner.offset_map import OffsetMap
from spark_log.errors import InvalidOffsetMapError


def _keys(*names: str) -> pa.Array[Any]:
    return pa.array([n.encode() for n in names], pa.binary())


def test_latest_offset_per_key_across_folds() -> None:
    m = OffsetMap(start=10, budget_bytes=1 << 20)
    m.add(_keys("a", "b", "a"), np.array([10, 11, 12]), end=13)
    assert m.fold() and m.end == 13
    m.add(_keys("b", "c"), np.array([13, 14]), end=20)
    assert m.fold() and (len(m), m.end) == (3, 20)
    assert m.latest(pa.array([b"a", b"b", b"c", b"zz", None], pa.binary())).tolist() == [12, 13, 14, -1, -1]


def test_a_fold_past_the_budget_changes_nothing() -> None:
    m = OffsetMap(start=0, budget_bytes=200)
    m.add(_keys(*[f"k{i}" for i in range(5)]), np.arange(5), end=5)
    assert m.fold()
    m.add(_keys(*[f"x{i}" for i in range(50)]), np.arange(5, 55), end=55)
    assert not m.fold()
    assert (len(m), m.end, m.pending_records) == (5, 5, 0)
    assert m.nbytes <= 200


def test_an_offered_map_is_checked_record_by_record() -> None:
    table = pa.table({"key": _keys("a", "b"), "offset": pa.array([12, 11], pa.int64())})
    good = OffsetMap.from_arrow(table, start=10, end=13)
    for keys, offsets in ((["a", "b", "a"], [10, 11, 12]), (["a"], [5])):  # offset 5: below the range, not counted
        good.check(good.latest(_keys(*keys)), np.array(offsets), np.ones(len(keys), bool))
    good.verify()

    stale = OffsetMap.from_arrow(pa.table({"key": _keys("a"), "offset": pa.array([10], pa.int64())}), start=10, end=13)
    with pytest.raises(InvalidOffsetMapError, match="offset 12"):
        stale.check(stale.latest(_keys("a", "a")), np.array([10, 12]), np.ones(2, bool))
    unused = OffsetMap.from_arrow(table, start=10, end=13)
    unused.check(unused.latest(_keys("a")), np.array([12]), np.ones(1, bool))
    with pytest.raises(InvalidOffsetMapError, match="2 keys but 1"):
        unused.verify()


@pytest.mark.parametrize("table, match", [
    (pa.table({"k": _keys("a"), "offset": pa.array([1], pa.int64())}), "columns"),
    (pa.table({"key": _keys("a", "a"), "offset": pa.array([1, 2], pa.int64())}), "twice"),
    (pa.table({"key": pa.array([None], pa.binary()), "offset": pa.array([1], pa.int64())}), "nulls"),
    (pa.table({"key": _keys("a"), "offset": pa.array([99], pa.int64())}), "within"),
    (pa.table({"key": _keys("a"), "offset": pa.array(["x"])}), "int64"),
])
def test_malformed_offered_maps_are_refused(table: pa.Table, match: str) -> None:
    with pytest.raises(InvalidOffsetMapError, match=match):
        OffsetMap.from_arrow(table, start=0, end=10)
