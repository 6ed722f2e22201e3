"""Which Spark predicates the batch reader absorbs, and what they do to the ranges."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNull, LessThan, StringContains

from connectors.filters import push_filters
from connectors.offsets import TopicPartition as TP
from connectors.options import ReaderOptions
from connectors.plan import ReadPlan
from connectors.schema_mapping import bytes_source_schema, typed_source_schema


def _plan(kind: str) -> ReadPlan:
    topic_schema = pa.schema([("n", pa.int64()), ("s", pa.string())]) if kind == "typed" else None
    schema = typed_source_schema(topic_schema) if topic_schema is not None else bytes_source_schema(include_headers=False)
    return ReadPlan(ReaderOptions.parse({"subscribe": "a,b"}), kind, schema, (), topic_schema)


def test_metadata_predicates_narrow_ranges_exactly() -> None:
    filters = [EqualTo(("topic",), "a"), In(("partition",), (0, 2)), GreaterThanOrEqual(("offset",), 5), LessThan(("offset",), 9)]
    pushed, remaining = push_filters(filters, _plan("bytes"))
    assert remaining == []
    begin = {TP("a", 0): 0, TP("a", 1): 0, TP("a", 2): 7, TP("b", 0): 0}
    end = {tp: 20 for tp in begin}
    assert pushed.narrow(begin, end) == ({TP("a", 0): 5, TP("a", 2): 7}, {TP("a", 0): 9, TP("a", 2): 9})


def test_timestamp_and_offset_in_are_partial() -> None:
    ts = GreaterThan(("timestamp",), dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc))
    offsets = In(("offset",), (3, 7))
    pushed, remaining = push_filters([ts, offsets], _plan("bytes"))
    assert remaining == [ts, offsets]
    assert pushed.min_timestamp == 1_704_067_200_000
    assert (pushed.offset_low, pushed.offset_high) == (3, 8)


def test_typed_column_predicates_become_a_row_filter() -> None:
    n, s, other = GreaterThan(("n",), 3), IsNull(("s",)), StringContains(("s",), "x")
    pushed, remaining = push_filters([n, s, other], _plan("typed"))
    assert remaining == [n, s, other]  # Spark re-checks: the broker filter only saves bytes
    table = pa.table({"n": [1, 5, 6], "s": [None, None, "y"]})
    assert table.filter(pushed.row_filter).column("n").to_pylist() == [5]
    none, _ = push_filters([StringContains(("s",), "x")], _plan("typed"))
    assert none.row_filter is None
