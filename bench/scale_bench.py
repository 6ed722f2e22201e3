"""Cost as the work grows: idle CPU, keyed produce and restart against partition count.

    python -m bench.scale_bench [--partitions 10,100,1000,3000] [--lines 20000] [--idle-s 5]

For each partition count P a fresh 3-broker local cluster (``LocalCluster``, default
settings, 127.0.0.1) gets one topic of P partitions, RF=3 (so P replicas per broker), and
the bench prints, per P:

- *idle*: CPU of each broker process over ``--idle-s`` seconds once the topic is settled
  (every ISR full), as % of one core, mean over the brokers; and the marginal cost per 1,000
  replicas: (idle - the same cluster's idle before the topic existed) / (P / 1000).
  Aim: under 2% of a core per broker per 1,000 replicas.
- *produce*: wall time of ``spark-log produce TOPIC --key-separator ,`` (default producer
  settings, acks=all) of ``--lines`` keyed lines (``k<i>,<random base64>``, 100-byte
  lines, incompressible but for base64's 4/3), and its ratio to the time over the smallest P
  measured in the same run.  Aim: P=1,000 within 2x of P=10.
- *restart*: one broker is stopped cleanly and started again; the time from its start to
  every partition of the topic having a full ISR in the committed metadata.  Aim: 3,000
  replicas (P=1,000) back in sync within 10 s.

Every figure is printed with its aim and the ratio to it.  Not part of the test pass/fail.
A full curve takes a few minutes (the 3,000-partition topic alone about a minute); pass a
shorter ``--partitions`` list for a quick look.
"""
from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from brokers.launcher.local import LocalCluster
from spark_log import Admin

__all__ = ["main"]

AIM_IDLE_PCT_PER_1000 = 2.0
AIM_PRODUCE_RATIO = 2.0
AIM_RESTART_S_PER_3000 = 10.0


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle_pct(pids: list[int], seconds: float) -> float:
    """Mean % of one core per process over ``seconds``."""
    before = [_cpu_s(p) for p in pids]
    start = time.monotonic()
    time.sleep(seconds)  # measuring an idle interval, nothing to wait for
    elapsed = time.monotonic() - start
    return 100 * sum(_cpu_s(p) - b for p, b in zip(pids, before)) / elapsed / len(pids)


def _lagging(admin: Admin, topic: str) -> int:
    """Partitions of ``topic`` whose committed ISR is not every replica."""
    description = admin.describe_topics([topic], live=False)[topic]
    return sum(1 for p in description.partitions.values() if len(p.isr) < len(p.replicas) or p.leader is None)


def _wait_in_sync(admin: Admin, topic: str, timeout_s: float) -> float:
    """Seconds until every ISR of ``topic`` is full (raises after ``timeout_s``)."""
    start = time.monotonic()
    while True:
        try:
            left = _lagging(admin, topic)
        except Exception:  # noqa: BLE001 - a broker restarting: ask again
            left = -1
        if left == 0:
            return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"{topic}: {left} partitions still under-replicated after {timeout_s:.0f} s")
        time.sleep(0.05)  # polling another process's metadata


def _lines(count: int) -> bytes:
    rows = []
    for i in range(count):
        key = f"k{i}"
        value = base64.b64encode(os.urandom(72)).decode()[: 99 - len(key) - 1]
        rows.append(f"{key},{value}")
    return ("\n".join(rows) + "\n").encode()


