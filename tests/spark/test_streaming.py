"""Streaming reads and writes in one process: triggers, read limits, lag, deterministic replay."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.support.jvm import require_jvm

pytestmark = pytest.mark.spark


def _fill(spark: Any, bootstrap: str, topic: str, n: int, start: int = 0, fmt: str = "spark-log") -> None:
    (spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(start, start + n)], "key string, value string")
     .write.format(fmt).option("bootstrap", bootstrap).option("topic", topic).mode("append").save())


def _stream(spark: Any, bootstrap: str, topic: str, fmt: str = "spark-log", **options: str) -> Any:
    reader = (spark.readStream.format(fmt).option("bootstrap", bootstrap).option("subscribe", topic)
              .option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _forget_commit(checkpoint: Path, batch: int) -> None:
    """Make Spark believe ``batch`` never committed, so a restart replays it."""
    for name in (str(batch), f".{batch}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)


def _collect_batches(df: Any, checkpoint: Path, **trigger: Any) -> tuple[Any, dict[int, list[tuple[int, int, bytes]]]]:
    """Run ``df`` to completion (AvailableNow) and return the query and each batch's records."""
    seen: dict[int, list[tuple[int, int, bytes]]] = {}

    def sink(batch: Any, batch_id: int) -> None:
        seen[batch_id] = sorted((r.partition, r.offset, r.value) for r in batch.collect())

    query = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    assert query.awaitTermination(180), "the availableNow query did not finish within 180 s"
    assert query.exception() is None
    return query, seen


def test_available_now_with_max_offsets_per_trigger(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Path, fmt: str) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=2)
    _fill(spark, log_cluster.bootstrap, topic, 50, fmt=fmt)
    probe = spark.sparkContext._jvm.io.sparklog.spark.PlanProbe if fmt != "spark-log" else None
    planned = probe.streamPlannings() if probe is not None else 0
    query, seen = _collect_batches(_stream(spark, log_cluster.bootstrap, topic, fmt, maxOffsetsPerTrigger="20"), tmp_path / "c")
    sizes = [len(rows) for _, rows in sorted(seen.items()) if rows]
    assert sum(sizes) == 50 and len(sizes) >= 3 and max(sizes) <= 21
    if probe is not None:  # the JVM stream plans each micro-batch's partitions once (Spark asks again: reused)
        assert probe.streamPlannings() - planned == len(seen)
    records = [r for rows in seen.values() for r in rows]
    assert len(set(records)) == 50
    progress = query.lastProgress["sources"][0]
    assert json.loads(progress["latestOffset"]) == json.loads(progress["endOffset"])  # lag is reported

    # new records after the first run are read by the next run, from where it stopped
    _fill(spark, log_cluster.bootstrap, topic, 5, start=50, fmt=fmt)
    _, more = _collect_batches(_stream(spark, log_cluster.bootstrap, topic, fmt, maxOffsetsPerTrigger="20"), tmp_path / "c")
    assert sum(len(rows) for rows in more.values()) == 5


def test_max_bytes_per_trigger_splits_the_backlog(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Path, fmt: str) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=1)
    _fill(spark, log_cluster.bootstrap, topic, 40)
    _, seen = _collect_batches(_stream(spark, log_cluster.bootstrap, topic, fmt, maxBytesPerTrigger="200"), tmp_path / "c")
    sizes = [len(rows) for rows in seen.values() if rows]
    assert sum(sizes) == 40 and len(sizes) > 1


def test_a_replayed_micro_batch_reads_the_same_records(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Path, fmt: str) -> None:
    topic = topic_name()
    admin.create_topic(topic, partitions=2)
    _fill(spark, log_cluster.bootstrap, topic, 30, fmt=fmt)
    checkpoint = tmp_path / "c"
    df = _stream(spark, log_cluster.bootstrap, topic, fmt, maxOffsetsPerTrigger="10", minPartitions="3")
    _, first = _collect_batches(df, checkpoint)
    last = max(first)
    # forget that the last batch committed: Spark replays it from its offset log
    _forget_commit(checkpoint, last)
    _fill(spark, log_cluster.bootstrap, topic, 10, start=30, fmt=fmt)  # new data must not leak into the replay
    _, second = _collect_batches(df, checkpoint)
    assert second[last] == first[last]
    assert sum(len(r) for b, r in second.items() if b != last) == 10


