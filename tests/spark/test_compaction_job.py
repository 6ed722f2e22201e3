"""The Spark compaction job (``jobs/compact.py``) end to end on the local cluster, checked
with chispa against the model; the same log compacted by the broker cleaner ends the same;
the ``spark-log`` source reads the compacted topics across their gaps with
``failOnDataLoss=true``; a typed topic's tombstones written with the sink's
``tombstoneColumn`` delete their keys.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, cast

import pyarrow as pa
import pytest
from chispa import assert_df_equality

from jobs.compact import compact_topic, main
from spark_log import Producer
from tests.support.compaction import Record, expected

pytestmark = pytest.mark.spark

NOTEBOOK = Path(__file__).resolve().parents[2] / "jobs" / "notebooks" / "spark_log_compaction.py"

PARTITIONS = 2
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "4096", "delete.retention.ms": "0",
             "min.cleanable.dirty.ratio": "1.0"}  # 1.0: only on request, so the job (or the test) decides when


def _history(partition: int) -> pa.Table:
    rows = 700
    keys = [f"p{partition}-k{(i * 7) % 45}".encode() for i in range(rows)]
    values = [None if i % 19 == 0 else f"value {i} of {partition}".encode() for i in range(rows)]
    return pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                     "timestamp": pa.array([1_700_000_000_000 + i for i in range(rows)], pa.int64())})


def _write(bootstrap: str, topic: str) -> dict[int, list[Record]]:
    """The same frames to every topic it is called with (send_batch cuts frames deterministically)."""
    written: dict[int, list[Record]] = {}
    with Producer(bootstrap, batch_size=2048) as producer:
        for p in range(PARTITIONS):
            table = _history(p)
            for half in (table.slice(0, 650), table.slice(650)):  # the second call closes a segment
                firsts = [f.result(timeout=60)[1] for f in producer.send_batch(topic, half, partition=p)]
                assert firsts
            keys, values, stamps = (table.column(n).to_pylist() for n in ("key", "value", "timestamp"))
            written[p] = [Record(i, k, v, int(t or 0)) for i, (k, v, t) in enumerate(zip(keys, values, stamps))]
    return written


def _read(spark: Any, bootstrap: str, topic: str) -> Any:
    return (spark.read.format("spark-log").option("bootstrap", bootstrap).option("subscribe", topic)
            .option("failOnDataLoss", "true").load().select("partition", "offset", "key", "value"))


def _model(spark: Any, written: dict[int, list[Record]], plans: dict[int, tuple[int, int]]) -> Any:
    rows = [(p, r.offset, r.key, r.value) for p, records in written.items()
            for r in expected(records, end=plans[p][0], tombstone_horizon_ms=plans[p][1])]
    return spark.createDataFrame(rows, "partition int, offset long, key binary, value binary")


def test_the_spark_job_leaves_the_model_and_what_the_broker_cleaner_leaves(
        spark: Any, log_cluster: Any, topic_name: Callable[[], str], capsys: pytest.CaptureFixture[str]) -> None:
    by_job, by_broker = topic_name(), topic_name()
    with log_cluster.admin() as admin:
        for topic in (by_job, by_broker):
            admin.create_topic(topic, partitions=PARTITIONS, replication_factor=3, config=COMPACTED)
    written = _write(log_cluster.bootstrap, by_job)
    assert _write(log_cluster.bootstrap, by_broker) == written

    assert main(["--topic", by_job, "--bootstrap", log_cluster.bootstrap, "--dry-run"], spark=spark) == 0
    dry = capsys.readouterr().out
    assert "COMPACTION DRY RUN" in dry and f"{by_job} would keep" in dry
    with log_cluster.admin() as admin:
        assert all(s[0].cleaned_offset == 0 for s in admin.describe_compaction(by_job).values())  # nothing changed

    report = compact_topic(spark, by_job, bootstrap=log_cluster.bootstrap)
    assert report.records_before == sum(p.end for p in report.partitions) > 4 * report.records_after > 0
    assert all(600 < p.end <= 700 for p in report.partitions)  # below each partition's active segment
    assert report.bytes_after < report.bytes_before / 4
    plans = {p.partition: (p.end, p.tombstone_horizon_ms) for p in report.partitions}
    assert all(p.plan_offset >= 0 and p.broker_records_kept == p.records_after for p in report.partitions)

    with log_cluster.admin() as admin:
        admin.compact(by_broker, wait=True, timeout_s=120)
        broker = {p: found[0] for p, found in admin.describe_compaction(by_broker).items()}
        job = {p: found for p, found in admin.describe_compaction(by_job, replicas=True).items()}
    assert {p: s.cleaned_offset for p, s in broker.items()} == {p: end for p, (end, _) in plans.items()}
    assert all(len(found) == 3 and {s.cleaned_offset for s in found} == {plans[p][0]} for p, found in job.items())

    compacted = _read(spark, log_cluster.bootstrap, by_job)
    assert_df_equality(compacted, _model(spark, written, plans), ignore_row_order=True, ignore_nullable=True)
    broker_plans = {p: (s.cleaned_offset, s.plan.tombstone_horizon_ms if s.plan else 0) for p, s in broker.items()}
    assert_df_equality(_read(spark, log_cluster.bootstrap, by_broker), _model(spark, written, broker_plans),
                       ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(compacted, _read(spark, log_cluster.bootstrap, by_broker), ignore_row_order=True)

    stream_rows = (spark.readStream.format("spark-log").option("bootstrap", log_cluster.bootstrap)
                   .option("subscribe", by_job).option("startingOffsets", "earliest").load())
    query = stream_rows.writeStream.format("memory").queryName("compacted_stream").trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert query.exception() is None  # a compacted topic's gaps are no data loss
    assert spark.sql("SELECT count(*) AS n FROM compacted_stream").collect()[0]["n"] == compacted.count()


def test_typed_tombstones_from_the_sink_option_delete_keys(spark: Any, log_cluster: Any,
                                                           topic_name: Callable[[], str], fmt: str) -> None:
    """The sink's tombstoneColumn, written by either implementation (``fmt``), deletes keys."""
    topic = topic_name()
    schema = pa.schema(cast("list[pa.Field[Any]]", [
        pa.field("user", pa.string()), pa.field("score", pa.int64()), pa.field("deleted", pa.bool_())]))
    with log_cluster.admin() as admin:
        admin.create_topic(topic, partitions=1, replication_factor=3, schema=schema, key_columns=["user"],
                           config={**COMPACTED, "segment.bytes": "1024", "tombstone.column": "deleted"})
    rows = [(f"u{i % 8}", i, i >= 88 and i % 8 < 2) for i in range(96)]  # u0, u1 end deleted
    frame = spark.createDataFrame(rows, "user string, score long, deleted boolean").coalesce(1)
    writer = frame.write.format(fmt).option("bootstrap", log_cluster.bootstrap).option("topic", topic)
    with pytest.raises(Exception, match="tombstoneColumn"):  # Spark wraps the source's InvalidConfigError
        writer.option("tombstoneColumn", "score").mode("append").save()
    writer.option("tombstoneColumn", "deleted").option("batchSize", "1024").mode("append").save()
    spark.createDataFrame([("late", 0, False)], "user string, score long, deleted boolean").write.format(
        fmt).option("bootstrap", log_cluster.bootstrap).option("topic", topic).mode("append").save()

    report = compact_topic(spark, topic, bootstrap=log_cluster.bootstrap)
    end = report.partitions[0].end
    assert end >= 96 and report.partitions[0].broker_records_kept == report.partitions[0].records_after
    got = (spark.read.format("spark-log").option("bootstrap", log_cluster.bootstrap).option("subscribe", topic).load()
           .where(f"offset < {end}").select("user", "score"))
    wanted = spark.createDataFrame([(f"u{u}", max(i for i in range(96) if i % 8 == u)) for u in range(2, 8)],
                                   "user string, score long")
    assert_df_equality(got, wanted, ignore_row_order=True, ignore_nullable=True)


def test_the_compaction_notebook_runs_on_a_given_session(spark: Any, log_cluster: Any, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Databricks source format; run as Databricks would (``spark`` given, the bootstrap in the environment)."""
    text = NOTEBOOK.read_text()
    assert text.splitlines()[0] == "# Databricks notebook source"
    cells = text.split("\n# COMMAND ----------\n")
    assert len(cells) >= 8 and sum(1 for c in cells if c.strip().startswith("# MAGIC %md")) >= 4
    monkeypatch.setenv("SPARK_LOG_BOOTSTRAP", log_cluster.bootstrap)
    exec(compile(text, str(NOTEBOOK), "exec"), {"spark": spark, "__name__": "notebook"})  # noqa: S102
    assert "COMPACTION NOTEBOOK OK" in capsys.readouterr().out
