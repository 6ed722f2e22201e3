"""Transactions benchmark: what atomic visibility costs, measured in one run.

    python -m bench.transactions_bench [--records N] [--rows R] [--bootstrap HOST:PORT,...]

1. Produce throughput, one producer, a 3-partition RF=3 topic, 100-byte incompressible
   values (``os.urandom``), ``send_batch`` of 20,000-row tables, acks=all: idempotent
   (the default producer) against transactional with a commit every 20,000 and every
   100,000 records.  Ratio transactional / idempotent.
2. Commit latency: 200 small transactions (one record to each of the 3 partitions);
   p50 and p99 of ``commit_transaction`` (markers written to 3 leaders and replicated)
   and of the whole transaction.
3. The Spark sink: the ``rate-micro-batch`` source (R/4 rows per micro-batch, 2 write
   tasks) into spark-log with ``transactional=true``, into spark-log without it, and into
   Spark's parquet file sink; each query runs 5 micro-batches and batches 1-4 are timed
   (``bench.connector_bench``'s shapes and checks: every row once).  One warm-up round,
   then two measured rounds.

Prints the figures, the ratios and the load average; every run checks its own output
(``CHECK FAILED`` aborts).  Without ``--bootstrap`` it starts the embedded local cluster.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.connector_bench import Tally, _cluster, _fail, _rate_source, _timed, _until_batches, check_parquet, check_topic

_TABLE_ROWS = 20_000


def _table(start: int, rows: int) -> pa.Table:
    values = os.urandom(100 * rows)
    return pa.table({"key": [str(start + i).encode() for i in range(rows)],
                     "value": [values[i * 100:(i + 1) * 100] for i in range(rows)]})


def produce_rate(bootstrap: str, topic: str, records: int, per_txn: int | None) -> float:
    """records/s of one producer sending ``records`` (transactional when ``per_txn``)."""
    from spark_log import Producer

    tables = [_table(i * _TABLE_ROWS, _TABLE_ROWS) for i in range(records // _TABLE_ROWS)]
    kwargs: dict[str, Any] = {"transactional_id": f"bench-{topic}-{per_txn}"} if per_txn else {}
    with Producer(bootstrap, **kwargs) as producer:
        if per_txn:
            producer.init_transactions()
        started = time.perf_counter()
        sent = 0
        for table in tables:
            if per_txn and sent % per_txn == 0:
                producer.begin_transaction()
            producer.send_batch(topic, table)
            sent += table.num_rows
            if per_txn and sent % per_txn == 0:
                producer.commit_transaction()
        producer.flush()
        return records / (time.perf_counter() - started)


def commit_latency(bootstrap: str, topic: str, count: int) -> tuple[list[float], list[float]]:
    from spark_log import Producer

    commits, totals = [], []
    with Producer(bootstrap, transactional_id=f"bench-latency-{topic}", linger_ms=0) as producer:
        producer.init_transactions()
        for n in range(count + 10):
            began = time.perf_counter()
            producer.begin_transaction()
            for partition in range(3):
                producer.send(topic, os.urandom(100), partition=partition)
            called = time.perf_counter()
            producer.commit_transaction()
            done = time.perf_counter()
            if n >= 10:  # the first ones warm the coordinator and the channels
                commits.append((done - called) * 1000)
                totals.append((done - began) * 1000)
    return commits, totals


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def sink_side(spark: Any, bootstrap: str, root: Path, rows: int, side: str, run: int) -> tuple[int, int, list[float]]:
    from spark_log import Admin

    per_batch = rows // 4
    written = 5 * per_batch
    ck = root / f"ck-{side}-{run}"
    if side == "parquet":
        path = root / f"parquet-{run}"
        query = _until_batches(_rate_source(spark, per_batch), "parquet", ck, 5, path=str(path))
        check_parquet(spark, path, written, per_batch)
    else:
        topic = f"bench-txn-sink-{os.getpid()}-{side}-{run}"
        with Admin(bootstrap) as admin:
            admin.create_topic(topic, partitions=2, replication_factor=3)
        options = {"bootstrap": bootstrap, "topic": topic}
        if side == "transactional":
            options["transactional"] = "true"
        query = _until_batches(_rate_source(spark, per_batch), "spark-log", ck, 5, **options)
        check_topic(bootstrap, topic, written, per_batch)
    return _timed(query, 4, skip=1, label=f"round {run} {side}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--rows", type=int, default=200_000, help="Spark sink rows per query (4 timed micro-batches)")
    parser.add_argument("--bootstrap", default=os.environ.get("SPARK_LOG_BOOTSTRAP"))
    args = parser.parse_args(argv)
    if args.records % 100_000:
        parser.error("--records must be a multiple of 100000")
    repo = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    started, load_before = time.monotonic(), os.getloadavg()
    from spark_log import Admin

    with tempfile.TemporaryDirectory(prefix="txn-bench-") as tmp:
        root = Path(tmp)
        clusters = _cluster(args.bootstrap, root)
        bootstrap = next(clusters)
        try:
            rates: dict[str, list[float]] = {"idempotent": [], "txn/20k": [], "txn/100k": []}
            with Admin(bootstrap) as admin:
                for round_ in range(3):  # interleaved, so load drifts hit every side alike
                    for side, per_txn in (("idempotent", None), ("txn/20k", 20_000), ("txn/100k", 100_000)):
                        topic = f"bench-txn-{os.getpid()}-{round_}-{side.replace('/', '-')}"
                        admin.create_topic(topic, partitions=3, replication_factor=3)
                        rates[side].append(produce_rate(bootstrap, topic, args.records, per_txn))
                        stable = admin.list_offsets(topic, "latest", isolation_level="read_committed")
                        if sum(stable.values()) < args.records:
                            _fail(f"{side}: {sum(stable.values())} of {args.records} records committed")
                latency_topic = f"bench-txn-latency-{os.getpid()}"
                admin.create_topic(latency_topic, partitions=3, replication_factor=3)
            commits, totals = commit_latency(bootstrap, latency_topic, 200)

            from connectors.session import local_session

            spark = local_session(bootstrap, app_name="txn-bench", connector="python",
                                  conf={"spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false"})
            spark.sparkContext.setLogLevel("ERROR")
            tallies = {side: Tally() for side in ("transactional", "idempotent", "parquet")}
            try:
                for run in range(3):
                    order = list(tallies)[run % 3:] + list(tallies)[:run % 3]
                    for side in order:
                        measured = sink_side(spark, bootstrap, root, args.rows, side, run)
                        if run:
                            tallies[side].add(*measured)
            finally:
                spark.stop()
        finally:
            clusters.close()
    load_after = os.getloadavg()
    print(f"transactions bench ({args.records:,} records of 100 random bytes, RF=3, 3 partitions; "
          f"{time.monotonic() - started:.0f} s; load average {load_before[0]:.1f} at start, {load_after[0]:.1f} at end)")
    base = statistics.median(rates["idempotent"])
    for side, values in rates.items():
        rate = statistics.median(values)
        print(f"  produce {side:<10} {rate:12,.0f} rec/s (median of {len(values)}: "
              f"{' '.join(f'{v:,.0f}' for v in values)}) | / idempotent {rate / base:4.2f}x")
    print(f"  commit_transaction (3 partitions, 1 record each): p50 {_pct(commits, 0.5):6.1f} ms, "
          f"p99 {_pct(commits, 0.99):6.1f} ms | whole transaction p50 {_pct(totals, 0.5):6.1f} ms, "
          f"p99 {_pct(totals, 0.99):6.1f} ms ({len(commits)} transactions)")
    t, i, p = tallies["transactional"], tallies["idempotent"], tallies["parquet"]
    print(f"  Spark sink rate -> topic: transactional {t.rate:10,.0f} rows/s | idempotent {i.rate:10,.0f} rows/s | "
          f"parquet sink {p.rate:10,.0f} rows/s | transactional/idempotent {t.rate / i.rate:4.2f}x, "
          f"transactional/parquet {t.rate / p.rate:4.2f}x (median trigger {t.median_rate / i.median_rate:4.2f}x)")


if __name__ == "__main__":
    main()
