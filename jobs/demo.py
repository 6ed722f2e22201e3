"""The end-to-end demo, spark-log's main job: ``python -m jobs.demo`` (what ``make demo`` runs).

The story, on the embedded local cluster (3 brokers that are also the 3 controllers):

1. start the local cluster unless one is running in ``--data-dir`` (``brokers.launcher.local``);
2. create a typed topic ``clicks-<id>`` (4 partitions, replication factor 3) for click events;
3. a Spark ``writeStream`` turns the rate source into click events (user, page, country,
   event time) and writes them into the topic through the ``spark-log`` sink, with a
   checkpoint;
4. a ``readStream`` from the topic computes a windowed aggregation (clicks per 10-second
   window and country) with its own checkpoint;
5. every few seconds it prints both queries' progress: rows in/out, throughput, and the
   reader's lag (latest offsets minus the offsets it has reached), from ``lastProgress``;
6. halfway through the writing it kills one broker (kill -9) and restarts it
   ``--down-seconds`` later (its partitions' leadership moves to the other replicas);
7. at the end it stops the writer, lets the reader drain, and checks that the aggregated
   counts equal the events written, each event id exactly once in the topic (nothing
   lost, nothing doubled).  It prints ``CHECK OK ...`` and exits 0, or ``CHECK FAILED
   ...`` and exits 1.

It cleans up what it started: the queries, the SparkSession, the topic, its checkpoints,
and the local cluster if it started it.  With ``--keep-topic`` it leaves the topic and the
cluster running (it prints ``kept topic <name> on <bootstrap>``), so a caller can check the
stored records itself (``tests/jobs/test_demo.py`` does) and stop the cluster afterwards.  Bounded: ``--seconds`` of writing
once events flow (default 30), plus start-up and drain: about 1-2 minutes on a laptop.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import pyarrow as pa

from brokers.launcher.local import LocalCluster
from spark_log import Admin

if TYPE_CHECKING:  # pyspark is imported where it is used (the CLI starts fast without it)
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["CLICK_SCHEMA", "click_events", "lag_of", "main", "stop_between_batches", "wait_topic_known", "window_counts"]

COUNTRIES = ["US", "DE", "FR", "IN", "BR", "JP", "GB", "NG"]
PAGES = ["/", "/search", "/product", "/cart", "/checkout", "/help", "/account", "/blog"]
_CLICK_FIELDS: list[pa.Field[Any]] = [
    pa.field("event_id", pa.int64()),
    pa.field("user_id", pa.string()),
    pa.field("page", pa.string()),
    pa.field("country", pa.string()),
    pa.field("event_time", pa.timestamp("us", tz="UTC")),
]
CLICK_SCHEMA = pa.schema(_CLICK_FIELDS)


def click_events(spark: SparkSession, rows_per_second: int) -> DataFrame:
    """A deterministic click stream from the rate source (replays give the same rows)."""
    from pyspark.sql import functions as F

    pages = F.array(*[F.lit(p) for p in PAGES])
    countries = F.array(*[F.lit(c) for c in COUNTRIES])
    return (
        spark.readStream.format("rate").option("rowsPerSecond", rows_per_second).option("numPartitions", 2).load()
        .select(
            F.col("value").alias("event_id"),
            F.concat(F.lit("user-"), ((F.col("value") * 7919) % 500).cast("string")).alias("user_id"),
            F.element_at(pages, ((F.col("value") * 31) % len(PAGES) + 1).cast("int")).alias("page"),
            F.element_at(countries, ((F.col("value") * 17) % len(COUNTRIES) + 1).cast("int")).alias("country"),
            F.col("timestamp").alias("event_time"),
        )
    )


def window_counts(events: DataFrame) -> DataFrame:
    """Clicks per 10-second event-time window and country."""
    from pyspark.sql import functions as F

    return events.groupBy(F.window("event_time", "10 seconds"), "country").agg(F.count("*").alias("clicks"))


def _leaves(value: Any) -> Iterator[tuple[str, int]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return
    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(inner, dict):
                yield from ((f"{key}/{k}", v) for k, v in _leaves(inner))
            elif isinstance(inner, int):
                yield str(key), inner


def lag_of(progress: dict[str, Any] | None) -> int | None:
    """Records between the source's latest offsets and the end of the last batch."""
    if not progress or not progress.get("sources"):
        return None
    source = progress["sources"][0]
    latest, end = dict(_leaves(source.get("latestOffset"))), dict(_leaves(source.get("endOffset")))
    if not latest:
        return None
    return sum(max(0, offset - end.get(key, 0)) for key, offset in latest.items())


