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


def test_typed_predicates_keep_spark_nan_semantics() -> None:
    """NaN is above every value and equal to itself in Spark: the pushed filter keeps NaN rows
    for =, >, >= and IN (Spark checks again); a NaN value, a lossy value or an unsupported type
    is not pushed (spark_log.filters.predicate, which the JVM connector's pushdown shares)."""
    from decimal import Decimal

    from spark_log.filters import predicate

    table = pa.table({"f": pa.array([1.0, float("nan"), None, 3.0]), "n": pa.array([1, 2, 3, 4], pa.uint64())})
    f, n = table.schema.field("f"), table.schema.field("n")
    kept = {op: table.filter(predicate(f, op, value)).column("f").to_pylist()
            for op, value in [("gt", 2.0), ("ge", 3.0), ("eq", 1.0), ("lt", 2.0), ("in", (3.0,))]}
    assert [str(x) for x in kept["gt"]] == ["nan", "3.0"] and [str(x) for x in kept["ge"]] == ["nan", "3.0"]
    assert [str(x) for x in kept["eq"]] == ["1.0", "nan"] and kept["lt"] == [1.0]
    assert [str(x) for x in kept["in"]] == ["nan", "3.0"]
    assert predicate(f, "gt", float("nan")) is None and predicate(f, "in", (1.0, float("nan"))) is None
    assert table.filter(predicate(n, "eq", Decimal("2"))).column("n").to_pylist() == [2]
    assert predicate(n, "eq", Decimal("2.5")) is None and predicate(n, "eq", -1) is None
    assert predicate(pa.field("d", pa.date32()), "eq", 1) is None
    assert predicate(pa.field("d", pa.date32()), "is_null", None) is not None
