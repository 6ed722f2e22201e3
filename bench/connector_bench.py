"""Spark connector benchmark, side by side with Spark's own parquet streaming source/sink.

    python -m bench.connector_bench [--rows N] [--rounds R] [--bootstrap HOST:PORT,...]

Measured in one run, on the same data and the same local SparkSession (local[2]):

1. readStream rows/s: a bytes topic (2 partitions, N/2 records each) into the ``noop``
   sink, against 4 parquet files of N/4 rows each (the same key/value rows) read by
   Spark's file streaming source into ``noop``.  Same trigger shape on both sides:
   Trigger.AvailableNow, 2 triggers of N/2 rows, 2 tasks of N/4 rows per trigger
   (``maxOffsetsPerTrigger`` = N/2 against ``maxFilesPerTrigger`` = 2; the bench checks
   that Spark plans 2 tasks for 2 of the files).  A reader of the topic gets 7 columns
   (key, value, headers, timestamp, topic, partition, offset) and these files hold 2, so
   the JVM implementation is also measured on the same columns both ways: the topic's
   ``select("key", "value")`` (pruned in the source) against those files, and the whole
   topic against 4 parquet files of the rows read back from it with all 7 columns.
2. writeStream rows/s: Spark's ``rate-micro-batch`` source (N/4 rows per batch, 2
   partitions, so 2 write tasks per batch) into a fresh topic, against the same source
   into Spark's parquet file sink; each query runs 5 micro-batches and batches 1-4 (N
   rows) are timed.  Batch 0 is left out on every side: it pays the query's start-up,
   which for a Python sink includes new Python workers (stopping the previous query
   mid-batch kills its workers; a long-running query pays that once).
3. Projection: Arrow bytes delivered to a reader of a typed topic with 20 columns when
   it asks for 2 of them (projection pushed to the brokers) vs all 20.

Fairness: rows/s = input rows / summed ``triggerExecution`` of the timed triggers (the
same clock, from Spark's own progress reports, on both sides); the ratio of the median
triggers' rows/s is printed too (less moved by a load spike that hits one side).  Round 0 runs every query
once and is discarded (JVM code generation, Python worker start-up and imports are paid
there, by every side alike); then ``--rounds`` measured rounds, the order of the sides
rotating each round.  All read rounds run before the write rounds (so no read follows a
stopped query).  Every query must deliver every row: reads must report exactly N input
rows in 2 triggers; after a write the topic must hold each row of every micro-batch the
query reported (at least batches 0-4; a fast sink commits more before the stop lands)
exactly once (read back with a plain ``Consumer``), and so must the parquet sink's committed
files (the batch the stop cut may add rows, each at most once).
Anything else aborts the bench with ``CHECK FAILED``.

Ceiling peers (same run, same shapes): ``bench-memory``, a Python Data Source that yields
the same Arrow batches from memory, and ``bench-discard``, a Python Arrow sink that drops
them (``bench.connector_ceiling``).  spark-log / ceiling is the share of the Python Data
Source path's best that the connector reaches.

Prints each figure and the ratios (never part of the test pass/fail) with the load
average.  Without ``--bootstrap`` it starts the embedded local cluster in a temporary
folder (3 nodes) and stops it at the end.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from connectors.session import JVM_CLASS, jvm_jar

from bench.connector_ceiling import DiscardSource, MemorySource, keyvalue_batch

_CHUNK = 20_000  # rows per produced frame (and per ceiling batch)
_TIMED_BATCHES = 4  # write micro-batches timed per query (after its first)


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


def _fail(message: str) -> None:
    raise SystemExit(f"CHECK FAILED: {message}")


@dataclass
class Tally:
    """Rows and trigger milliseconds of one side over the measured rounds.

    ``rate`` is summed rows / summed time; ``median_rate`` the rows/s of the median
    trigger, which a load spike from another process hitting one trigger moves less.
    """

    rows: int = 0
    millis: int = 0
    rounds: list[float] = field(default_factory=list)
    triggers: list[float] = field(default_factory=list)

    def add(self, rows: int, millis: int, triggers: list[float]) -> None:
        self.rows += rows
        self.millis += millis
        self.rounds.append(rows / max(millis, 1) * 1000)
        self.triggers += triggers

    @property
    def rate(self) -> float:
        return self.rows / max(self.millis, 1) * 1000

    @property
    def median_rate(self) -> float:
        return statistics.median(self.triggers) if self.triggers else 0.0


_DETAILS: list[str] = []  # --details: each timed trigger's phases


def _timed(query: Any, triggers: int, *, skip: int = 0, label: str = "") -> tuple[int, int, list[float]]:
    """(rows, ms, rows/s of each trigger) of ``triggers`` triggers of ``query`` that read
    rows, after the first ``skip``."""
    done = [p for p in query.recentProgress if p["numInputRows"]][skip:skip + triggers]
    if len(done) < triggers:
        _fail(f"query {query.name or query.id} ran {len(done) + skip} triggers with rows, expected {triggers + skip}")
    for p in done:
        phases = " ".join(f"{k}={v}" for k, v in sorted(p["durationMs"].items()) if v)
        _DETAILS.append(f"    {label:<24} batch {p['batchId']} rows {p['numInputRows']}: {phases}")
    each = [p["numInputRows"] / max(p["durationMs"].get("triggerExecution", 0), 1) * 1000 for p in done]
    return sum(p["numInputRows"] for p in done), sum(p["durationMs"].get("triggerExecution", 0) for p in done), each


def _available_now(df: Any, sink: str, checkpoint: Path) -> Any:
    query = df.writeStream.format(sink).option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination()
    return query


def _until_batches(df: Any, sink: str, checkpoint: Path, batches: int, **options: str) -> Any:
    writer = df.writeStream.format(sink).option("checkpointLocation", str(checkpoint))
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.start()
    try:
        while sum(1 for p in query.recentProgress if p["numInputRows"]) < batches:
            if query.exception() is not None:
                _fail(f"{sink} query failed: {query.exception()}")
            query.awaitTermination(0.2)
    finally:
        query.stop()
    return query


# -- read -----------------------------------------------------------------------------------


def setup_read(spark: Any, bootstrap: str, root: Path, rows: int) -> tuple[str, Path, Path]:
    """The same rows in a 2-partition topic and in 4 parquet files of their key and value,
    and 4 more of every column a reader of the topic gets (the rows read back from it)."""
    from spark_log import Admin, Consumer, Producer

    topic = f"bench-read-{os.getpid()}"
    table = pa.Table.from_batches([keyvalue_batch(0, rows)])
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=2)
    with Producer(bootstrap, linger_ms=0, batch_size=1 << 20) as producer:
        for i, batch in enumerate(table.to_batches(max_chunksize=_CHUNK)):
            producer.send_batch(topic, batch, partition=i % 2)
        producer.flush()
    files = root / "read-parquet"
    files.mkdir()
    for i, batch in enumerate(table.to_batches(max_chunksize=rows // 4)):
        pq.write_table(pa.Table.from_batches([batch]), files / f"part-{i}.parquet")
    pair = sorted(str(p) for p in files.iterdir())[:2]
    if spark.read.parquet(*pair).rdd.getNumPartitions() != 2:
        _fail("Spark plans 2 parquet files as other than 2 tasks; the trigger shapes would differ")
    read: list[pa.RecordBatch] = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0), (topic, 1)])
        deadline = time.monotonic() + 120
        while sum(b.num_rows for b in read) < rows and time.monotonic() < deadline:
            read.extend(consumer.poll_arrow(timeout=1.0))
    whole = pa.Table.from_batches(read).sort_by([("partition", "ascending"), ("offset", "ascending")])
    if whole.num_rows != rows:
        _fail(f"the read topic gave back {whole.num_rows} rows, expected {rows}")
    all_files = root / "read-parquet-all-columns"
    all_files.mkdir()
    for i, batch in enumerate(whole.combine_chunks().to_batches(max_chunksize=rows // 4)):
        pq.write_table(pa.Table.from_batches([batch]), all_files / f"part-{i}.parquet")
    return topic, files, all_files


def read_sides(spark: Any, bootstrap: str, topic: str, files: Path, all_files: Path,
               rows: int) -> dict[str, Callable[[Path], Any]]:
    per_trigger = str(rows // 2)
    all_columns = spark.read.parquet(str(all_files)).schema
    return {
        "spark-log": lambda ck: _available_now(
            spark.readStream.format("spark-log").option("bootstrap", bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", per_trigger).load(), "noop", ck),
        **({"spark-log-jvm": lambda ck: _available_now(
            spark.readStream.format(JVM_CLASS).option("bootstrap", bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", per_trigger).load(), "noop", ck)}
           if jvm_jar() is not None else {}),
        **({"spark-log-jvm key,value": lambda ck: _available_now(
            spark.readStream.format(JVM_CLASS).option("bootstrap", bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", per_trigger).load()
            .select("key", "value"), "noop", ck)}
           if jvm_jar() is not None else {}),
        "parquet all columns": lambda ck: _available_now(
            spark.readStream.schema(all_columns).option("maxFilesPerTrigger", "2").parquet(str(all_files)), "noop", ck),
        "parquet": lambda ck: _available_now(
            spark.readStream.schema("key binary, value binary").option("maxFilesPerTrigger", "2").parquet(str(files)),
            "noop", ck),
        "ceiling": lambda ck: _available_now(
            spark.readStream.format("bench-memory").option("rows", str(rows // 2)).option("partitions", "2")
            .option("chunk", str(_CHUNK)).option("maxOffsetsPerTrigger", per_trigger).load(), "noop", ck),
    }


# -- write ----------------------------------------------------------------------------------


def _rate_source(spark: Any, per_batch: int) -> Any:
    return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", str(per_batch)).option("numPartitions", "2")
            .load().selectExpr("cast(concat('key-', value) as binary) as key",
                               # the id as 10 digits, then 90 pseudo-random bytes (two SHA-512s): incompressible
                               "concat(cast(lpad(cast(value as string), 10, '0') as binary), substring(concat("
                               "unhex(sha2(cast(value as string), 512)), unhex(sha2(concat(cast(value as string), 'x'), 512)))"
                               ", 1, 90)) as value"))


def _committed(query: Any) -> int:
    """Micro-batches with rows the stopped query reported (each reported one is committed): on a
    quiet machine a fast sink commits one or two more than ``_until_batches`` waited for before
    its stop lands."""
    return sum(1 for p in query.recentProgress if p["numInputRows"])


def _check_ids(ids: pa.Array, rows: int, per_batch: int, where: str) -> None:
    """Every id below ``rows`` (the reported batches' rows) exactly once; ids of at most two
    batches beyond (one the stop cut, and one that committed as the stop landed, before its
    progress was reported) at most once."""
    counts = pc.value_counts(ids)
    dup = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))
    if len(dup):
        _fail(f"{where} holds {len(dup)} rows more than once (e.g. id {dup[0]})")
    below = pc.sum(pc.less(ids, rows).cast(pa.int64())).as_py() or 0
    beyond = len(ids) - below
    if below != rows or (beyond and pc.max(ids).as_py() >= rows + 2 * per_batch):
        _fail(f"{where} holds {below} of the {rows} timed rows and {beyond} others")


def _payload_ids(values: pa.Array) -> pa.Array:
    """The row id in each value's first 10 bytes (``connector_ceiling.keyvalue_batch``, ``_rate_source``)."""
    return pc.cast(pc.cast(pc.binary_slice(values, 0, 10), pa.string()), pa.int64())


def check_topic(bootstrap: str, topic: str, rows: int, per_batch: int) -> None:
    from spark_log import Admin, Consumer

    with Admin(bootstrap) as admin:
        ends = admin.list_offsets(topic, "latest")
    values: list[pa.Array] = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in ends])
        for p in ends:
            consumer.seek(topic, p, 0)
        deadline = time.monotonic() + 120
        while any(consumer.position(topic, p) < end for p, end in ends.items()) and time.monotonic() < deadline:
            values += [b.column("value") for b in consumer.poll_arrow(timeout=1.0)]
    _check_ids(_payload_ids(pa.concat_arrays(values) if values else pa.array([], pa.binary())), rows, per_batch,
               f"topic {topic}")


