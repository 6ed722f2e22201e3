"""Replication cost and leader failover time on a local 3-node cluster.

    python -m bench.replication_bench [--seconds 8] [--kills 3] [--rows 20000] [--window 2]

1. Produce throughput, same cluster, same run: 100-byte records from Arrow batches
   (``Producer.send_batch``, 3 partitions, one leader per broker) into an RF=1 topic with
   acks=1 and into an RF=3 topic (``min.insync.replicas=2``) with acks=all.  Same data, same
   producer settings except ``acks`` (lz4, ``linger_ms=5``, 1 MiB batches, a fresh
   producer per run), ``--window`` rounds of one ``send_batch`` per partition in flight.
   Each topic gets an unmeasured warm-up run, then the runs alternate (RF=1, RF=3, RF=1,
   ...) so both meet the same disturbances of the shared machine.  Prints every run, the
   mean records/s of each, their ratio and both issue 5 aims (ratio >= 0.5, RF=3 >=
   2,000,000 records/s), and the CPU seconds per record of the three brokers and of the
   producer process (what the code costs, whatever else the machine is doing; with every
   process on 2 cores the ratio cannot beat the CPU-per-record ratio for long).
   Ceilings from the same run: Arrow IPC encode, loopback gRPC raw bytes, page cache
   appends (``bench.ceilings``) and the disk's sustained write rate (``--disk-mib`` MiB
   written and fdatasync'd, before the runs): a run longer than the page cache absorbs
   stores at most that, so RF=3 is bounded by a third of it ("vs disk": records/s times
   copies against it; a short run can exceed 1.0 while the page cache absorbs it).
   Counts are verified after each run: every ``send_batch`` acknowledged, the first offsets
   of the acknowledged frames increasing per partition, each partition's end offset grown by
   exactly the records acknowledged (none lost, none doubled), and for RF=3 every replica's
   log end offset (as the leader reports it) at that end.  A failed check exits 1.
2. Failover: ``--kills`` times, SIGKILL the leader of a partition of an RF=3 topic (a leader
   that is not the active controller, so the figure is the partition's failover and not a
   controller election) and measure, from the kill: *elected*, when the committed metadata
   (``Admin.describe_topic``, polled every 20 ms) names another leader; *write*, when a
   producer retrying all along gets its first acks=all write to that partition
   acknowledged.  Both as median and max, in ms and as a multiple of the session timeout,
   which bounds them from below (the controller fences a broker that missed its
   heartbeats for ``session_timeout_ms``); *write - elected* is what the new leader, its
   followers and the client add.  The killed node is restarted and rejoins the ISR before
   the next kill.  ``--controller-kills`` does the same for a leader that is also the active
   controller: a Raft election (``election_ticks``) comes before the fencing.
3. ``--memory-limit-mib N``: the brokers run in a memory cgroup of N MiB
   (``bench.memory_limit``; as root, else the bench exits 2 saying why), and before the
   measured runs the bench produces, alternating the topics as the runs do, until the cgroup
   has reached its limit: from there on every append lands in a page the kernel recycled,
   as on a broker host in steady state (page cache full) or under a container's memory
   limit, instead of in memory the host backs on first touch (on this kind of virtual
   machine, ten times the CPU per stored byte: the page-cache ceiling prints both).  Without
   it the figures are those of a machine with free memory.  The peers are not run in this
   mode (they would not share the condition).

Brokers run with ``session_timeout_ms=2000`` / ``heartbeat_interval_ms=200``.  Prints the
load average at the start and the end (the machine may be shared).  Not part of the test
pass/fail; bounded to about two minutes.
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from bench.ceilings import disk_write_ceiling, grpc_ceiling, ipc_ceiling, page_cache_ceiling
from bench.memory_limit import (MemoryCgroup, MemoryCgroupUnavailable, add_memory_limit_option,
                                check_memory_limit_option)
from brokers.launcher.local import LocalCluster
from spark_log import Admin, Producer
from spark_log._client import Cluster
from spark_log.errors import SparkLogError
from spark_log.schemas import BYTES_SCHEMA
from tests.support.wait import wait_until

__all__ = ["main"]

FAST = {"heartbeat_interval_ms": 200, "session_timeout_ms": 2000, "replica_lag_time_max_ms": 3000}
AIM_RATIO = 0.5
_DISK_PROBE_BYTES = 120  # the record size the disk ceiling is measured in (rescaled to the wire's)
AIM_RF1_RECORDS_PER_S = 5_000_000
AIM_RF3_RECORDS_PER_S = 3_000_000
PARTITIONS = 3
# the two settings columns: the producer's defaults (only acks set), and tuned for throughput
SETTINGS = {"default": {}, "tuned": {"compression": "none", "linger_ms": 5, "batch_size": 1 << 20},
            "grpc": {"transport": "grpc"}}  # grpc: the defaults with Produce over gRPC, not the data listener


def _batch(rows: int, payload: str = "random") -> pa.RecordBatch:
    """``rows`` 100-byte values: distinct random bytes (incompressible; the default) or
    ``b"x" * 100`` (``--payload compressible``; the bench prints how far LZ4 shrinks either)."""
    if payload == "random":
        values = pa.array([os.urandom(100) for _ in range(rows)], pa.binary())
    else:
        values = pa.array([b"x" * 100] * rows, pa.binary())
    keys = pa.array([None] * rows, pa.binary())
    headers = pa.array([[]] * rows, BYTES_SCHEMA.field("headers").type)
    stamps = pa.array([int(time.time() * 1000)] * rows, pa.timestamp("ms"))
    return pa.record_batch([keys, values, headers, stamps], schema=BYTES_SCHEMA)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CountCheckError(Exception):
    """The records acknowledged and the records stored disagree."""


@dataclass
class Run:
    label: str
    records: int
    seconds: float
    broker_cpu_s: float
    producer_cpu_s: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    def cpu_us(self) -> tuple[float, float]:
        """(broker, producer) CPU microseconds per record."""
        return self.broker_cpu_s / self.records * 1e6, self.producer_cpu_s / self.records * 1e6


class Ledger:
    """Records acknowledged per partition of one topic, checked against the stored offsets."""

    def __init__(self, admin: Admin, topic: str, replicas: int) -> None:
        self.admin, self.topic, self.replicas = admin, topic, replicas
        self.end = dict(admin.list_offsets(topic, "latest"))

    def check(self, acked: dict[int, int], first_offsets: dict[int, list[int]]) -> None:
        for p, offsets in first_offsets.items():
            if offsets != sorted(set(offsets)) or (offsets and offsets[0] < self.end[p]):
                raise CountCheckError(f"{self.topic}-{p}: acknowledged first offsets are not increasing from "
                                      f"{self.end[p]}: {offsets[:5]}...")
        expected = {p: self.end[p] + acked.get(p, 0) for p in self.end}
        stored = self.admin.list_offsets(self.topic, "latest")
        if stored != expected:
            raise CountCheckError(f"{self.topic}: end offsets {stored} after acknowledging {acked} records "
                                  f"from {self.end} (expected {expected})")
        if self.replicas > 1:
            def on_every_replica() -> bool:
                parts = self.admin.describe_topic(self.topic).partitions
                return all(p.log_end_offsets is not None and len(p.log_end_offsets) == self.replicas
                           and all(leo is not None and leo >= expected[i] for leo in p.log_end_offsets.values())
                           for i, p in parts.items())
            try:
                wait_until(on_every_replica, timeout=30, message="every replica holds every acknowledged record")
            except (AssertionError, TimeoutError) as exc:
                raise CountCheckError(f"{self.topic}: {exc}") from None
        self.end = expected


def _throughput(cluster: LocalCluster, topic: str, acks: str | int, seconds: float, batch: pa.RecordBatch,
                window: int, ledger: Ledger, settings: str = "tuned") -> Run:
    """Send ``window`` rounds (one ``send_batch`` per partition each) in flight for ``seconds``;
    the rate counts acknowledged records over the time until the last acknowledgement."""
    pids = [n.pid for n in cluster.nodes]
    acked: dict[int, int] = collections.Counter()
    first_offsets: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    rounds: collections.deque = collections.deque()

    def settle(sent_round: list) -> None:
        for partition, futures in sent_round:
            for future in futures:
                got_partition, offset = future.result(timeout=60)
                if got_partition != partition:
                    raise CountCheckError(f"a frame for partition {partition} was acknowledged in {got_partition}")
                first_offsets[partition].append(offset)
            acked[partition] += batch.num_rows

    broker0, producer0 = sum(_cpu_s(pid) for pid in pids), time.process_time()
    with Producer(cluster.bootstrap, acks=acks, **SETTINGS[settings]) as producer:
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            rounds.append([(p, producer.send_batch(topic, batch, partition=p)) for p in range(PARTITIONS)])
            if len(rounds) >= window:
                settle(rounds.popleft())
        while rounds:
            settle(rounds.popleft())
        elapsed = time.monotonic() - started
    broker_s, producer_s = sum(_cpu_s(pid) for pid in pids) - broker0, time.process_time() - producer0
    ledger.check(acked, first_offsets)
    return Run(f"{topic} acks={acks} {settings}", sum(acked.values()), elapsed, broker_s, producer_s)


def _produce_runs(cluster: LocalCluster, admin: Admin, args: argparse.Namespace,
                  cgroup: MemoryCgroup | None = None) -> dict:
    admin.create_topic("rf1", partitions=PARTITIONS, replication_factor=1)
    admin.create_topic("rf3", partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"})
    wait_until(lambda: all(len(p.isr) == 3 for p in admin.describe_topic("rf3", live=False).partitions.values()),
               timeout=30, message="rf3 fully in sync")
    batch = _batch(args.rows, args.payload)
    ledgers = {"rf1": Ledger(admin, "rf1", 1), "rf3": Ledger(admin, "rf3", 3)}
    cases = [(topic, acks, setting) for setting in args.settings for topic, acks in (("rf1", 1), ("rf3", "all"))]
    # before any run: the runs' own dirty pages would still be written back under it
    sustained = (disk_write_ceiling(_DISK_PROBE_BYTES, str(cluster.data_dir), args.disk_mib)
                 if args.disk_mib > 0 else None)
    for topic, acks, setting in cases[:2]:  # warm-up: connections, metadata, first segment files
        _throughput(cluster, topic, acks, 1.0, batch, args.window, ledgers[topic], setting)
    if cgroup is not None:  # each case in turn, a second each
        cgroup.fill(lambda: sum(_throughput(cluster, topic, acks, 1.0, batch, args.window, ledgers[topic], setting).records
                                for topic, acks, setting in cases), "the brokers")
    runs: dict[tuple[str, str], list[Run]] = {(t, s): [] for t, _, s in cases}
    for _ in range(args.rounds):
        for topic, acks, setting in cases:
            run = _throughput(cluster, topic, acks, args.seconds / args.rounds, batch, args.window, ledgers[topic],
                              setting)
            runs[(topic, setting)].append(run)
            broker_us, producer_us = run.cpu_us()
            print(f"  {run.label:23s} {run.rate:12,.0f} rec/s  ({run.records:,} records in {run.seconds:.2f} s; "
                  f"CPU per record: brokers {broker_us:.3f} us, producer {producer_us:.3f} us)")
    encode, _, wire_bytes = ipc_ceiling(batch)
    wire = grpc_ceiling(wire_bytes)
    first_write, recycled = page_cache_ceiling(wire_bytes, str(cluster.data_dir))
    values = batch.column("value").buffers()[2]
    lz4_ratio = values.size / max(1, len(pa.compress(values, codec="lz4", asbytes=True)))
    print(f"produce 100-byte {args.payload} records (LZ4 shrinks their values {lz4_ratio:.1f}x), Arrow batches of "
          f"{args.rows:,}, {args.window} rounds in flight")
    print("  settings: " + "; ".join(f"{s}: Producer(acks=..., {', '.join(f'{k}={v!r}' for k, v in SETTINGS[s].items())})"
                                      for s in args.settings))
    print(f"  ceilings, same run: Arrow IPC encode {encode.records_per_s:,.0f} rec/s; loopback gRPC raw bytes "
          f"{wire.records_per_s:,.0f} rec/s of {wire_bytes} bytes ({wire.cpu_us_per_record:.3f} us CPU/rec both ends); "
          f"page cache appends, per copy (RF=3 stores 3): first write {first_write.records_per_s:,.0f} rec/s "
          f"({first_write.cpu_us_per_record:.3f} us CPU/rec), into recycled pages {recycled.records_per_s:,.0f} rec/s "
          f"({recycled.cpu_us_per_record:.3f} us CPU/rec)")
    disk_rate = 0.0
    if sustained is not None:
        disk_rate = sustained.records_per_s * _DISK_PROBE_BYTES / wire_bytes  # in this run's record size
        # every record is stored once per replica: past what the page cache absorbs, RF=n cannot
        # go faster than the disk's sustained rate divided by n (all replicas share this disk)
        print(f"  disk bound, same run: {args.disk_mib:,} MiB written and fdatasync'd at "
              f"{disk_rate * wire_bytes / 1e6:,.0f} MB/s = {disk_rate:,.0f} rec/s of "
              f"{wire_bytes} bytes stored once (RF=1), {disk_rate / 3:,.0f} stored three times (RF=3); "
              f"aims: RF=1 {AIM_RF1_RECORDS_PER_S / disk_rate:.2f}x and RF=3 "
              f"{AIM_RF3_RECORDS_PER_S * 3 / disk_rate:.2f}x of it")
    print(f"  {'figure':<22} {'settings':<8} {'rec/s':>12} {'aim':>11} {'vs aim':>7} {'vs gRPC raw':>11} "
          f"{'vs disk':>8} {'CPU us/rec brokers':>18} {'producer':>8}")
    means: dict[tuple[str, str], float] = {}
    for (topic, setting), rs in runs.items():
        rate = means[(topic, setting)] = statistics.mean(r.rate for r in rs)
        aim = AIM_RF1_RECORDS_PER_S if topic == "rf1" else AIM_RF3_RECORDS_PER_S
        records = sum(r.records for r in rs)
        broker_us = sum(r.broker_cpu_s for r in rs) / records * 1e6
        producer_us = sum(r.producer_cpu_s for r in rs) / records * 1e6
        name = "RF=1 acks=1" if topic == "rf1" else "RF=3 acks=all"
        copies = 1 if topic == "rf1" else 3
        vs_disk = f"{rate * copies / disk_rate:>8.2f}" if sustained is not None else f"{'-':>8}"
        print(f"  {name:<22} {setting:<8} {rate:>12,.0f} {aim:>11,} {rate / aim:>7.2f} {rate / wire.records_per_s:>11.2f} "
              f"{vs_disk} {broker_us:>18.3f} {producer_us:>8.3f}")
    for setting in args.settings:
        ratio = means[("rf3", setting)] / means[("rf1", setting)]
        print(f"  RF=3/RF=1 ({setting}): {ratio:.2f} (aim >= {AIM_RATIO}: {'met' if ratio >= AIM_RATIO else 'NOT met'})")
    print("  counts verified: every acknowledged record stored once, RF=3 on every replica")
    best = "tuned" if "tuned" in args.settings else args.settings[0]  # bench/report.py and the peers: one column
    cpu = {t: (sum(r.broker_cpu_s + r.producer_cpu_s for r in rs) / sum(r.records for r in rs) * 1e6)
           for (t, s), rs in runs.items() if s == best}
    return {"rf1": means[("rf1", best)], "rf3": means[("rf3", best)],
            "ratio": means[("rf3", best)] / means[("rf1", best)], "cpu_us": cpu, "rows": args.rows,
            "window": args.window, "settings": best, "means": {f"{t} {s}": v for (t, s), v in means.items()},
            "disk_records_per_s": disk_rate or None,
            "memory_limit_mib": cgroup.limit_bytes >> 20 if cgroup is not None else None}


def _active_controller(cluster: LocalCluster) -> int:
    client = Cluster(cluster.bootstrap)
    try:
        return client.refresh([]).controller_id
    finally:
        client.close()


def _failover(cluster: LocalCluster, admin: Admin, topic: str, *, controller: bool) -> tuple[float, float]:
    """(elected, first write) seconds after killing a partition leader that is (``controller``)
    or is not the active controller."""
    active = _active_controller(cluster)
    description = admin.describe_topic(topic, live=False)
    partition, leader = next(((i, p.leader) for i, p in sorted(description.partitions.items())
                              if p.leader is not None and (p.leader == active) == controller),
                             (0, description.partitions[0].leader))
    node = next(n for n in cluster.nodes if n.node_id == leader)
    elected: list[float] = []
    stop = threading.Event()

    def watch(killed: float) -> None:
        with Admin(",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes if n.node_id != leader)) as watcher:
            while not stop.is_set():
                try:
                    now_leader = watcher.describe_topic(topic, live=False).partitions[partition].leader
                except SparkLogError:
                    now_leader = leader
                if now_leader is not None and now_leader != leader:
                    elected.append(time.monotonic() - killed)
                    return
                stop.wait(0.02)

    with Producer(cluster.bootstrap, acks="all", linger_ms=0, delivery_timeout_ms=60_000) as producer:
        producer.send(topic, b"warm", partition=partition).result(timeout=30)
        killed = time.monotonic()
        cluster.stop_node(node, kill=True)
        watcher = threading.Thread(target=watch, args=(killed,), daemon=True)
        watcher.start()
        try:
            producer.send(topic, b"after-kill", partition=partition).result(timeout=60)
            written = time.monotonic() - killed
            watcher.join(timeout=10)
        finally:
            stop.set()
    cluster.start_node(node)
    _wait_settled(admin, topic)
    return (elected[0] if elected else float("nan")), written


def _wait_settled(admin: Admin, topic: str) -> None:
    """Every replica in the ISR, then every partition led by its preferred replica (asked for
    at once rather than left to the controller's periodic check), so no leadership change is
    under way when the next kill starts."""
    def state() -> str:
        parts = admin.describe_topic(topic, live=False).partitions
        return ", ".join(f"{i}: leader {p.leader} replicas {p.replicas} isr {p.isr}" for i, p in sorted(parts.items()))

    wait_until(lambda: all(len(p.isr) == 3 for p in admin.describe_topic(topic, live=False).partitions.values()),
               timeout=60, message=lambda: "every replica back in the ISR: " + state())

    def preferred() -> bool:
        parts = admin.describe_topic(topic, live=False).partitions.values()
        if all(p.leader == p.replicas[0] for p in parts):
            return True
        admin.elect_leaders(topic)
        return False
    wait_until(preferred, timeout=30, interval=0.2, message=lambda: "preferred leaders back: " + state())


def _failovers(cluster: LocalCluster, admin: Admin, kills: int, *, controller: bool) -> None:
    if "failover" not in admin.list_topics():
        admin.create_topic("failover", partitions=PARTITIONS, replication_factor=3)
    _wait_settled(admin, "failover")
    results = []
    for _ in range(kills):
        try:
            results.append(_failover(cluster, admin, "failover", controller=controller))
        except (SparkLogError, TimeoutError, AssertionError) as exc:
            print(f"failover run failed: {exc!r}")
    if not results:
        return
    session_s = FAST["session_timeout_ms"] / 1000
    rows = {"elected": [e for e, _ in results], "first acks=all write": [w for _, w in results],
            "write - elected": [w - e for e, w in results]}
    which = "that is also the active controller" if controller else "(not the active controller)"
    print(f"partition leader {which} kill -> ... over {len(results)} kills "
          f"(session timeout {FAST['session_timeout_ms']} ms):")
    for name, values in rows.items():
        med, top = statistics.median(values), max(values)
        print(f"  {name:22s} median {med * 1000:6.0f} ms ({med / session_s:.2f} x session), "
              f"max {top * 1000:6.0f} ms ({top / session_s:.2f} x session)")


def main(argv: list[str] | None = None, figures: dict | None = None) -> int:
    """Runs the bench; with ``figures`` given, fills it with the figures as data (bench/report.py)."""
    figures = {} if figures is None else figures
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per topic")
    parser.add_argument("--rounds", type=int, default=2, help="alternating runs per topic")
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--controller-kills", type=int, default=0,
                        help="also kill a partition leader that is the active controller (a Raft election first)")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--payload", choices=("random", "compressible"), default="random",
                        help="100-byte values: random bytes (incompressible) or b'x' * 100")
    parser.add_argument("--window", type=int, default=2, help="rounds of send_batch calls in flight")
    parser.add_argument("--settings", nargs="+", choices=tuple(SETTINGS), default=["default", "tuned"],
                        help="producer settings columns to run (grpc: the defaults over gRPC)")
    parser.add_argument("--peers", action="store_true", help="also NATS JetStream and Redis Streams (bench/peers)")
    parser.add_argument("--replica-fetch-transport", choices=("auto", "grpc"), default="auto",
                        help="how followers fetch: the leaders' data listeners (auto, the default) or gRPC")
    parser.add_argument("--disk-mib", type=int, default=2048,
                        help="MiB written and fdatasync'd for the sustained disk ceiling (0: skip it)")
    add_memory_limit_option(parser, "the brokers")
    args = parser.parse_args(argv)
    check_memory_limit_option(parser, args)
    print("load average at start: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    with tempfile.TemporaryDirectory(prefix="replication-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3,
                               extra_config={**FAST, "replica_fetch_transport": args.replica_fetch_transport})
        print(f"followers fetch over: {'the data listener' if args.replica_fetch_transport == 'auto' else 'gRPC'}")
        cgroup: MemoryCgroup | None = None
        try:
            if args.memory_limit_mib:
                try:
                    cgroup = MemoryCgroup(args.memory_limit_mib << 20, "replication-bench")
                except MemoryCgroupUnavailable as exc:
                    print(f"replication_bench: --memory-limit-mib needs a memory cgroup: {exc}", file=sys.stderr)
                    return 2
            cluster.up(timeout_s=60)
            if cgroup is not None:
                for node in cluster.nodes:
                    cgroup.add(node.pid)
            with Admin(cluster.bootstrap) as admin:
                try:
                    figures.update(_produce_runs(cluster, admin, args, cgroup))
                except CountCheckError as exc:
                    print(f"COUNT CHECK FAILED: {exc}")
                    return 1
                if args.kills:
                    _failovers(cluster, admin, args.kills, controller=False)
                if args.controller_kills:
                    _failovers(cluster, admin, args.controller_kills, controller=True)
        finally:
            cluster.down(timeout_s=15)
            if cgroup is not None:
                cgroup.close()
    if args.peers:  # issue 19: the peers on the same record sizes, after spark-log's cluster is down
        from bench.peers import compare
        figures["peers"] = compare.replication(figures, seconds=min(args.seconds / args.rounds, 3.0))
    print("load average at end: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
