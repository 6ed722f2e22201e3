"""Union read through Spark, both implementations (``fmt``: the Python ``spark-log`` source,
which reads the Delta tier through the Consumer, and the JVM one, which reads it through the
brokers' FETCH_TIER): a tiered topic whose older segments the brokers deleted reads whole from
offset 0, batch and streaming, with the same columns, timestamps and headers as a Consumer
reads; a streaming query that was held back while local retention ran past its position keeps
going from the Delta tier; failOnDataLoss fires only for records gone from both.  The tiering
job's Spark engine tiers too (chispa compares the DataFrames)."""
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
    from connectors.session import JVM_CLASS, jvm_jar

    if jvm_jar() is not None:   # the JVM implementation reads the tier too (FETCH_TIER)
        jvm = (spark.read.format(JVM_CLASS).option("bootstrap", bootstrap).option("subscribe", topic)
               .option("startingOffsets", "earliest").load().select("partition", "offset", "key", "value"))
        assert_df_equality(jvm, _expected(spark, produced), ignore_row_order=True, ignore_nullable=True)
    # the Delta table is an ordinary table: the same rows through deltalake
    from deltalake import DeltaTable

    held = DeltaTable(str(Path(location) / topic)).to_pyarrow_table(columns=["partition", "offset", "value"])
    assert sorted(zip(held["partition"].to_pylist(), held["offset"].to_pylist(), held["value"].to_pylist())) == \
        sorted((p, o, v) for p, o, _, v in produced if o < tiered[p][1])


def test_stream_held_back_while_retention_runs_past_it_keeps_going(spark: Any, log_cluster: Any, tmp_path: Path,
                                                                    topic_name: Callable[[], str], fmt: str) -> None:
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
        return (spark.readStream.format(fmt).option("bootstrap", bootstrap).option("subscribe", topic)
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
                                                           topic_name: Callable[[], str], fmt: str) -> None:
    import json
    import time

    bootstrap, topic = log_cluster.bootstrap, topic_name()
    create_tiered(bootstrap, topic, partitions=1, config={"retention.ms": "60000"})
    produced = produce(bootstrap, topic, 200, partitions=1)
    with Admin(bootstrap) as admin:
        tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        wait_local_start(bootstrap, topic, 0, 1)

        def read(fail: str) -> Any:
            return (spark.read.format(fmt).option("bootstrap", bootstrap).option("subscribe", topic)
                    .option("failOnDataLoss", fail)
                    .option("startingOffsets", json.dumps({topic: {"0": 0}})).load().select("offset"))

        assert read("true").count() == len(produced)          # below the brokers' start, but in the tier: no loss
        # tier retention as if an hour passed: the tiered history goes from Delta too
        gone = tier_topic(admin, topic, reader=consumer_reader(bootstrap),
                          now_ms=int(time.time() * 1000) + 3_600_000).retention_starts[0]
    assert gone > 0
    # records written after the retention ran stay (every older one may be gone from both: the
    # first round's TIERED control frame closes the last records' segment, so the second round
    # can tier them, and its retention delete them)
    more = produce(bootstrap, topic, 10, start=200, partitions=1)
    with pytest.raises(Exception, match="data loss"):
        read("true").collect()
    rest = sorted(r.offset for r in read("false").collect())
    everything = [o for _, o, _, _ in produced + more]
    assert rest and rest == [o for o in everything if o >= rest[0]] and 0 < rest[0]   # from the first kept, each once
    assert [o for o in everything if o >= gone] == [o for o in rest if o >= gone]     # none the tier still held is lost


