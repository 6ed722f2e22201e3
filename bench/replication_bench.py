"""Replication cost and leader failover time on a local 3-node cluster.

    python -m bench.replication_bench [--seconds 8] [--kills 3]

1. Produce throughput, same cluster, same run: 100-byte records from Arrow batches
   (``Producer.send_batch``, 3 partitions) into an RF=1 topic with acks=1 and into an
   RF=3 topic with acks=all, alternating short rounds so both meet the same disturbances;
   prints records/s of each and the ratio (issue 5 aims at >= 0.5 and >= 2,000,000/s).
2. Failover: ``--kills`` times, SIGKILL the leader of partition 0 of an RF=3 topic and
   measure the time from the kill to the first successful acks=all write to that
   partition (a producer retrying all along); prints median and max.  The killed node is
   restarted and rejoins the ISR before the next kill.

Brokers run with ``session_timeout_ms=2000`` / ``heartbeat_interval_ms=200`` (the
controller fences a dead broker after the session timeout, which dominates the figure).
Not part of the test pass/fail; bounded to about two minutes.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Producer
from spark_log.errors import SparkLogError
from spark_log.schemas import BYTES_SCHEMA
from tests.support.wait import wait_until

__all__ = ["main"]

FAST = {"heartbeat_interval_ms": 200, "session_timeout_ms": 2000, "replica_lag_time_max_ms": 3000}


def _batch(rows: int) -> pa.RecordBatch:
    values = pa.array([b"x" * 100] * rows, pa.binary())
    keys = pa.array([None] * rows, pa.binary())
    headers = pa.array([[]] * rows, BYTES_SCHEMA.field("headers").type)
    stamps = pa.array([int(time.time() * 1000)] * rows, pa.timestamp("ms"))
    return pa.record_batch([keys, values, headers, stamps], schema=BYTES_SCHEMA)


def _throughput(bootstrap: str, topic: str, acks: str | int, seconds: float, batch: pa.RecordBatch) -> float:
    sent = 0
    with Producer(bootstrap, acks=acks, linger_ms=5, batch_size=1 << 20) as producer:
        started = time.monotonic()
        previous: list = []  # two rounds in flight: acks=all latency overlaps the next round
        while time.monotonic() - started < seconds:
            futures = []
            for p in range(3):
                futures.extend(producer.send_batch(topic, batch, partition=p))
            for future in previous:
                future.result(timeout=60)
            previous = futures
            sent += 3 * batch.num_rows
        for future in previous:
            future.result(timeout=60)
        return sent / (time.monotonic() - started)


def _failover(cluster: LocalCluster, admin: Admin, topic: str) -> float:
    leader = admin.describe_topic(topic).partitions[0].leader
    node = next(n for n in cluster.nodes if n.node_id == leader)
    with Producer(cluster.bootstrap, acks="all", linger_ms=0, delivery_timeout_ms=60_000) as producer:
        producer.send(topic, b"warm", partition=0).result(timeout=30)
        killed = time.monotonic()
        cluster.stop_node(node, kill=True)
        producer.send(topic, b"after-kill", partition=0).result(timeout=60)
        elapsed = time.monotonic() - killed
    cluster.start_node(node)
    wait_until(lambda: len(admin.describe_topic(topic).partitions[0].isr) == 3, timeout=60,
               message="killed broker rejoins the ISR")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="replication-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3, extra_config=FAST)
        cluster.up(timeout_s=60)
        try:
            with Admin(cluster.bootstrap) as admin:
                admin.create_topic("rf1", partitions=3, replication_factor=1)
                admin.create_topic("rf3", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
                wait_until(lambda: all(len(p.isr) == 3 for p in admin.describe_topic("rf3").partitions.values()),
                           timeout=30, message="rf3 fully in sync")
                batch = _batch(args.rows)
                rf1: list[float] = []
                rf3: list[float] = []
                for _ in range(2):
                    rf1.append(_throughput(cluster.bootstrap, "rf1", 1, args.seconds / 2, batch))
                    rf3.append(_throughput(cluster.bootstrap, "rf3", "all", args.seconds / 2, batch))
                one, three = statistics.mean(rf1), statistics.mean(rf3)
                print(f"produce 100-byte records, Arrow batches of {args.rows}: RF=1 acks=1 {one:,.0f} rec/s; "
                      f"RF=3 acks=all {three:,.0f} rec/s; ratio {three / one:.2f}")
                admin.create_topic("failover", partitions=1, replication_factor=3)
                wait_until(lambda: len(admin.describe_topic("failover").partitions[0].isr) == 3, timeout=30,
                           message="failover topic in sync")
                times = []
                for _ in range(args.kills):
                    try:
                        times.append(_failover(cluster, admin, "failover"))
                    except (SparkLogError, TimeoutError) as exc:
                        print(f"failover run failed: {exc!r}")
                if times:
                    print(f"leader kill -> first acks=all write: median {statistics.median(times) * 1000:.0f} ms, "
                          f"max {max(times) * 1000:.0f} ms over {len(times)} kills "
                          f"(session timeout {FAST['session_timeout_ms']} ms)")
        finally:
            cluster.down(timeout_s=15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