def test_subscribe_pattern_picks_up_new_topics(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Path) -> None:
    first, second = topic_name(), topic_name()
    prefix = first.rsplit("-", 1)[0]
    admin.create_topic(first, partitions=1)
    _fill(spark, log_cluster.bootstrap, first, 3)
    df = (spark.readStream.format("spark-log").option("bootstrap", log_cluster.bootstrap)
          .option("subscribePattern", prefix.replace("-", ".") + "-[0-9]+").option("startingOffsets", "earliest").load())
    _, seen = _collect_batches(df, tmp_path / "c")
    assert sum(len(r) for r in seen.values()) == 3
    admin.create_topic(second, partitions=2)
    _fill(spark, log_cluster.bootstrap, second, 4)
    _, seen = _collect_batches(df, tmp_path / "c")
    assert sum(len(r) for r in seen.values()) == 4


def test_stream_writer_replay_appends_nothing_twice(spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Path, fmt: str) -> None:
    source, sink = topic_name(), topic_name()
    admin.create_topic(source, partitions=2)
    admin.create_topic(sink, partitions=3)
    _fill(spark, log_cluster.bootstrap, source, 60, fmt=fmt)
    checkpoint = tmp_path / "w"

    def run() -> None:
        query = (_stream(spark, log_cluster.bootstrap, source, fmt, maxOffsetsPerTrigger="25").select("key", "value")
                 .writeStream.format(fmt).option("bootstrap", log_cluster.bootstrap).option("topic", sink)
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        assert query.awaitTermination(180), "the availableNow query did not finish within 180 s"
        assert query.exception() is None

    run()
    commits = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    _forget_commit(checkpoint, commits[-1])  # Spark replays the last batch
    run()
    out = spark.read.format(fmt).option("bootstrap", log_cluster.bootstrap).option("subscribe", sink).load()
    values = sorted(r.value.decode() for r in out.collect())
    assert values == sorted(f"v{i}" for i in range(60))


def test_one_checkpoint_serves_both_implementations(spark: Any, log_cluster: Any, admin: Any,
                                                    topic_name: Callable[[], str], tmp_path: Path) -> None:
    """A query started with the Python connector goes on with the JVM one from the same
    checkpoint (and back): the offsets JSON is the same, nothing is read twice or skipped."""
    JVM_CLASS = require_jvm()
    topic = topic_name()
    admin.create_topic(topic, partitions=2)
    checkpoint = tmp_path / "c"
    _fill(spark, log_cluster.bootstrap, topic, 20)
    _, first = _collect_batches(_stream(spark, log_cluster.bootstrap, topic, "spark-log", maxOffsetsPerTrigger="8"), checkpoint)
    offsets_py = sorted((checkpoint / "offsets").iterdir())
    _fill(spark, log_cluster.bootstrap, topic, 7, start=20)
    _, second = _collect_batches(_stream(spark, log_cluster.bootstrap, topic, JVM_CLASS, maxOffsetsPerTrigger="8"), checkpoint)
    _fill(spark, log_cluster.bootstrap, topic, 3, start=27)
    _, third = _collect_batches(_stream(spark, log_cluster.bootstrap, topic, "spark-log", maxOffsetsPerTrigger="8"), checkpoint)
    values = [r[2] for seen in (first, second, third) for rows in seen.values() for r in rows]
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(30))
    assert sum(len(r) for r in second.values()) == 7 and sum(len(r) for r in third.values()) == 3
    last_py = offsets_py[-1].read_text().splitlines()[-1]
    jvm_batch = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit() and int(p.name) in second)
    last_jvm = (checkpoint / "offsets" / str(jvm_batch)).read_text().splitlines()[-1]
    assert json.loads(last_py).keys() == json.loads(last_jvm).keys()
    assert last_jvm == json.dumps(json.loads(last_jvm))  # the Python connector's exact text form
