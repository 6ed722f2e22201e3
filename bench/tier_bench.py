"""Tiering benchmark: the tiering job's rows/s next to Spark writing the same rows to Parquet,
and a union read (Delta tier + brokers) next to reading the same rows from the log alone,
all in the same run on the same machine.

    python -m bench.tier_bench [--dir DIR] [--rows 100000] [--value-bytes 100] [--no-spark]

A one-broker local cluster; two identical bytes topics (``--rows`` records of
``--value-bytes`` random bytes under 16-byte keys, 2 partitions, 1 MiB segments,
``remote.storage.enable=true``, ``local.retention.ms=0``):

- **log alone**: a ``Consumer`` reads topic A from offset 0 before anything is tiered;
- **tier (consumer engine)**: ``jobs.tier.tier_topic`` on A (read ``read_committed``, Parquet
  files, one Delta commit, the brokers told): rows tiered per second;
- **tier (spark engine)**: the same on B, the rows read by the ``spark-log`` Spark source;
- **Spark -> Parquet**: ``spark.read.format("spark-log")`` of the same rows written with
  ``df.write.parquet`` (what a hand-written copy job costs);
- **union read**: once the broker deleted A's tiered segments locally, the same
  ``Consumer`` read from offset 0: the tier (Delta) up to the tiered end, then the brokers.

A benchmark, never a test: it asserts only that the union read returned every row.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from brokers.launcher.local import LocalCluster
from jobs.tier import consumer_reader, spark_reader, tier_topic
from spark_log import Admin, Consumer, Producer

TOPIC_CONFIG = {"remote.storage.enable": "true", "segment.bytes": str(1 << 20), "local.retention.ms": "0",
                "retention.ms": "-1"}


def produce(bootstrap: str, topic: str, rows: int, value_bytes: int) -> None:
    keys = [f"key-{i:012d}".encode() for i in range(rows)]
    values = [os.urandom(value_bytes) for _ in range(rows)]
    with Producer(bootstrap, batch_size=1 << 20, linger_ms=5) as producer:
        futures = []
        for p in (0, 1):
            table = pa.table({"key": keys[p::2], "value": values[p::2]})
            futures += producer.send_batch(topic, table, partition=p)
        producer.flush(120)
        for future in futures:
            future.result(timeout=120)


def read_from_zero(bootstrap: str, topic: str) -> tuple[int, float]:
    with Admin(bootstrap) as admin:
        ends = admin.list_offsets(topic, "latest")
    started = time.perf_counter()
    rows = 0
    with Consumer(bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([(topic, p) for p in ends])
        for p, end in ends.items():
            consumer.seek(topic, p, 0, end=end)
        deadline = time.monotonic() + 300
        while any(consumer.position(topic, p) < end for p, end in ends.items()) and time.monotonic() < deadline:
            rows += sum(b.num_rows for b in consumer.poll_arrow(0.5))
    return rows, time.perf_counter() - started


def wait_local_delete(bootstrap: str, topic: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    with Admin(bootstrap) as admin:
        while time.monotonic() < deadline:
            infos = admin.describe_tier(topic).partitions.values()
            if all(info.log_start_offset > 0 and info.log_start_offset >= info.tiered_end - (1 << 14)
                   for info in infos):
                return
            time.sleep(0.2)   # polling the broker's maintenance (every 5 s), with a deadline
    print("  (the broker had not deleted every tiered segment locally in time: the union read is partly local)")


def line(name: str, rows: int, seconds: float, note: str = "") -> None:
    print(f"  {name:<28} {rows:>9,} rows  {seconds:7.2f} s  {rows / seconds if seconds else 0:>11,.0f} rows/s  {note}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tier_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=".spark-log/bench")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args(argv)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="tier-bench-", dir=args.dir))
    cluster = LocalCluster(root / "cluster", brokers=1)
    spark = None
    try:
        cluster.up(timeout_s=60)
        bootstrap = cluster.bootstrap
        with Admin(bootstrap) as admin:
            for name in ("bench-a", "bench-b"):
                admin.create_topic(name, partitions=2, replication_factor=1, config=TOPIC_CONFIG)
        for name in ("bench-a", "bench-b"):
            produce(bootstrap, name, args.rows, args.value_bytes)
        print(f"tier bench: {args.rows:,} rows of {args.value_bytes}-byte values, 2 partitions, 1 MiB segments, "
              f"one broker ({root})")
        log_rows, log_s = read_from_zero(bootstrap, "bench-a")
        with Admin(bootstrap) as admin:
            started = time.perf_counter()
            done = tier_topic(admin, "bench-a", reader=consumer_reader(bootstrap))
            tier_s = time.perf_counter() - started
        line("tier (consumer engine)", done.rows, tier_s, "read_committed -> Parquet -> Delta commit -> brokers told")
        if not args.no_spark:
            from connectors.session import local_session

            spark = local_session(bootstrap, master="local[2]", connector="python")
            spark.range(1).collect()   # the JVM and Python workers up before timing
            with Admin(bootstrap) as admin:
                started = time.perf_counter()
                spark_done = tier_topic(admin, "bench-b", reader=spark_reader(spark, bootstrap))
                spark_tier_s = time.perf_counter() - started
            line("tier (spark engine)", spark_done.rows, spark_tier_s, "the spark-log source reads, deltalake writes")
            ends = {str(p): e for p, (_, e) in done.tiered.items()}
            import json

            started = time.perf_counter()
            (spark.read.format("spark-log").option("subscribe", "bench-b").option("startingOffsets", "earliest")
             .option("endingOffsets", json.dumps({"bench-b": ends})).option("includeHeaders", "true").load()
             .write.mode("overwrite").parquet(str(root / "parquet")))
            parquet_s = time.perf_counter() - started
            line("Spark -> Parquet", done.rows, parquet_s, "the same rows, spark.read...write.parquet")
        wait_local_delete(bootstrap, "bench-a")
        union_rows, union_s = read_from_zero(bootstrap, "bench-a")
        assert union_rows == log_rows == args.rows, (union_rows, log_rows)
        line("read: log alone", log_rows, log_s, "Consumer from offset 0, every segment on the broker")
        line("read: union (tier + log)", union_rows, union_s,
             f"Consumer from offset 0, {done.rows:,} rows from Delta, the rest from the broker")
    finally:
        if spark is not None:
            spark.stop()
        cluster.down(timeout_s=20)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