def check_parquet(spark: Any, path: Path, rows: int, per_batch: int) -> None:
    table = spark.read.parquet(str(path)).select("value").toArrow()
    _check_ids(_payload_ids(table.column("value").combine_chunks()), rows, per_batch, f"parquet sink {path}")


def write_side(spark: Any, bootstrap: str, root: Path, rows: int, side: str, run: int) -> tuple[int, int, list[float]]:
    """Run ``side``'s write query for 5 micro-batches of rows/4; time batches 1-4.

    Batch 0 of every query is left out on every side: it pays the query's start-up
    (for Python sinks, new Python workers: stopping the previous query mid-batch kills
    its workers).  Then checks that the sink holds every row of batches 0-4 once.
    """
    from spark_log import Admin

    per_batch = rows // 4
    ck = root / f"ck-write-{side}-{run}"
    batches = _TIMED_BATCHES + 1
    if side in ("spark-log", "spark-log-jvm"):
        topic = f"bench-write-{os.getpid()}-{side}-{run}"
        with Admin(bootstrap) as admin:
            admin.create_topic(topic, partitions=2)
        fmt = "spark-log" if side == "spark-log" else JVM_CLASS
        query = _until_batches(_rate_source(spark, per_batch), fmt, ck, batches, bootstrap=bootstrap, topic=topic)
        check_topic(bootstrap, topic, _committed(query) * per_batch, per_batch)
    elif side == "parquet":
        path = root / f"write-parquet-{run}"
        query = _until_batches(_rate_source(spark, per_batch), "parquet", ck, batches, path=str(path))
        check_parquet(spark, path, _committed(query) * per_batch, per_batch)
    else:
        query = _until_batches(_rate_source(spark, per_batch), "bench-discard", ck, batches)
    return _timed(query, _TIMED_BATCHES, skip=1, label=f"round {run} write {side}")


