"""Client benchmark: Producer/Consumer through a real broker next to same-run ceilings.

    python -m bench.client_bench [--dir DIR] [--seconds 8]

Starts a one-node local cluster (broker + controller, RF=1) in ``--dir`` (default a temp
dir) and measures, in the same run, with incompressible values (``os.urandom``: LZ4 gains
nothing on them, so no figure is flattered by compression):

- ceilings (``bench.ceilings``): raw disk writes and ``PartitionLog.append_as_leader`` of
  100-byte-record frames (bench.storage_bench), Arrow IPC encode of the same records, and
  raw bytes through loopback gRPC to another process, in records/s of the same size;
- ``send_batch`` of Arrow tables of 100-byte values to one partition, acks=all, until
  acknowledged, with the producer's default settings and with tuned ones;
- per-record ``send()`` of 100-byte values (10,000 distinct random values in turn),
  default and tuned settings, and the defaults over gRPC (``transport="grpc"``: the
  clients' transport before the data listener carried Produce and Fetch);
- ``poll_arrow`` of everything ``send_batch`` wrote, from the beginning, with the
  consumer's default settings, tuned ones and the defaults over gRPC;
- produce-to-consume latency at a moderate rate (about 2,000 records/s, linger 0): the
  time from ``send`` to the record coming out of ``poll_arrow`` in another thread, p50/p99.

Each row prints the figure, issue 19's aim (send_batch 3,000,000 records/s, send() with
default settings 400,000, poll_arrow 5,000,000, p99 < 10 ms), the ratio, the ratio to the
ceiling that bounds it, and the CPU microseconds per record of the client and the broker
(what the code costs, whatever else the shared machine is doing).  The settings of each
column are printed above the table.  Bounded to about a minute with ``--seconds 2``.
``--memory-limit-mib N`` runs the broker in a memory cgroup of N MiB and fills it (tuned
``send_batch`` into a topic of its own) before the measured runs: the steady state of a
broker host, whose appends recycle page-cache pages instead of taking memory the host
backs on first touch (``bench.memory_limit``; ``bench.replication_bench`` has the same
option).  Without it, whichever run writes into memory the machine left free pays for it.
Never a test: asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

from bench import storage_bench
from bench.ceilings import cpu_s, grpc_ceiling, ipc_ceiling, random_values, send_loop_ceiling
from bench.memory_limit import (MemoryCgroup, MemoryCgroupUnavailable, add_memory_limit_option,
                                check_memory_limit_option)
from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer

MiB = 1024 * 1024
AIMS = {"send_batch": 3_000_000, "send": 400_000, "poll_arrow": 5_000_000, "p99_ms": 10.0}

# The two columns of every row: the clients' defaults, and settings tuned for throughput.
PRODUCER = {
    "default": {},
    "tuned": {"compression": "none", "batch_size": 1 << 20, "linger_ms": 5, "max_in_flight": 8},
}
SEND = {
    "default": {},
    "tuned": {"compression": "none", "linger_ms": 5, "batch_size": 256 * 1024},
    "grpc": {"transport": "grpc"},  # the defaults over gRPC instead of the broker's data listener
}
CONSUMER = {
    "default": {},
    "tuned": {"fetch_max_bytes": 64 << 20, "max_partition_fetch_bytes": 32 << 20},
    "grpc": {"transport": "grpc"},
}


def storage_limit(root: Path, mib: int = 96) -> tuple[float, float, int]:
    """(raw disk records/s, PartitionLog records/s, frame bytes per record) for 100-byte
    records in 16k-record frames, with bench.storage_bench's interleaved measurement."""
    frame = storage_bench.make_frame(100, 16384)
    appends = max(2, mib * MiB // len(frame))
    best_raw = best_log = float("inf")
    for _ in range(2):
        case = storage_bench.Case(100, 16384, "os", frame_bytes=len(frame), appends=appends)
        storage_bench.run_once(case, frame, root)
        best_raw, best_log = min(best_raw, case.raw_write_s), min(best_log, case.log_write_s)
    records = 16384 * appends
    return records / best_raw, records / best_log, len(frame) // 16384


class CpuMeter:
    """CPU seconds of this process and the broker over a measurement: on a shared machine,
    CPU per record says what the code costs whatever the load."""

    def __init__(self, broker_pid: int) -> None:
        self.broker_pid = broker_pid
        self.client0, self.broker0 = time.process_time(), cpu_s(broker_pid)

    def used(self) -> tuple[float, float]:
        return time.process_time() - self.client0, cpu_s(self.broker_pid) - self.broker0


def _settings(kind: type, overrides: dict) -> str:
    """The settings that matter here, as the client sees them (defaults read from its signature)."""
    import inspect

    names = {"Producer": ("compression", "batch_size", "linger_ms", "max_in_flight", "acks", "transport"),
             "Consumer": ("fetch_max_bytes", "max_partition_fetch_bytes", "fetch_max_wait_ms", "transport")}[kind.__name__]
    params = inspect.signature(kind.__init__).parameters
    return ", ".join(f"{n}={overrides.get(n, params[n].default)!r}" for n in names)


def bench_send_batch(bootstrap: str, topic: str, table: pa.Table, seconds: float, settings: dict) -> int:
    """Records sent (and acknowledged) by repeated ``send_batch`` for about ``seconds``."""
    with Producer(bootstrap, **settings) as producer:
        producer.send_batch(topic, table.slice(0, 1000), partition=0)
        producer.flush()
        sent = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            producer.send_batch(topic, table, partition=0)
            sent += table.num_rows
        producer.flush()
    return sent


def bench_send(bootstrap: str, topic: str, seconds: float, settings: dict) -> int:
    values = [os.urandom(100) for _ in range(10_000)]  # distinct: LZ4 finds nothing to shrink
    with Producer(bootstrap, **settings) as producer:
        sent = 0
        start = time.perf_counter()
        send = producer.send
        while time.perf_counter() - start < seconds:
            for value in values:
                send(topic, value, partition=0)
            sent += len(values)
        producer.flush()
        if os.environ.get("BENCH_VERBOSE"):
            m = producer.metrics()
            print(f"  send(): {m['requests']:.0f} requests, {m['batches']:.0f} frames", flush=True)
    return sent


def bench_poll(bootstrap: str, topic: str, expected: int, settings: dict) -> tuple[int, float]:
    """(records, MiB of values) read from the beginning until ``expected`` records."""
    with Consumer(bootstrap, auto_offset_reset="earliest", **settings) as consumer:
        consumer.assign([(topic, 0)])
        consumer.position(topic, 0)
        rows = nbytes = 0
        while rows < expected:
            for batch in consumer.poll_arrow(1.0):
                rows += batch.num_rows
                nbytes += batch.column("value").nbytes
    return rows, nbytes / MiB


@dataclass
class Row:
    figure: str
    setting: str
    records: int
    seconds: float
    client_s: float
    broker_s: float
    aim: float | None
    ceiling: tuple[str, float] | None

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def _measure(pid: int, fn: Callable[[], int]) -> tuple[int, float, float, float]:
    meter = CpuMeter(pid)
    start = time.perf_counter()
    records = fn()
    elapsed = time.perf_counter() - start
    return (records, elapsed, *meter.used())


def bench_latency(bootstrap: str, topic: str, seconds: float, rate: int = 2000,
                  producer_settings: dict | None = None, stages: dict | None = None,
                  transport: str = "auto") -> list[float]:
    """Milliseconds from just before ``send`` to the record coming out of ``poll_arrow`` in
    another thread, at ``rate`` records/s.  The producer has ``linger_ms=0`` and no
    compression unless ``producer_settings`` says otherwise.  With ``stages`` (a dict),
    also fills ``stages["ack"]`` (send to acknowledgement, ms) and ``stages["after_ack"]``
    (acknowledgement to consumption, ms) for the records that have both.  ``transport``: the
    clients' (auto: the brokers' data listeners; grpc)."""
    sent_at: dict[int, float] = {}
    acked_at: dict[int, float] = {}
    got_at: dict[int, float] = {}
    done = threading.Event()

    def consume() -> None:
        with Consumer(bootstrap, fetch_max_wait_ms=100, transport=transport) as consumer:
            consumer.assign([(topic, 0)])
            consumer.seek_to_end()
            ready.set()
            while not done.is_set() or len(got_at) < len(sent_at):
                for batch in consumer.poll_arrow(0.2):
                    now = time.perf_counter()
                    for seq in batch.column("value").to_pylist():
                        if int(seq) in sent_at:
                            got_at[int(seq)] = now
                if done.is_set() and time.perf_counter() - stop_at > 5:
                    break

    ready = threading.Event()
    stop_at = float("inf")
    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    ready.wait(30)
    settings = {"linger_ms": 0, "compression": "none"} if producer_settings is None else producer_settings
    with Producer(bootstrap, transport=transport, **settings) as producer:
        start = time.perf_counter()
        i = 0
        while time.perf_counter() - start < seconds:
            due = start + i / rate
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)  # pacing the load generator
            sent_at[i] = time.perf_counter()
            future = producer.send(topic, str(i).encode(), partition=0)
            if stages is not None:
                future.add_done_callback(lambda _f, i=i: acked_at.__setitem__(i, time.perf_counter()))
            i += 1
        producer.flush()
    stop_at = time.perf_counter()
    done.set()
    reader.join(timeout=15)
    if stages is not None:
        both = [i for i in got_at if i in acked_at]
        stages["ack"] = [(acked_at[i] - sent_at[i]) * 1000 for i in both]
        stages["after_ack"] = [(got_at[i] - acked_at[i]) * 1000 for i in both]
    return [(got_at[i] - sent_at[i]) * 1000 for i in sorted(got_at)]