def _produce_s(bootstrap: str, topic: str, data: bytes) -> float:
    cli = [sys.executable, "-m", "spark_log.cli", "--bootstrap", bootstrap, "produce", topic, "--key-separator", ","]
    start = time.monotonic()
    subprocess.run(cli, input=data, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


@dataclass
class Row:
    partitions: int
    create_s: float
    idle_empty_pct: float
    idle_pct: float
    produce_s: float
    restart_s: float

    @property
    def per_1000_pct(self) -> float:
        return (self.idle_pct - self.idle_empty_pct) / (self.partitions / 1000)


def _measure(root: Path, partitions: int, data: bytes, idle_s: float) -> Row:
    cluster = LocalCluster(root / f"p{partitions}", brokers=3)
    try:
        cluster.up(timeout_s=120)
        pids = [n.pid for n in cluster.nodes]
        time.sleep(1.0)  # let the start settle before the empty-cluster baseline
        idle_empty = _idle_pct(pids, idle_s)
        with Admin(cluster.bootstrap, request_timeout_ms=120_000) as admin:
            start = time.monotonic()
            admin.create_topic("scale", partitions=partitions, replication_factor=3)
            _wait_in_sync(admin, "scale", 300)
            create_s = time.monotonic() - start
            idle = _idle_pct(pids, idle_s)
            produce_s = _produce_s(cluster.bootstrap, "scale", data)
            _wait_in_sync(admin, "scale", 120)
            node = cluster.nodes[-1]
            cluster.stop_node(node)
            # the survivors shrink the ISRs first (else "in sync" could be seen before they notice)
            deadline = time.monotonic() + 120
            while _lagging(admin, "scale") == 0 and time.monotonic() < deadline:
                time.sleep(0.05)  # polling another process's metadata
            start = time.monotonic()
            cluster.start_node(node)
            restart_s = _wait_in_sync(admin, "scale", 300)
            del start
        return Row(partitions, create_s, idle_empty, idle, produce_s, restart_s)
    finally:
        cluster.down(timeout_s=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="10,100,1000,3000", help="comma-separated partition counts")
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--idle-s", type=float, default=5.0)
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.partitions.split(",")]
    data = _lines(args.lines)
    print("load average at start: " + " ".join(f"{x:.1f}" for x in os.getloadavg()), flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        for count in counts:
            row = _measure(Path(tmp), count, data, args.idle_s)
            rows.append(row)
            print(f"P={count}: create+settle {row.create_s:.1f} s, idle {row.idle_empty_pct:.1f}% -> "
                  f"{row.idle_pct:.1f}%, produce {row.produce_s:.2f} s, restart {row.restart_s:.2f} s", flush=True)
    print("load average at end: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    base = rows[0].produce_s
    print()
    print(f"3 brokers, RF=3, one topic of P partitions (P replicas per broker); {args.lines:,} keyed 100-byte lines")
    print(f"{'P':>6} {'create':>8} {'idle/broker':>12} {'per 1k repl':>12} {'vs aim':>7} "
          f"{'produce':>9} {'vs P=' + str(rows[0].partitions):>9} {'vs aim':>7} {'restart':>8} {'replicas':>9} {'vs aim':>7}")
    for row in rows:
        replicas = row.partitions * 3
        restart_aim = AIM_RESTART_S_PER_3000 * max(1.0, replicas / 3000)
        ratio = row.produce_s / base
        # below 100 replicas the marginal cost is within the noise of the idle baseline
        per_1000 = (f"{row.per_1000_pct:>11.1f}% {row.per_1000_pct / AIM_IDLE_PCT_PER_1000:>7.2f}"
                    if row.partitions >= 100 else f"{'-':>12} {'-':>7}")
        print(f"{row.partitions:>6} {row.create_s:>7.1f}s {row.idle_pct:>11.1f}% {per_1000} "
              f"{row.produce_s:>8.2f}s {ratio:>9.2f} "
              f"{ratio / AIM_PRODUCE_RATIO:>7.2f} {row.restart_s:>7.2f}s {replicas:>9,} {row.restart_s / restart_aim:>7.2f}")
    print(f"aims: idle < {AIM_IDLE_PCT_PER_1000:.0f}% of a core per broker per 1,000 replicas (marginal over the "
          f"empty cluster); produce within {AIM_PRODUCE_RATIO:.0f}x of P={rows[0].partitions}; restart of 3,000 "
          f"replicas in sync within {AIM_RESTART_S_PER_3000:.0f} s (scaled for more); 'vs aim' <= 1 meets it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
