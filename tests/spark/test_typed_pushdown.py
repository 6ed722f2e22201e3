"""Typed-column predicates evaluated on the brokers, by both implementations (pushFilters=true).

The Python source sends them as the gRPC Fetch's row filter, the JVM one in the pushdown block
of the data listener's FETCH; both are reported as pushed and checked again by Spark.  That the
brokers filtered shows in their ``spark_log_topic_bytes_out`` counter: a selective predicate
moves a small fraction of what an unfiltered read of the same topic moves.  Spark's NaN
semantics hold on floating-point columns (NaN = NaN, NaN above every other value).
"""
from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa
import pytest

from tests.support.jvm import require_jvm
from tests.support.metrics import total

pytestmark = pytest.mark.spark

ROWS = 3000


def test_typed_predicates_are_evaluated_on_the_brokers(spark: Any, log_cluster: Any, admin: Any,
                                                       topic_name: Callable[[], str], fmt: str) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=1, schema=pa.schema([("n", pa.int64()), ("f", pa.float64()),
                                                             ("s", pa.string()), ("b", pa.int8())]))
    rows = [(i, float("nan") if i == 7 else i / 2, f"payload-{i:06d}-" + "x" * 40, i % 100) for i in range(ROWS)]
    (spark.createDataFrame(rows, "n long, f double, s string, b byte").coalesce(1)
     .write.format("spark-log").option("bootstrap", log_cluster.bootstrap).option("topic", topic).mode("append").save())

    def load(push: str = "true") -> Any:
        return (spark.read.format(fmt).option("bootstrap", log_cluster.bootstrap).option("subscribe", topic)
                .option("pushFilters", push).load())

    urls = log_cluster.metrics_urls()
    assert urls or log_cluster.data_dir is None, "the test cluster's brokers serve /metrics"

    def bytes_out() -> float:
        return total(urls, "spark_log_topic_bytes_out_total", topic=topic)

    before = bytes_out()
    assert load("false").where("n >= 2990").count() == 10
    unfiltered = bytes_out() - before

    selective = load().where("n >= 2990 and s like 'payload%'")
    plan = selective._jdf.queryExecution().executedPlan().toString()
    if fmt != "spark-log":  # the JVM scan reports what it pushed (the Python source's plan does not say)
        assert "pushed [IsNotNull(n), IsNotNull(s), GreaterThanOrEqual(n,2990)]" in plan, plan
    before = bytes_out()
    assert sorted(r.n for r in selective.collect()) == list(range(2990, 3000))
    filtered = bytes_out() - before
    if urls:  # the brokers sent only the kept rows (a reused cluster: no /metrics to read)
        assert 0 < filtered < unfiltered / 20, (filtered, unfiltered)

    # the rows Spark's semantics keep, whichever predicates were pushed
    assert sorted(r.n for r in load().where("b in (3, 4) and n < 300").collect()) == [3, 4, 103, 104, 203, 204]
    assert sorted(r.n for r in load().where("f > 1495.0").collect()) == [7, 2991, 2992, 2993, 2994, 2995, 2996, 2997,
                                                                         2998, 2999]  # NaN is above every value
    assert [r.n for r in load().where("f = double('NaN')").collect()] == [7]


