"""Spark connector benchmark, side by side with Spark's own parquet streaming source/sink.

    python -m bench.connector_bench [--rows N] [--bootstrap HOST:PORT,...]

Measured in one run, on the same data and the same local SparkSession (local[2]):

1. readStream rows/s: a topic (bytes: key, value) into the ``noop`` sink, against
   parquet files holding the same rows read by Spark's file streaming source into ``noop``
   (both Trigger.AvailableNow; rows/s = input rows / summed trigger execution time).
2. writeStream rows/s: Spark's ``rate-micro-batch`` source into a topic, against the same
   source into Spark's parquet file sink.
3. Projection: Arrow bytes delivered to a reader of a typed topic with 20 columns when
   it asks for 2 of them (projection pushed to the brokers) vs all 20.

Prints each figure and the ratio; it is never part of the test pass/fail.  Without
``--bootstrap`` it starts the embedded local cluster in a temporary folder (3 nodes) and
stops it at the end.  Bounded to a few minutes on a laptop.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq


def _cluster(bootstrap: str | None, root: Path) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    launcher = [sys.executable, "-m", "brokers.launcher.local"]
    data = root / "cluster"
    subprocess.run([*launcher, "up", "--brokers", "3", "--data-dir", str(data)], check=True, stdout=subprocess.DEVNULL)
    try:
        yield (data / "bootstrap").read_text().strip()
    finally:
        subprocess.run([*launcher, "down", "--data-dir", str(data)], stdout=subprocess.DEVNULL)


def _rate(query: Any) -> float:
    """Rows per second over every trigger of ``query`` that read rows."""
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    millis = sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress if p["numInputRows"])
    return rows / max(millis, 1) * 1000


def _run_available_now(df: Any, checkpoint: Path) -> Any:
    query = df.writeStream.format("noop").option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination()
    return query


def _run_batches(df: Any, sink: str, checkpoint: Path, batches: int, **options: str) -> Any:
    writer = df.writeStream.format(sink).option("checkpointLocation", str(checkpoint))
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.start()
    try:
        while not query.exception() and sum(1 for p in query.recentProgress if p["numInputRows"]) < batches:
            query.awaitTermination(0.2)
    finally:
        query.stop()
    return query


def _keyvalue(rows: int) -> pa.Table:
    import numpy as np

    ids = np.arange(rows)
    keys = pa.array([b"key-%08d" % i for i in range(rows)])
    values = pa.array(np.char.add(b"value-payload-", ids.astype("S10")).astype(object))
    return pa.table({"key": keys, "value": values.cast(pa.binary())})


def bench_read(spark: Any, bootstrap: str, root: Path, rows: int) -> tuple[float, float]:
    from spark_log import Admin, Producer

    topic = f"bench-read-{os.getpid()}"
    table = _keyvalue(rows)
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=2)
    with Producer(bootstrap, linger_ms=0, batch_size=1 << 20) as producer:
        for i, batch in enumerate(table.to_batches(max_chunksize=20_000)):
            producer.send_batch(topic, batch, partition=i % 2)
    files = root / "read-parquet"
    files.mkdir()
    for i, batch in enumerate(table.to_batches(max_chunksize=rows // 2)):
        pq.write_table(pa.Table.from_batches([batch]), files / f"part-{i}.parquet")

    ours = _rate(_run_available_now(
        spark.readStream.format("spark-log").option("bootstrap", bootstrap).option("subscribe", topic)
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(rows // 2)).load(),
        root / "ck-read-ours"))
    theirs = _rate(_run_available_now(
        spark.readStream.schema("key binary, value binary").option("maxFilesPerTrigger", "1").parquet(str(files)),
        root / "ck-read-parquet"))
    return ours, theirs


def bench_write(spark: Any, bootstrap: str, root: Path, rows: int) -> tuple[float, float]:
    from spark_log import Admin

    topic = f"bench-write-{os.getpid()}"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=2)

    def source() -> Any:
        return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", str(rows // 4)).option("numPartitions", "2").load()
                .selectExpr("cast(concat('key-', value) as binary) as key", "cast(concat('value-payload-', value) as binary) as value"))

    ours = _rate(_run_batches(source(), "spark-log", root / "ck-write-ours", 4, bootstrap=bootstrap, topic=topic))
    theirs = _rate(_run_batches(source(), "parquet", root / "ck-write-parquet", 4, path=str(root / "write-parquet")))
    return ours, theirs


def bench_projection(bootstrap: str, rows: int) -> tuple[int, int]:
    import numpy as np
    from spark_log import Admin, Consumer, Producer

    topic = f"bench-projection-{os.getpid()}"
    columns = {f"c{i:02d}": np.arange(rows, dtype=np.int64) * (i + 1) for i in range(20)}
    table = pa.table(columns)
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=1, schema=table.schema)
    with Producer(bootstrap, linger_ms=0) as producer:
        for batch in table.to_batches(max_chunksize=10_000):
            producer.send_batch(topic, batch, partition=0)

    def moved(projection: list[str] | None) -> int:
        total, seen = 0, 0
        with Consumer(bootstrap, columns=projection, auto_offset_reset="earliest") as consumer:
            consumer.assign([(topic, 0)])
            consumer.seek(topic, 0, 0)
            while seen < rows:
                for batch in consumer.poll_arrow(timeout=1.0):
                    data = [n for n in batch.schema.names if n not in ("topic", "partition", "offset", "timestamp")]
                    total += sum(batch.column(n).nbytes for n in data) + batch.column("offset").nbytes
                    seen += batch.num_rows
        return total

    return moved(["c00", "c01"]), moved(None)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--bootstrap", default=os.environ.get("SPARK_LOG_BOOTSTRAP"))
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="connector-bench-") as tmp:
        root = Path(tmp)
        clusters = _cluster(args.bootstrap, root)
        bootstrap = next(clusters)
        try:
            from connectors.session import local_session

            spark = local_session(bootstrap, app_name="connector-bench", conf={"spark.sql.shuffle.partitions": "2"})
            spark.sparkContext.setLogLevel("ERROR")
            read_ours, read_parquet = bench_read(spark, bootstrap, root, args.rows)
            write_ours, write_parquet = bench_write(spark, bootstrap, root, args.rows)
            spark.stop()
            projected, full = bench_projection(bootstrap, args.rows // 4)
        finally:
            clusters.close()
    print(f"connector bench ({args.rows} rows, local[2], {time.monotonic() - started:.0f} s)")
    print(f"  readStream  spark-log -> noop     {read_ours:12,.0f} rows/s | parquet source {read_parquet:12,.0f} rows/s | ratio {read_ours / read_parquet:5.2f}x")
    print(f"  writeStream rate -> spark-log     {write_ours:12,.0f} rows/s | parquet sink   {write_parquet:12,.0f} rows/s | ratio {write_ours / write_parquet:5.2f}x")
    print(f"  projection 2 of 20 columns        {projected:12,} bytes  | all columns    {full:12,} bytes  | {full / max(projected, 1):5.1f}x fewer")


if __name__ == "__main__":
    main()
