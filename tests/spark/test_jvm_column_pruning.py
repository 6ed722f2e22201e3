"""The JVM source's column pruning down to the frames' buffers (``RangeReader.Pruned``): any
subset of a typed topic's columns, nested ones among them, reads the same values as the
whole; and the compaction job through the JVM source (keys and offsets only, its count
checked against the leader's) leaves the model's records."""
from __future__ import annotations

from typing import Any, Callable

import pytest
from chispa import assert_df_equality

from jobs.compact import compact_topic
from spark_log import Producer
from tests.support.jvm import require_jvm
from tests.spark.test_compaction_job import COMPACTED, PARTITIONS, _history, _model, _read
from tests.spark.test_roundtrip import TYPED_SCHEMA, _typed_rows, _typed_topic, _write
from tests.support.compaction import Record

pytestmark = pytest.mark.spark


@pytest.fixture
def jvm() -> str:
    return require_jvm()


def test_any_subset_of_columns_reads_the_same_values(spark: Any, log_cluster: Any, admin: Any,
                                                     topic_name: Callable[[], str], jvm: str) -> None:
    topic = topic_name()
    df = spark.createDataFrame(_typed_rows(), TYPED_SCHEMA)
    _typed_topic(admin, topic, df, partitions=1)
    _write(df, log_cluster.bootstrap, topic, "spark-log")  # the Python writer: LZ4 bodies, each buffer compressed
    out = spark.read.format(jvm).option("bootstrap", log_cluster.bootstrap).option("subscribe", topic).load()
    # after a list, a map and a struct (buffers of children skipped), alone, and out of order
    for columns in (["point", "id"], ["raw"], ["attrs", "day"], ["tags", "amount", "name"], ["ts"]):
        by_id = [*columns, "id"] if "id" not in columns else columns
        assert_df_equality(out.select(*by_id).orderBy("id"), df.select(*by_id).orderBy("id"), ignore_nullable=True)
    assert sorted(r.offset for r in out.select("offset").collect()) == [0, 1, 2]  # no Arrow field at all
    assert out.count() == 3

def test_the_compaction_job_through_the_jvm_source(spark: Any, log_cluster: Any, topic_name: Callable[[], str],
                                                   jvm: str) -> None:
    topic = topic_name()
    with log_cluster.admin() as admin:
        admin.create_topic(topic, partitions=PARTITIONS, replication_factor=1, config=COMPACTED)
    written: dict[int, list[Record]] = {}
    with Producer(log_cluster.bootstrap, batch_size=2048) as producer:
        for p in range(PARTITIONS):
            table = _history(p)
            for half in (table.slice(0, 650), table.slice(650)):  # the second call closes a segment
                assert [f.result(timeout=60) for f in producer.send_batch(topic, half, partition=p)]
            keys, values, stamps = (table.column(n).to_pylist() for n in ("key", "value", "timestamp"))
            written[p] = [Record(i, k, v, int(t or 0)) for i, (k, v, t) in enumerate(zip(keys, values, stamps))]
    report = compact_topic(spark, topic, bootstrap=log_cluster.bootstrap, source=jvm)
    assert all(p.plan_offset >= 0 and p.broker_records_kept == p.records_after for p in report.partitions)
    assert report.records_before == sum(p.end for p in report.partitions) > 4 * report.records_after > 0
    plans = {p.partition: (p.end, p.tombstone_horizon_ms) for p in report.partitions}
    assert_df_equality(_read(spark, log_cluster.bootstrap, topic), _model(spark, written, plans),
                       ignore_row_order=True, ignore_nullable=True)