def _print_rows(rows: list[Row], loops: dict[str, Any]) -> None:
    print(f"{'figure':<18} {'settings':<8} {'rec/s':>12} {'aim':>11} {'vs aim':>7} {'vs ceiling':>15} "
          f"{'CPU us/rec client':>18} {'broker':>7}")
    for r in rows:
        ceiling = f"{r.rate / r.ceiling[1]:.2f} {r.ceiling[0]}" if r.ceiling else ""
        aim = f"{r.aim:>11,.0f} {r.rate / r.aim:>7.2f}" if r.aim else f"{'':>11} {'':>7}"
        print(f"{r.figure:<18} {r.setting:<8} {r.rate:>12,.0f} {aim} {ceiling:>15} "
              f"{r.client_s / r.records * 1e6:>18.3f} {r.broker_s / r.records * 1e6:>7.3f}")
    for setting, loop in loops.items():
        r = next(r for r in rows if r.figure.startswith("send()") and r.setting == setting)
        client_us, broker_us = r.client_s / r.records * 1e6, r.broker_s / r.records * 1e6
        # on a shared machine the wall rate follows the load; the CPU per record does not:
        # the rate this code reaches with a core for the client and one for the broker
        print(f"send() {setting}: bare loop (same run) {loop.records_per_s:,.0f} rec/s at {loop.cpu_us_per_record:.3f} "
              f"us CPU/rec; send() costs {client_us / loop.cpu_us_per_record:.0f}x the loop's CPU; CPU-bound rate "
              f"with a core each for client and broker {1e6 / max(client_us, broker_us):,.0f} rec/s "
              f"({1e6 / max(client_us, broker_us) / AIMS['send']:.2f} of the aim)")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None)
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds per measured producer run")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--only", choices=("send",), default=None,
                        help="only the per-record send() rows (with their ceiling), no ceilings of the other rows")
    parser.add_argument("--peers", action="store_true", help="also NATS JetStream and Redis Streams (bench/peers)")
    add_memory_limit_option(parser, "the broker")
    args = parser.parse_args(argv)
    check_memory_limit_option(parser, args)
    cgroup: MemoryCgroup | None = None
    if args.memory_limit_mib:
        try:
            cgroup = MemoryCgroup(args.memory_limit_mib << 20, "client-bench")
        except MemoryCgroupUnavailable as exc:
            parser.exit(2, f"client_bench: --memory-limit-mib needs a memory cgroup: {exc}\n")
    try:
        return _run(args, cgroup)
    finally:
        if cgroup is not None:
            cgroup.close()


