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