# -- projection -----------------------------------------------------------------------------


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


# -- main -----------------------------------------------------------------------------------


def _rotated(names: list[str], round_: int) -> list[str]:
    return names[round_ % len(names):] + names[:round_ % len(names)]


def run(spark: Any, bootstrap: str, root: Path, rows: int, rounds: int) -> dict[str, dict[str, Tally]]:
    """Every read round (round 0 discarded), then every write round (round 0 discarded)."""
    topic, files, all_files = setup_read(spark, bootstrap, root, rows)
    reads = read_sides(spark, bootstrap, topic, files, all_files, rows)
    tallies: dict[str, dict[str, Tally]] = {"read": {}, "write": {}}
    for round_ in range(rounds + 1):
        for name in _rotated(list(reads), round_):
            checkpoint = root / f"ck-read-{name.replace(' ', '-').replace(',', '-')}-{round_}"
            got, millis, each = _timed(reads[name](checkpoint), 2, label=f"round {round_} read {name}")
            if got != rows:
                _fail(f"readStream from {name} delivered {got} rows, expected {rows}")
            if round_:
                tallies["read"].setdefault(name, Tally()).add(got, millis, each)
    for round_ in range(rounds + 1):
        sides = ["spark-log", "parquet", "ceiling"] + (["spark-log-jvm"] if jvm_jar() is not None else [])
        for name in _rotated(sides, round_):
            got, millis, each = write_side(spark, bootstrap, root, rows, name, round_)
            if round_:
                tallies["write"].setdefault(name, Tally()).add(got, millis, each)
    return tallies


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds (after one discarded warm-up round)")
    parser.add_argument("--bootstrap", default=os.environ.get("SPARK_LOG_BOOTSTRAP"))
    parser.add_argument("--details", action="store_true", help="print every timed trigger's phases (ms)")
    args = parser.parse_args(argv)
    if args.rows % 4 or args.rows < 4 * _CHUNK:
        parser.error(f"--rows must be a multiple of 4 and at least {4 * _CHUNK}")
    repo = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    started, load_before = time.monotonic(), os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="connector-bench-") as tmp:
        root = Path(tmp)
        clusters = _cluster(args.bootstrap, root)
        bootstrap = next(clusters)
        try:
            from connectors.session import local_session, unregistered_jvm_jar

            jar = unregistered_jvm_jar(str(root))  # the JVM implementation by class name, beside the Python one
            spark = local_session(bootstrap, app_name="connector-bench", connector="python",
                                  conf={"spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false",
                                        **({"spark.jars": jar} if jar else {})})
            spark.sparkContext.setLogLevel("ERROR")
            spark.dataSource.register(MemorySource)
            spark.dataSource.register(DiscardSource)
            try:
                tallies = run(spark, bootstrap, root, args.rows, args.rounds)
            finally:
                spark.stop()
            projected, full = bench_projection(bootstrap, args.rows // 4)
        finally:
            clusters.close()
    load_after = os.getloadavg()
    print(f"connector bench ({args.rows} rows, local[2], {args.rounds} measured rounds after 1 warm-up, "
          f"{time.monotonic() - started:.0f} s; load average {load_before[0]:.1f} at start, {load_after[0]:.1f} at end, "
          f"15-min {load_after[2]:.1f})")
    for what, peer, ceiling in (("readStream  topic -> noop ", "parquet source", "ceiling"),
                                ("writeStream rate -> topic ", "parquet sink  ", "ceiling")):
        t = tallies["read" if what.startswith("read") else "write"]
        ours, theirs, top = t["spark-log"], t["parquet"], t[ceiling]
        per_round = " ".join(f"{a / b:.2f}" for a, b in zip(ours.rounds, theirs.rounds))
        print(f"  {what} spark-log {ours.rate:10,.0f} rows/s | {peer} {theirs.rate:10,.0f} rows/s | "
              f"ratio {ours.rate / theirs.rate:5.2f}x (rounds {per_round}; median trigger "
              f"{ours.median_rate / theirs.median_rate:4.2f}x) | python-DS ceiling {top.rate:10,.0f} rows/s, "
              f"spark-log/ceiling {ours.rate / top.rate:4.2f}, ceiling/parquet {top.rate / theirs.rate:4.2f} "
              f"(median trigger {ours.median_rate / top.median_rate:4.2f}, {top.median_rate / theirs.median_rate:4.2f})")
    for what, key, peer in (("readStream  topic -> noop ", "read", "parquet source"),
                            ("writeStream rate -> topic ", "write", "parquet sink  ")):
        t = tallies[key]
        if "spark-log-jvm" in t:
            jvm, theirs, py = t["spark-log-jvm"], t["parquet"], t["spark-log"]
            per_round = " ".join(f"{a / b:.2f}" for a, b in zip(jvm.rounds, theirs.rounds))
            print(f"  {what} JVM       {jvm.rate:10,.0f} rows/s | {peer} {theirs.rate:10,.0f} rows/s | "
                  f"ratio {jvm.rate / theirs.rate:5.2f}x (rounds {per_round}; median trigger "
                  f"{jvm.median_rate / theirs.median_rate:4.2f}x) | JVM/Python {jvm.rate / py.rate:4.2f}x"
                  + (" | 7 columns against parquet's 2" if key == "read" else ""))
        else:
            print(f"  {what} JVM implementation not built (make install needs a JDK)")
    t = tallies["read"]
    if "spark-log-jvm" in t:  # the same columns on both sides
        for label, ours, theirs in (("all 7 columns", "spark-log-jvm", "parquet all columns"),
                                    ("key, value   ", "spark-log-jvm key,value", "parquet")):
            jvm, peer = t[ours], t[theirs]
            per_round = " ".join(f"{a / b:.2f}" for a, b in zip(jvm.rounds, peer.rounds))
            print(f"  readStream  same columns: {label} JVM {jvm.rate:10,.0f} rows/s | parquet source "
                  f"{peer.rate:10,.0f} rows/s | ratio {jvm.rate / peer.rate:5.2f}x (rounds {per_round}; median trigger "
                  f"{jvm.median_rate / peer.median_rate:4.2f}x)")
    print(f"  projection 2 of 20 columns        {projected:12,} bytes  | all columns    {full:12,} bytes  | "
          f"{full / max(projected, 1):5.1f}x fewer")
    if args.details:
        print("\n".join(_DETAILS))


if __name__ == "__main__":
    main()