def _consumer_rows(bootstrap: str, topic: str, columns: list[str], partitions: int = 1) -> list[tuple[Any, ...]]:
    """Every record of ``topic`` through a Consumer (its union read), as ``columns`` tuples
    (``timestamp`` in ms)."""
    import pyarrow as pa

    from spark_log import Consumer

    with Admin(bootstrap) as admin:
        ends = admin.list_offsets(topic, "latest")
    out: list[tuple[Any, ...]] = []
    with Consumer(bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        for p in range(partitions):
            consumer.seek(topic, p, 0, end=ends[p])

        def done() -> bool:
            for batch in consumer.poll_arrow(0.2):
                table = pa.Table.from_batches([batch])
                table = table.set_column(table.schema.get_field_index("timestamp"), "timestamp",
                                         table.column("timestamp").cast(pa.int64()))
                out.extend(tuple(r[c] for c in columns) for r in table.to_pylist())
            out.sort(key=lambda row: row[:2])
            return all(consumer.position(topic, p) >= ends[p] for p in range(partitions))

        wait_until(done, timeout=60, message=f"reading {topic} to {ends}")
    return out


def _spark_rows(df: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    from pyspark.sql import functions as F

    picked = [F.expr("unix_millis(timestamp)").alias("timestamp") if c == "timestamp" else F.col(c) for c in columns]
    rows = [tuple(r) for r in df.select(*picked).collect()]
    return sorted((tuple(bytes(v) if isinstance(v, (bytearray, memoryview)) else
                         [(h.key, bytes(h.value)) for h in v] if isinstance(v, list) else v for v in row)
                   for row in rows), key=lambda row: row[:2])


def test_union_read_gives_the_consumers_rows_columns_timestamps_and_headers(
        spark: Any, log_cluster: Any, topic_name: Callable[[], str], fmt: str) -> None:
    """Both implementations, batch: a bytes topic with headers and a typed topic, read from 0
    and over a range that starts in the tier and ends on the brokers, give exactly what a
    Consumer reads (offsets, timestamps, headers, typed columns); a tier table deleted by hand
    fails the read (TierUnavailableError), it is never skipped."""
    import json

    import pyarrow as pa

    from spark_log import Producer

    bootstrap, plain, typed = log_cluster.bootstrap, topic_name(), topic_name()
    create_tiered(bootstrap, plain, partitions=1)
    with Producer(bootstrap, linger_ms=1, batch_size=600) as producer:
        futures = [producer.send(plain, f"v{i}".encode() * 8, key=f"k{i}".encode() if i % 3 else None,
                                 headers=[("h", f"x{i}".encode()), ("n", str(i))] if i % 2 else None, partition=0)
                   for i in range(120)]
        for f in futures:
            f.result(timeout=60)
    schema = pa.schema([("user", pa.string()), ("n", pa.int64())])
    with Admin(bootstrap) as admin:
        admin.create_topic(typed, partitions=1, replication_factor=3, schema=schema,
                           config={"remote.storage.enable": "true", "segment.bytes": "1024", "local.retention.ms": "0"})
    with Producer(bootstrap, batch_size=300) as producer:
        for i in range(0, 150, 10):   # one frame (one timestamp) per send
            for f in producer.send_batch(typed, pa.table({"user": [f"u{j}" for j in range(i, i + 10)],
                                                          "n": list(range(i, i + 10))}, schema=schema), partition=0):
                f.result(timeout=60)
    starts = {}
    for topic in (plain, typed):
        with Admin(bootstrap) as admin:
            end = tier_topic(admin, topic, reader=consumer_reader(bootstrap)).tiered[0][1]
        starts[topic] = wait_local_start(bootstrap, topic, 0, 1).log_start_offset
        assert 0 < starts[topic] <= end

    def read(topic: str, **options: str) -> Any:
        reader = spark.read.format(fmt).option("bootstrap", bootstrap).option("subscribe", topic)
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load()

    columns = ["partition", "offset", "key", "value", "timestamp", "timestampType", "headers", "topic"]
    expected = [(*r[:5], 0, [(h["key"], h["value"]) for h in r[5]] if r[5] is not None else None, plain)
                for r in _consumer_rows(bootstrap, plain, columns[:5] + ["headers"])]
    got = _spark_rows(read(plain, startingOffsets="earliest", includeHeaders="true"), columns)
    assert got == expected
    assert any(r[1] < starts[plain] for r in got) and any(r[6] for r in got if r[1] < starts[plain])
    with Admin(bootstrap) as admin:
        log_end = admin.list_offsets(plain, "latest")[0]
    # a range from the tier onto the brokers, inside the log: local retention may have moved the
    # local start up to the last tiered segment, and a range past the log's end waits for
    # records that never come (pollTimeoutMs; this failed once in CI); below 0 an offset means
    # earliest or latest
    lo, hi = max(starts[plain] - 7, 0), min(starts[plain] + 5, log_end)
    assert lo < starts[plain] < hi
    bounded = read(plain, startingOffsets=json.dumps({plain: {"0": lo}}), endingOffsets=json.dumps({plain: {"0": hi}}),
                   includeHeaders="true")
    assert _spark_rows(bounded, columns) == [r for r in expected if lo <= r[1] < hi]
    typed_columns = ["partition", "offset", "user", "n", "timestamp"]
    got_typed = _spark_rows(read(typed, startingOffsets="earliest"), typed_columns)
    assert got_typed == _consumer_rows(bootstrap, typed, typed_columns)
    assert [r[3] for r in got_typed] == list(range(150)) and got_typed[0][1] < starts[typed]
    # a tier that cannot be read is an error, never a gap, also with failOnDataLoss=false
    import shutil

    with Admin(bootstrap) as admin:
        shutil.rmtree(Path(admin.describe_tier(typed).location) / typed)   # someone deleted the table by hand
    with pytest.raises(Exception, match="TierUnavailableError|TIER_UNAVAILABLE"):
        read(typed, startingOffsets="earliest", failOnDataLoss="false").collect()