def _show(label: str, progress: dict[str, Any] | None, lag: bool) -> str:
    if not progress:
        return f"{label}: starting"
    text = (f"{label}: batch {progress.get('batchId')}, {progress.get('numInputRows', 0)} rows in, "
            f"{progress.get('inputRowsPerSecond', 0.0):.0f} rows/s in, "
            f"{progress.get('processedRowsPerSecond', 0.0):.0f} rows/s processed")
    if lag:
        text += f", lag {lag_of(progress)}"
    return text


def wait_topic_known(cluster: LocalCluster, topic: str, timeout_s: float = 60.0) -> None:
    """Until every node of ``cluster`` describes ``topic``: a restarted broker answers
    "unknown topic" until its metadata image has caught up, and clients that ask it
    first (the sink does, at each commit) fail meanwhile."""
    deadline = time.monotonic() + timeout_s
    for node in cluster.nodes:
        admin = Admin(f"127.0.0.1:{node.port}")
        try:
            while True:
                try:
                    admin.describe_topic(topic, live=False)
                    break
                except Exception:  # noqa: BLE001 - not caught up yet
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.2)  # polling the broker's metadata
        finally:
            admin.close()


class _Chaos:
    """Kills one broker (kill -9) at ``kill_at`` and restarts it ``down_s`` later."""

    def __init__(self, cluster: LocalCluster, node_id: int, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.node = next(n for n in cluster.nodes if n.node_id == node_id)
        self.state = "up"

    def kill(self) -> None:
        self.cluster.stop_node(self.node, kill=True, timeout_s=10)
        self.state = "down"

    def restart(self) -> None:
        try:
            self.cluster.up(timeout_s=90)  # starts the nodes that are not running, waits until healthy
            wait_topic_known(self.cluster, self.topic)
            self.state = "restarted"
        except Exception as exc:  # noqa: BLE001 - reported by the final check
            self.state = f"restart failed: {exc}"


def stop_between_batches(query: StreamingQuery, timeout_s: float = 60.0) -> None:
    """Stop ``query`` right after a micro-batch completes, so that no batch is cut short
    (a stopped batch's rows may already be in the topic while its commit is not)."""

    def batch_id() -> int | None:
        progress = query.lastProgress
        return progress.batchId if progress is not None else None

    last = batch_id()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        current = batch_id()
        if current != last and not query.status.get("isTriggerActive", False):
            break
        time.sleep(0.05)  # polling the query's status; Spark has no "stop after this batch"
    query.stop()


def run(args: argparse.Namespace) -> int:
    from connectors.session import local_session

    cluster = LocalCluster(args.data_dir, brokers=3)
    started_cluster = not all(alive for *_, alive in cluster.status())
    if started_cluster:
        print(f"starting the local cluster in {cluster.data_dir} ...", flush=True)
        cluster.up(timeout_s=120)
    bootstrap = cluster.bootstrap
    topic = f"clicks-{uuid.uuid4().hex[:8]}"
    work = Path(tempfile.mkdtemp(prefix="spark-log-demo-"))
    admin = Admin(bootstrap)
    spark = None
    queries: list[StreamingQuery] = []
    try:
        admin.create_topic(topic, partitions=4, replication_factor=3, schema=CLICK_SCHEMA)
        print(f"created topic {topic} (4 partitions, replication factor 3) on {bootstrap}", flush=True)
        spark = local_session(bootstrap, app_name="spark-log-demo", master="local[2,4]",
                              conf={"spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        writer = (click_events(spark, args.rows_per_second).writeStream.format("spark-log").option("topic", topic)
                  .option("checkpointLocation", str(work / "writer")).trigger(processingTime="1 second")
                  .queryName("clicks_writer").start())
        queries.append(writer)
        events = (spark.readStream.format("spark-log").option("subscribe", topic).option("startingOffsets", "earliest")
                  .load())
        reader = (window_counts(events).writeStream.outputMode("complete").format("memory").queryName("clicks_per_window")
                  .option("checkpointLocation", str(work / "reader")).trigger(processingTime="1 second").start())
        queries.append(reader)
        victim = admin.describe_topic(topic).partitions[0].leader
        if victim is None:
            raise RuntimeError(f"partition {topic}-0 has no leader to kill")
        chaos = _Chaos(cluster, victim, topic)
        begin = time.monotonic()
        flowing: float | None = None  # when the writer's first micro-batch completed
        restarter: threading.Thread | None = None
        while flowing is None or time.monotonic() - flowing < args.seconds:
            elapsed = time.monotonic() - begin
            for query in queries:
                if query.exception() is not None:
                    raise RuntimeError(f"query {query.name} failed: {query.exception()}")
            if flowing is None and writer.lastProgress:
                flowing = time.monotonic()
                print(f"[{elapsed:5.1f}s] events are flowing; writing for {args.seconds:.0f}s more", flush=True)
            if flowing is None and elapsed > args.startup_seconds:
                raise RuntimeError(f"the writer completed no micro-batch in {args.startup_seconds:.0f}s")
            if chaos.state == "up" and flowing is not None and time.monotonic() - flowing >= args.seconds / 2:
                print(f"[{elapsed:5.1f}s] killing broker {victim} (kill -9; it leads partition 0); "
                      f"restarting it in {args.down_seconds:.0f}s", flush=True)
                chaos.kill()
                restarter = threading.Timer(args.down_seconds, chaos.restart)
                restarter.start()
            print(f"[{elapsed:5.1f}s] {_show('writer', writer.lastProgress, False)}", flush=True)
            print(f"[{elapsed:5.1f}s] {_show('reader', reader.lastProgress, True)}", flush=True)
            time.sleep(args.progress_seconds)  # pacing the progress display
        if restarter is not None:
            restarter.join()
            print(f"broker {victim} is back ({chaos.state})", flush=True)
        stop_between_batches(writer)
        batches = {p["batchId"]: p["numInputRows"] for p in writer.recentProgress}
        committed = sum(batches.values())  # event ids 0..committed-1, the committed micro-batches
        reader.processAllAvailable()
        total = admin.list_offsets(topic, "latest")
        stored = sum(total.values())
        ids = (spark.read.format("spark-log").option("subscribe", topic).load()
               .selectExpr("count(*) AS n", "count(DISTINCT event_id) AS distinct_ids", "max(event_id) AS max_id",
                           f"count(DISTINCT CASE WHEN event_id < {committed} THEN event_id END) AS committed_ids")
               .collect()[0])
        counted = spark.sql("SELECT coalesce(sum(clicks), 0) AS n FROM clicks_per_window").collect()[0]["n"]
        windows = spark.sql("SELECT count(*) AS n FROM clicks_per_window").collect()[0]["n"]
        # Spark has no "stop after this batch": the stop may interrupt a micro-batch that
        # already wrote its rows (ids past the committed ones) without committing; a restart
        # from the checkpoint would replay it and the brokers would append nothing twice.
        interrupted = stored - committed
        print(f"events written by the writer query: {committed} in {len(batches)} committed micro-batches"
              + (f", plus {interrupted} by a micro-batch the stop interrupted" if interrupted else ""))
        print(f"records in topic {topic}: {stored} ({ids['distinct_ids']} distinct event ids, "
              f"{ids['committed_ids']} of the {committed} committed ones)")
        print(f"clicks counted by the windowed aggregation: {counted} over {windows} (window, country) groups")
        written = stored
        ok = (committed > 0 and interrupted >= 0 and ids["committed_ids"] == committed
              and ids["n"] == ids["distinct_ids"] == stored and counted == stored)
        if ok:
            print(f"CHECK OK: {counted} clicks counted == {written} events written (nothing lost, nothing doubled)")
            return 0
        print(f"CHECK FAILED: committed {committed}, stored {stored}, distinct ids {ids['distinct_ids']}, "
              f"committed ids present {ids['committed_ids']}, counted {counted}")
        return 1
    finally:
        for query in queries:
            try:
                query.stop()
            except Exception:  # noqa: BLE001 - cleaning up
                pass
        if spark is not None:
            spark.stop()
        if args.keep_topic:
            print(f"kept topic {topic} on {bootstrap}", flush=True)
        else:
            try:
                admin.delete_topic(topic)
            except Exception:  # noqa: BLE001 - cleaning up; the cluster may be gone
                pass
        admin.close()
        shutil.rmtree(work, ignore_errors=True)
        if started_cluster and not args.keep_topic:
            print("stopping the local cluster we started", flush=True)
            cluster.down(timeout_s=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("SPARK_LOG_DATA_DIR") or ".spark-log")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the writer runs once events flow")
    parser.add_argument("--startup-seconds", type=float, default=180.0, help="limit for the first micro-batch")
    parser.add_argument("--rows-per-second", type=int, default=200)
    parser.add_argument("--down-seconds", type=float, default=8.0, help="how long the killed broker stays down")
    parser.add_argument("--progress-seconds", type=float, default=4.0)
    parser.add_argument("--keep-topic", action="store_true",
                        help="leave the topic and the cluster running at the end (for checking the records)")
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    repo = str(Path(__file__).resolve().parents[1])  # Spark's Python workers import connectors from here
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p)
    warnings.filterwarnings("ignore", category=FutureWarning)  # pyspark's notice about pandas 3
    try:
        return run(args)
    except Exception as exc:  # noqa: BLE001 - one line, then a non-zero exit
        print(f"CHECK FAILED: the demo stopped early: {type(exc).__name__}: {exc}", flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
