"""Produce-to-consume latency at a moderate rate, RF=1 and RF=3, against the aims.

    python -m bench.latency_bench [--seconds 4] [--rate 2000]

A 3-broker local cluster (``LocalCluster``, default settings, 127.0.0.1); for a topic of one
partition with RF=1 and one with RF=3, a producer (``linger_ms=0``, acks=all, no
compression) sends ``--rate`` records/s for ``--seconds`` while a consumer long-polls the
partition (``client_bench.bench_latency``); each record's latency is from just before
``send`` to its arrival in ``poll_arrow``.  Two more rows use the producer's default
settings (``linger_ms=None``: a record whose leader has nothing of the producer's in flight
goes at once, else it waits at most 5 ms behind that call; lz4 for batches of 512 bytes of
records and more, smaller ones uncompressed) on RF=1 and on RF=3, so
the default settings are shown next to ``linger_ms=0`` for both replication factors.
Prints p50 / p90 / p99 / max in ms with the aims (p50 2 ms, p99 5 ms) and the ratios, the
two stages (send to acknowledgement, acknowledgement to consumption), the CPU each record
cost the client process and the brokers, and two same-run floors: bare loopback gRPC round
trips at the same rate (``ceilings.grpc_round_trips``), and one record's Arrow work in a
loop against after a pause as long as the gap between records (``ceilings.cold_code``: at
a moderate rate every stage runs cold, several times its cost in a loop).
Not part of the test pass/fail; on a shared 2-core machine the tail follows the load
average, printed at start and end.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.ceilings import cold_code, cpu_s, grpc_round_trips
from bench.client_bench import bench_latency
from brokers.launcher.local import LocalCluster
from spark_log import Admin

__all__ = ["main"]

AIM_P50_MS = 2.0
AIM_P99_MS = 5.0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--replica-fetch-transport", choices=("auto", "grpc"), default="auto",
                        help="how followers fetch (auto: the leaders' data listeners, the default; grpc)")
    parser.add_argument("--client-transport", choices=("auto", "grpc", "both"), default="both",
                        help="how the producer and consumer reach the brokers (auto: their data listeners, the "
                             "default; grpc; both: every row with each, in this run)")
    args = parser.parse_args(argv)
    transports = ("auto", "grpc") if args.client_transport == "both" else (args.client_transport,)
    print("load average at start: " + " ".join(f"{x:.1f}" for x in os.getloadavg()), flush=True)
    results: dict[str, list[float]] = {}
    stages: dict[str, dict[str, list[float]]] = {}
    rtt = grpc_round_trips(args.rate, min(2.0, args.seconds))  # the floor on this machine, this run
    cold = cold_code(pause_s=1.0 / args.rate)  # one record's Arrow work, warm and at this rate's gaps
    cpu: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="latency-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3,
                               extra_config={"replica_fetch_transport": args.replica_fetch_transport})
        try:
            bootstrap = cluster.up(timeout_s=90)
            with Admin(bootstrap) as admin:
                admin.create_topic("lat1", partitions=1, replication_factor=1)
                admin.create_topic("lat3", partitions=1, replication_factor=3)
            bench_latency(bootstrap, "lat1", 1.0, args.rate)  # warm-up: connections, first imports
            for transport in transports:
                suffix = "" if len(transports) == 1 else (" data" if transport == "auto" else " gRPC")
                for name, topic, settings in (("RF=1", "lat1", None), ("RF=3 acks=all", "lat3", None),
                                              ("RF=1 defaults", "lat1", {}), ("RF=3 defaults", "lat3", {})):
                    name += suffix
                    stages[name] = {}
                    brokers_before, client_before = [cpu_s(n.pid) for n in cluster.nodes], time.process_time()
                    results[name] = bench_latency(bootstrap, topic, args.seconds, args.rate, settings, stages[name],
                                                  transport=transport)
                    records = max(1, len(results[name]))
                    cpu[name] = ((time.process_time() - client_before) / records * 1e6,
                                 sum(cpu_s(n.pid) - b for n, b in zip(cluster.nodes, brokers_before)) / records * 1e6)
        finally:
            cluster.down()
    print("load average at end: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    print(f"produce -> consume latency at ~{args.rate:,} rec/s, 3 brokers (ms); producer linger_ms=0, no compression, "
          f"acks=all (\"defaults\": Producer() as it comes: linger_ms=None, lz4 from 512 bytes of records a batch); "
          f"followers fetch over "
          f"{'the data listener' if args.replica_fetch_transport == 'auto' else 'gRPC'}")
    print("clients over: " + ", ".join("the brokers' data listeners (\"data\")" if t == "auto" else "gRPC"
                                       for t in transports))
    print(f"{'':22}{'records':>9}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>8}   p50/aim  p99/aim   "
          f"send->ack p50/p99   ack->consumed p50/p99")
    for name, lat in results.items():
        p50, p90, p99 = _pct(lat, 0.5), _pct(lat, 0.9), _pct(lat, 0.99)
        ack, after = stages[name].get("ack", []), stages[name].get("after_ack", [])
        print(f"{name:22}{len(lat):>9,}{p50:>8.2f}{p90:>8.2f}{p99:>8.2f}{max(lat, default=float('nan')):>8.2f}"
              f"   {p50 / AIM_P50_MS:>7.2f}  {p99 / AIM_P99_MS:>7.2f}   {_pct(ack, 0.5):>8.2f} {_pct(ack, 0.99):>8.2f}"
              f"   {_pct(after, 0.5):>10.2f} {_pct(after, 0.99):>8.2f}")
    r50, r99 = _pct(rtt, 0.5), _pct(rtt, 0.99)
    print(f"{'bare gRPC RTT':22}{len(rtt):>9,}{r50:>8.2f}{_pct(rtt, 0.9):>8.2f}{r99:>8.2f}{max(rtt, default=float('nan')):>8.2f}"
          f"   (same run, same rate: one loopback unary call and its callback, no broker)")
    for name, lat in results.items():
        print(f"{name}: p50 = {_pct(lat, 0.5) / r50:.1f} bare round trips, p99 = {_pct(lat, 0.99) / r99:.1f}")
    print("CPU per record (us; the producer and consumer share the client process): "
          + "; ".join(f"{name} client {c:.0f}, brokers {b:.0f}" for name, (c, b) in cpu.items()))
    print(f"one record's Arrow work, same run: median us in a loop -> after a {1000 / args.rate:.1f} ms pause "
          "(the gap between records at this rate)")
    for stage in cold:
        print(f"  {stage.name:58}{stage.warm_us:>8.1f} -> {stage.cold_us:>7.1f}  ({stage.cold_us / stage.warm_us:.1f}x)")
    print(f"aims: p50 {AIM_P50_MS:.0f} ms, p99 {AIM_P99_MS:.0f} ms (ratio <= 1 meets it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