def _run(args: argparse.Namespace, cgroup: MemoryCgroup | None) -> dict:
    print("load average at start: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    root = Path(args.dir or tempfile.mkdtemp(prefix="client-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    only_send = args.only == "send"
    pa.array([b""], pa.binary())  # pyarrow's one-time imports (pandas) before any CPU is counted
    table = pa.table({"value": random_values(250_000, 100)})
    if not only_send:
        raw_rps, log_rps, frame_per_record = storage_limit(root)
        encode, _decode, wire_per_record = ipc_ceiling(pa.record_batch([table.column(0).chunk(0)], names=["value"]))
        wire = grpc_ceiling(wire_per_record + 16)  # + the bytes-topic columns send_batch adds (key, headers, timestamp)
    loops: dict[str, Any] = {}
    rows: list[Row] = []
    lat: list[float] = []
    cluster = LocalCluster(root / "cluster", brokers=1)
    try:
        bootstrap = cluster.up(timeout_s=90)
        with Admin(bootstrap) as admin:
            for name in ("b-default", "b-tuned", "s-default", "s-tuned", "s-grpc", "lat", "fill"):
                admin.create_topic(name, config={"max.message.bytes": 64 << 20, "segment.bytes": 1 << 30})
        pid = cluster.nodes[0].pid
        if cgroup is not None:
            cgroup.add(pid)
            cgroup.fill(lambda: bench_send_batch(bootstrap, "fill", table, 1.0, PRODUCER["tuned"]), "the broker")
        written = {}
        for setting, opts in ({} if only_send else PRODUCER).items():
            n, secs, c, b = _measure(pid, lambda: bench_send_batch(bootstrap, f"b-{setting}", table, args.seconds, opts))
            written[setting] = n + 1000
            rows.append(Row("send_batch 100 B", setting, n, secs, c, b, AIMS["send_batch"],
                            ("gRPC raw", wire.records_per_s)))
        for setting, opts in SEND.items():
            loop = loops[setting] = send_loop_ceiling([os.urandom(100) for _ in range(10_000)], seconds=1.0)
            n, secs, c, b = _measure(pid, lambda: bench_send(bootstrap, f"s-{setting}", args.seconds, opts))
            rows.append(Row("send() 100 B", setting, n, secs, c, b, AIMS["send"], ("bare loop", loop.records_per_s)))
        for setting, opts in ({} if only_send else CONSUMER).items():
            n, secs, c, b = _measure(pid, lambda: bench_poll(bootstrap, "b-tuned", written["tuned"], opts)[0])
            rows.append(Row("poll_arrow 100 B", setting, n, secs, c, b, AIMS["poll_arrow"],
                            ("gRPC raw", wire.records_per_s)))
        if not args.no_latency and not only_send:
            lat = sorted(bench_latency(bootstrap, "lat", min(4.0, args.seconds)))
    finally:
        cluster.down()
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    print("values: os.urandom, 100 bytes (incompressible)")
    if only_send:
        print(f"settings: send() default      Producer({_settings(Producer, SEND['default'])})")
        print(f"          send() tuned        Producer({_settings(Producer, SEND['tuned'])})")
        print(f"          send() grpc         Producer({_settings(Producer, SEND['grpc'])})")
        _print_rows(rows, loops)
        print("load average at end: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
        return {"send": rows[0].rate, "rows": [(r.figure, r.setting, r.rate) for r in rows], "aims": AIMS}
    print(f"ceilings, same run: raw disk {raw_rps:,.0f} rec/s and PartitionLog append {log_rps:,.0f} rec/s "
          f"({frame_per_record} frame bytes/record); Arrow IPC encode {encode.records_per_s:,.0f} rec/s "
          f"({encode.cpu_us_per_record:.3f} us CPU/rec); loopback gRPC raw bytes {wire.records_per_s:,.0f} rec/s "
          f"of {wire_per_record + 16} bytes ({wire.cpu_us_per_record:.3f} us CPU/rec, both ends)")
    print(f"settings: send_batch default  Producer({_settings(Producer, PRODUCER['default'])})")
    print(f"          send_batch tuned    Producer({_settings(Producer, PRODUCER['tuned'])})")
    print(f"          send() default      Producer({_settings(Producer, SEND['default'])})")
    print(f"          send() tuned        Producer({_settings(Producer, SEND['tuned'])})")
    print(f"          send() grpc         Producer({_settings(Producer, SEND['grpc'])})")
    print(f"          poll_arrow default  Consumer({_settings(Consumer, CONSUMER['default'])})")
    print(f"          poll_arrow tuned    Consumer({_settings(Consumer, CONSUMER['tuned'])})")
    print(f"          poll_arrow grpc     Consumer({_settings(Consumer, CONSUMER['grpc'])})")
    _print_rows(rows, loops)
    if lat:
        p50 = statistics.median(lat)
        p99 = lat[int(len(lat) * 0.99) - 1]
        print(f"produce->consume latency (ms) p50 {p50:.2f}  p99 {p99:.2f}  (aim p99 < {AIMS['p99_ms']:.0f}; "
              f"{len(lat)} records at ~2,000/s; p99 vs aim {p99 / AIMS['p99_ms']:.2f})")
    print("load average at end: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    # the figures as data (bench/report.py; the peers): send_batch and poll_arrow tuned, send() with defaults
    rate = {(r.figure, r.setting): r.rate for r in rows}
    p50 = statistics.median(lat) if lat else float("nan")
    p99 = lat[int(len(lat) * 0.99) - 1] if lat else float("nan")
    figures: dict = {"send_batch": {100: rate[("send_batch 100 B", "tuned")]}, "send": rate[("send() 100 B", "default")],
                     "poll_arrow": {100: rate[("poll_arrow 100 B", "tuned")]}, "p50_ms": p50, "p99_ms": p99,
                     "latency_ms": lat, "raw_disk": raw_rps, "partition_log": log_rps, "aims": AIMS,
                     "cpu": {f"{r.figure} {r.setting}": (r.records, r.client_s, r.broker_s) for r in rows},
                     "rows": [(r.figure, r.setting, r.rate) for r in rows],
                     "memory_limit_mib": cgroup.limit_bytes >> 20 if cgroup is not None else None}
    if args.peers:
        from bench.peers import compare
        figures["peers"] = compare.client(figures, seconds=min(args.seconds, 3.0))
    return figures


if __name__ == "__main__":
    main()
