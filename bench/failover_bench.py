"""Controller failover time: kill -9 the active controller N times and measure.

    python -m bench.failover_bench [--kills 10] [--tick-ms 20] [--election-ticks 10]

Three controller-only node processes on 127.0.0.1 (``tests.support.node_cluster``), three
fake brokers heartbeating from this process so topics can be placed.  For each kill it
records, from the SIGKILL:

- *elected*: a surviving voter reports a new Raft leader in a higher epoch;
- *active*: a surviving voter reports itself the active controller (its NoOp committed);
- *write*: a ``create_topic`` retried by a ``ControllerClient`` succeeds.

Then it restarts the killed node and waits for it to catch up.  It prints min / median
/ p90 / max in milliseconds and as a ratio to the configured election timeout
(``tick_ms * election_ticks``; Raft randomises it in [1x, 2x)), which is the limit the
failover time is judged against.  Not part of the test pass/fail.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from brokers.controller.client import ControllerClient
from brokers.controller.heartbeater import BrokerHeartbeater
from spark_log.errors import SparkLogError
from tests.support.node_cluster import NodeCluster
from tests.support.wait import wait_until

__all__ = ["main"]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _poll_failover(cluster: NodeCluster, killed: int, old_epoch: int, start: float) -> tuple[float, float]:
    """(elected_ms, active_ms) after killing ``killed`` at ``start``."""
    survivors = [i for i in cluster.alive() if i != killed]
    elected = active = None
    deadline = start + 60
    while (elected is None or active is None) and time.monotonic() < deadline:
        for i in survivors:
            try:
                view = cluster.client.describe_cluster(cluster.addresses[i])
            except SparkLogError:
                continue
            now = (time.monotonic() - start) * 1000
            if elected is None and view.controller_id not in (None, killed) and view.controller_epoch > old_epoch:
                elected = now
            if active is None and view.is_active:
                active = now
                elected = elected if elected is not None else now
        time.sleep(0.002)
    if elected is None or active is None:
        raise RuntimeError(
            f"no new controller within 60 s after killing node {killed} "
            f"(new Raft leader seen after {elected} ms, active controller after {active} ms)"
        )
    return elected, active


def run(kills: int, tick_ms: int, election_ticks: int, root: Path) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"elected": [], "active": [], "write": []}
    with NodeCluster(root, size=3, roles=("controller",), tick_ms=tick_ms, election_ticks=election_ticks,
                     session_timeout_ms=10_000) as cluster:
        cluster.start_all()
        addresses = list(cluster.addresses.values())
        brokers = [
            BrokerHeartbeater(ControllerClient(addresses, timeout_s=1.0, rpc_timeout_s=0.5), broker_id=100 + b,
                              address=f"127.0.0.1:{20000 + b}", interval_ms=200)
            for b in range(3)
        ]
        for broker in brokers:
            broker.start()
        try:
            wait_until(lambda: len(cluster.image(cluster.wait_for_active_controller()).live_brokers()) == 3,
                       timeout=30, message="fake brokers did not register")
            writer = ControllerClient(addresses, timeout_s=60.0, rpc_timeout_s=1.0, retry_backoff_ms=2)
            for k in range(kills):
                leader = cluster.wait_for_active_controller()
                old_epoch = cluster.client.describe_cluster(cluster.addresses[leader]).controller_epoch
                write_ms: list[float] = []

                def probe(name: str, start: float) -> None:
                    writer.create_topic(name, partitions=1, replication_factor=1)
                    write_ms.append((time.monotonic() - start) * 1000)

                start = time.monotonic()
                cluster.kill(leader)
                prober = threading.Thread(target=probe, args=(f"probe-{k}", start))
                prober.start()
                elected, active = _poll_failover(cluster, leader, old_epoch, start)
                prober.join(timeout=60)
                results["elected"].append(elected)
                results["active"].append(active)
                results["write"].extend(write_ms)
                print(f"kill {k + 1}/{kills}: node {leader}: elected {elected:.0f} ms, active {active:.0f} ms, "
                      f"write {write_ms[0] if write_ms else float('nan'):.0f} ms", flush=True)
                cluster.start(leader)
                wait_until(lambda: f"probe-{k}" in cluster.image(leader).topics, timeout=30,
                           message=f"node {leader} did not catch up after restart")
            writer.close()
        finally:
            for broker in brokers:
                broker.stop()
                broker.client.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--tick-ms", type=int, default=20)
    parser.add_argument("--election-ticks", type=int, default=10)
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a temporary directory")
    args = parser.parse_args(argv)
    election_ms = args.tick_ms * args.election_ticks
    with tempfile.TemporaryDirectory(prefix="failover-bench-") as tmp:
        root = args.data_dir or Path(tmp)
        results = run(args.kills, args.tick_ms, args.election_ticks, root)
    print()
    print(f"controller failover over {args.kills} kills of the active controller (3 voters, 127.0.0.1)")
    print(f"election timeout = {election_ms} ms (tick {args.tick_ms} ms x {args.election_ticks} ticks, "
          f"randomised in [{election_ms}, {2 * election_ms}) ms)")
    print(f"{'':22}{'min':>8}{'median':>8}{'p90':>8}{'max':>8}   (ms)  | x election timeout: min / median / p90 / max")
    for label, key in (("new Raft leader", "elected"), ("active controller", "active"), ("first write ok", "write")):
        values = results[key]
        if not values:
            continue
        stats = [min(values), statistics.median(values), _percentile(values, 0.9), max(values)]
        ratios = " / ".join(f"{v / election_ms:.2f}" for v in stats)
        print(f"{label:22}" + "".join(f"{v:8.0f}" for v in stats) + f"         | {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
