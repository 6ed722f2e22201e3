"""Union read through Spark (the Python ``spark-log`` source): a tiered topic whose older
segments the brokers deleted reads whole from offset 0, batch and streaming, and a streaming
query that was held back while local retention ran past its position keeps going from the
Delta tier.  The tiering job's Spark engine tiers too (chispa compares the DataFrames)."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

import pytest
from chispa import assert_df_equality
from pyspark.sql import Row as SparkRow

from jobs.tier import consumer_reader, spark_reader, tier_topic
from spark_log import Admin
from tests.support.tiering import Row, create_tiered, produce, tier_rows, wait_local_start
from tests.support.wait import wait_until

pytestmark = pytest.mark.spark


def _expected(spark: Any, rows: list[Row]) -> Any:
    return spark.createDataFrame([SparkRow(partition=p, offset=o, key=k, value=v) for p, o, k, v in rows],
                                 "partition int, offset long, key binary, value binary")


def _tier_and_wait(bootstrap: str, topic: str, reader: Any, partitions: int = 2) -> dict[int, tuple[int, int]]:
    with Admin(bootstrap) as admin:
        result = tier_topic(admin, topic, reader=reader)
    for p, (_, end) in result.tiered.items():
        wait_local_start(bootstrap, topic, p, 1)
        assert end > 0
    assert len(result.tiered) == partitions
    return result.tiered


def test_batch_read_from_zero_crosses_tier_and_brokers(spark: Any, log_cluster: Any,
                                                         topic_name: Callable[[], str]) -> None:
    bootstrap, topic = log_cluster.bootstrap, topic_name()
    create_tiered(bootstrap, topic)
    produced = produce(bootstrap, topic, 300)
    tiered = _tier_and_wait(bootstrap, topic, spark_reader(spark, bootstrap))   # the job's Spark engine
    with Admin(bootstrap) as admin:
        location = admin.describe_tier(topic).location
        local = admin.describe_tier(topic).partitions
    assert tier_rows(location, topic) == sorted((p, o) for p, (s, e) in tiered.items() for o in range(s, e))
    assert all(info.log_start_offset > 0 for info in local.values())     # the brokers no longer hold offset 0
    df = (spark.read.format("spark-log").option("subscribe", topic).option("startingOffsets", "earliest").load()
          .select("partition", "offset", "key", "value"))
    assert_df_equality(df, _expected(spark, produced), ignore_row_order=True, ignore_nullable=True)
    # the JVM implementation does not read the tier yet: it says so, naming the way out, even with
    # failOnDataLoss=false (it must never skip tiered records as if they were lost)
    from connectors.session import JVM_CLASS, jvm_jar

    if jvm_jar() is not None:
        for fail in ("true", "false"):
            with pytest.raises(Exception, match="TierUnavailableError.*Python connector"):
                (spark.read.format(JVM_CLASS).option("bootstrap", bootstrap).option("subscribe", topic)
                 .option("startingOffsets", "earliest").option("failOnDataLoss", fail).load().collect())
    # the Delta table is an ordinary table: the same rows through deltalake
    from deltalake import DeltaTable

    held = DeltaTable(str(Path(location) / topic)).to_pyarrow_table(columns=["partition", "offset", "value"])
    assert sorted(zip(held["partition"].to_pylist(), held["offset"].to_pylist(), held["value"].to_pylist())) == \
        sorted((p, o, v) for p, o, _, v in produced if o < tiered[p][1])


def test_stream_held_back_while_retention_runs_past_it_keeps_going(spark: Any, log_cluster: Any, tmp_path: Path,
                                                                    topic_name: Callable[[], str]) -> None:
    bootstrap, topic = log_cluster.bootstrap, topic_name()
    create_tiered(bootstrap, topic)
    first = produce(bootstrap, topic, 200)
    batches: dict[int, list[Row]] = {}   # by batch id: a batch Spark replays after the stop replaces itself
    lock = threading.Lock()

    def sink(batch: Any, batch_id: int) -> None:
        rows = batch.select("partition", "offset", "key", "value").collect()
        with lock:
            batches[batch_id] = [(r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows]

    def seen() -> list[Row]:
        with lock:
            return [row for rows in batches.values() for row in rows]

    def stream() -> Any:
        return (spark.readStream.format("spark-log").option("subscribe", topic)
                .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "30").load())

    checkpoint = tmp_path / "checkpoint"
    query = stream().writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint)).start()
    try:
        wait_until(lambda: len(seen()) > 0, timeout=120, message="the first micro-batch never ran")
    finally:
        query.stop()
    position = {p: max((o for q, o, _, _ in seen() if q == p), default=-1) + 1 for p in (0, 1)}
    more = produce(bootstrap, topic, 200, start=200)
    tiered = _tier_and_wait(bootstrap, topic, consumer_reader(bootstrap))
    for p in (0, 1):   # retention ran past where the query stopped
        assert wait_local_start(bootstrap, topic, p, position[p] + 1).log_start_offset > position[p]
        assert tiered[p][1] > position[p]
    restarted = stream().writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint)) \
        .trigger(availableNow=True).start()
    assert restarted.awaitTermination(180), "the restarted query did not finish within 180 s"
    assert restarted.exception() is None
    assert sorted(seen()) == sorted(first + more)          # every record once: none lost, none twice
    assert len(seen()) == len(set(seen()))


def test_fail_on_data_loss_only_for_records_gone_from_both(spark: Any, log_cluster: Any,
                                                           topic_name: Callable[[], str]) -> None:
    import json
    import time

    bootstrap, topic = log_cluster.bootstrap, topic_name()
    create_tiered(bootstrap, topic, partitions=1, config={"retention.ms": "60000"})
    produced = produce(bootstrap, topic, 200, partitions=1)
    with Admin(bootstrap) as admin:
        tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        wait_local_start(bootstrap, topic, 0, 1)

        def read(fail: str) -> Any:
            return (spark.read.format("spark-log").option("subscribe", topic).option("failOnDataLoss", fail)
                    .option("startingOffsets", json.dumps({topic: {"0": 0}})).load().select("offset"))

        assert read("true").count() == len(produced)          # below the brokers' start, but in the tier: no loss
        # tier retention as if an hour passed: the tiered history goes from Delta too
        gone = tier_topic(admin, topic, reader=consumer_reader(bootstrap),
                          now_ms=int(time.time() * 1000) + 3_600_000).retention_starts[0]
    assert gone > 0
    with pytest.raises(Exception, match="data loss"):
        read("true").collect()
    rest = sorted(r.offset for r in read("false").collect())
    assert rest == [o for _, o, _, _ in produced if o >= rest[0]] and 0 < rest[0] <= gone   # from the first kept