def test_the_jvm_reads_tiered_rows_filtered_on_the_brokers(spark: Any, log_cluster: Any, admin: Any,
                                                            topic_name: Callable[[], str]) -> None:
    """Below the brokers' local log start the JVM reader asks for the Delta tier (FETCH_TIER)
    with the same pushdown block: the brokers filter the tier's rows too, so a selective read
    of a tiered topic moves a small fraction of what an unfiltered one moves (tier reads count
    in ``spark_log_topic_bytes_out`` as fetches do)."""
    from jobs.tier import consumer_reader, tier_topic
    from spark_log import Producer
    from tests.support.tiering import TIERED, wait_local_start

    jvm = require_jvm()
    urls = log_cluster.metrics_urls()
    if not urls:
        pytest.skip("a reused cluster: no /metrics to count the brokers' bytes out")
    topic, bootstrap = topic_name(), log_cluster.bootstrap
    admin.create_topic(topic, partitions=1, replication_factor=3, config=TIERED,
                       schema=pa.schema([("n", pa.int64()), ("s", pa.string())]))
    with Producer(bootstrap) as producer:   # frames of 500 rows (a segment each); the last, tiny one stays local
        for start in [*range(0, ROWS, 500), -1]:
            n = list(range(start, start + 500)) if start >= 0 else [-1]
            table = pa.table({"n": n, "s": [f"payload-{i:06d}-" + "x" * 40 for i in n]})
            for future in producer.send_batch(topic, table, partition=0):
                future.result(timeout=30)
    tier_topic(admin, topic, reader=consumer_reader(bootstrap))
    wait_local_start(bootstrap, topic, 0, ROWS)   # every one of the ROWS is read from the tier

    def load(push: str) -> Any:
        return (spark.read.format(jvm).option("bootstrap", bootstrap).option("subscribe", topic)
                .option("startingOffsets", "earliest").option("pushFilters", push).load())

    def bytes_out() -> float:
        return total(urls, "spark_log_topic_bytes_out_total", topic=topic)

    before = bytes_out()
    assert load("false").where("n between 100 and 109").count() == 10
    unfiltered = bytes_out() - before
    assert unfiltered > ROWS * 40, unfiltered   # the tier's rows were counted: they crossed the network whole
    before = bytes_out()
    assert sorted(r.n for r in load("true").where("n between 100 and 109").collect()) == list(range(100, 110))
    filtered = bytes_out() - before
    assert 0 < filtered < unfiltered / 20, (filtered, unfiltered)


def test_jvm_pushes_the_predicates_the_python_source_pushes(spark: Any) -> None:
    """Predicate by predicate over column types and values (py4j, no Spark job): the JVM scan
    sends a typed-column predicate to the brokers exactly when the Python source does."""
    from decimal import Decimal

    from pyspark.sql.datasource import (EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull, IsNull, LessThan,
                                        LessThanOrEqual)

    from connectors.filters import _expression
    require_jvm()
    jvm = spark.sparkContext._jvm
    sources = jvm.org.apache.spark.sql.sources
    schema = pa.schema([("i8", pa.int8()), ("i32", pa.int32()), ("i64", pa.int64()), ("u8", pa.uint8()),
                        ("u64", pa.uint64()), ("f32", pa.float32()), ("f64", pa.float64()), ("s", pa.string()),
                        ("ls", pa.large_string()), ("b", pa.bool_()), ("d", pa.date32()), ("dec", pa.decimal128(10, 2))])
    values = [0, -1, 127, 128, 300, -129, 2**40, -(2**63), 1.5, float("nan"), "x", True, Decimal("5"), Decimal("2.5"), None]
    comparisons = {EqualTo: "EqualTo", GreaterThan: "GreaterThan", GreaterThanOrEqual: "GreaterThanOrEqual",
                   LessThan: "LessThan", LessThanOrEqual: "LessThanOrEqual"}
    cases: list[tuple[Any, Any]] = []
    for field in schema:
        cases += [(IsNull((field.name,)), sources.IsNull(field.name)), (IsNotNull((field.name,)), sources.IsNotNull(field.name))]
        for value in values:
            for python, name in comparisons.items():
                cases.append((python((field.name,), value), getattr(sources, name)(field.name, value)))
            in_values = [value, 1] if not isinstance(value, str) else [value, "y"]
            java_values = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, len(in_values))
            for i, v in enumerate(in_values):
                java_values[i] = v
            cases.append((In((field.name,), tuple(in_values)), sources.In(field.name, java_values)))
    java_filters = spark.sparkContext._gateway.new_array(sources.Filter, len(cases))
    for i, (_python, java) in enumerate(cases):
        java_filters[i] = java
    jvm_pushed = list(jvm.io.sparklog.spark.PushdownProbe.pushed(bytearray(schema.serialize()), java_filters))
    python_pushed = [_expression(python, schema.field(python.attribute[0])) is not None for python, _java in cases]
    differ = [(str(python), p, j) for (python, _), p, j in zip(cases, python_pushed, jvm_pushed) if p != j]
    assert not differ, "\n".join(map(str, differ))
    assert sum(python_pushed) > len(cases) // 4  # the comparison is about something
