"""Client benchmark: Producer/Consumer through a real broker next to the storage limit.

    python -m bench.client_bench [--dir DIR] [--seconds 8]

Starts a one-node local cluster (broker + controller, RF=1) in ``--dir`` (default a temp
dir) and measures, in the same run and on the same disk:

- storage limit: ``os.write`` of 100-byte-record frames to a file (raw disk, fsync at the
  end) and ``PartitionLog.append_as_leader`` of the same frames (bench.storage_bench);
- ``send_batch`` of Arrow tables (100-byte and 1 KiB values, no compression) to one
  partition, acks=all, until acknowledged: records/s and MiB/s;
- per-record ``send()`` of 100-byte values (linger 5 ms, 64 KiB batches);
- ``poll_arrow`` of everything written, from the beginning: records/s and MiB/s;
- produce-to-consume latency at a moderate rate (about 2,000 records/s, linger 0): the
  time from ``send`` to the record coming out of ``poll_arrow`` in another thread, p50/p99.

Figures are printed as ratios against issue 4's aims (send_batch 2,000,000 records/s,
send() 300,000 records/s, poll_arrow 5,000,000 records/s, p99 < 10 ms) and against the
storage limit measured here, plus the CPU seconds the client and the broker spent (records
per CPU-second: what the code costs, whatever else the shared machine is doing).  Bounded
to about two minutes.  Never a test: asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from bench import storage_bench
from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer

MiB = 1024 * 1024
AIMS = {"send_batch": 2_000_000, "send": 300_000, "poll_arrow": 5_000_000, "p99_ms": 10.0}


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


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds of this process and the broker over a measurement: on a shared machine,
    records per CPU-second says what the code costs whatever the load."""

    def __init__(self, broker_pid: int) -> None:
        self.broker_pid = broker_pid
        self.client0, self.broker0 = time.process_time(), _cpu_s(broker_pid)

    def used(self) -> tuple[float, float]:
        return time.process_time() - self.client0, _cpu_s(self.broker_pid) - self.broker0


def _values(rows: int, size: int) -> pa.Array:
    seed = np.random.default_rng(1).integers(0, 256, size=rows + size, dtype=np.uint8).tobytes()
    offsets = np.arange(rows + 1, dtype=np.int32) * size
    data = np.frombuffer(seed, dtype=np.uint8)
    # rows of `size` bytes each; distinct windows of one random buffer (incompressible)
    body = np.lib.stride_tricks.sliding_window_view(data, size)[:rows].reshape(-1)
    return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(body.tobytes())])


def bench_send_batch(bootstrap: str, topic: str, size: int, seconds: float) -> tuple[float, int]:
    table = pa.table({"value": _values(250_000, size)})
    with Producer(bootstrap, compression="none", batch_size=1 << 20, max_in_flight=8) as producer:
        producer.send_batch(topic, table.slice(0, 1000), partition=0)
        producer.flush()
        sent = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            producer.send_batch(topic, table, partition=0)
            sent += table.num_rows
        producer.flush()
        elapsed = time.perf_counter() - start
    return sent / elapsed, sent


def bench_send(bootstrap: str, topic: str, seconds: float) -> float:
    value = bytes(range(100))
    with Producer(bootstrap, compression="none", linger_ms=5, batch_size=64 * 1024) as producer:
        sent = 0
        start = time.perf_counter()
        send = producer.send
        while time.perf_counter() - start < seconds:
            for _ in range(10_000):
                send(topic, value, partition=0)
            sent += 10_000
        producer.flush()
        elapsed = time.perf_counter() - start
    return sent / elapsed


def bench_poll(bootstrap: str, topic: str, expected: int) -> tuple[float, float]:
    with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_bytes=64 << 20,
                  max_partition_fetch_bytes=32 << 20) as consumer:
        consumer.assign([(topic, 0)])
        consumer.position(topic, 0)
        rows = nbytes = 0
        start = time.perf_counter()
        while rows < expected:
            for batch in consumer.poll_arrow(1.0):
                rows += batch.num_rows
                nbytes += batch.column("value").nbytes
        elapsed = time.perf_counter() - start
    return rows / elapsed, nbytes / MiB / elapsed


def bench_latency(bootstrap: str, topic: str, seconds: float, rate: int = 2000) -> list[float]:
    sent_at: dict[int, float] = {}
    latencies: list[float] = []
    done = threading.Event()

    def consume() -> None:
        with Consumer(bootstrap, fetch_max_wait_ms=100) as consumer:
            consumer.assign([(topic, 0)])
            consumer.seek_to_end()
            ready.set()
            while not done.is_set() or len(latencies) < len(sent_at):
                for batch in consumer.poll_arrow(0.2):
                    now = time.perf_counter()
                    for seq in batch.column("value").to_pylist():
                        started = sent_at.get(int(seq))
                        if started is not None:
                            latencies.append((now - started) * 1000)
                if done.is_set() and time.perf_counter() - stop_at > 5:
                    break

    ready = threading.Event()
    stop_at = float("inf")
    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    ready.wait(30)
    with Producer(bootstrap, linger_ms=0, compression="none") as producer:
        start = time.perf_counter()
        i = 0
        while time.perf_counter() - start < seconds:
            due = start + i / rate
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)  # pacing the load generator
            sent_at[i] = time.perf_counter()
            producer.send(topic, str(i).encode(), partition=0)
            i += 1
        producer.flush()
    stop_at = time.perf_counter()
    done.set()
    reader.join(timeout=15)
    return latencies


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--peers", action="store_true", help="also NATS JetStream and Redis Streams (bench/peers)")
    args = parser.parse_args(argv)
    root = Path(args.dir or tempfile.mkdtemp(prefix="client-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    raw_rps, log_rps, frame_per_record = storage_limit(root)
    cpu: dict[str, tuple[int, float, float]] = {}
    cluster = LocalCluster(root / "cluster", brokers=1)
    try:
        bootstrap = cluster.up(timeout_s=90)
        with Admin(bootstrap) as admin:
            for name in ("b100", "b1k", "s100", "lat"):
                admin.create_topic(name, config={"max.message.bytes": 64 << 20, "segment.bytes": 1 << 30})
        pid = cluster.nodes[0].pid
        meter = CpuMeter(pid)
        sb100, n100 = bench_send_batch(bootstrap, "b100", 100, args.seconds)
        cpu["send_batch"] = (n100, *meter.used())
        sb1k, n1k = bench_send_batch(bootstrap, "b1k", 1024, args.seconds / 2)
        meter = CpuMeter(pid)
        snd = bench_send(bootstrap, "s100", args.seconds)
        cpu["send"] = (int(snd * args.seconds), *meter.used())
        meter = CpuMeter(pid)
        p100, p100_mb = bench_poll(bootstrap, "b100", n100 + 1000)
        cpu["poll_arrow"] = (n100, *meter.used())
        p1k, p1k_mb = bench_poll(bootstrap, "b1k", n1k + 1000)
        lat = sorted(bench_latency(bootstrap, "lat", args.seconds / 2))
    finally:
        cluster.down()
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    p50 = statistics.median(lat) if lat else float("nan")
    p99 = lat[int(len(lat) * 0.99) - 1] if lat else float("nan")
    print(f"storage limit (same run, 100-byte records, {frame_per_record} frame bytes/record): raw disk "
          f"{raw_rps:,.0f} rec/s, PartitionLog append {log_rps:,.0f} rec/s")
    print(f"{'figure':<34} {'measured':>14} {'aim':>12} {'vs aim':>7} {'vs raw disk':>11} {'vs log':>7}")
    rows = [
        ("send_batch 100 B (rec/s)", sb100, AIMS["send_batch"]),
        ("send() 100 B (rec/s)", snd, AIMS["send"]),
        ("poll_arrow 100 B (rec/s)", p100, AIMS["poll_arrow"]),
    ]
    for name, value, aim in rows:
        print(f"{name:<34} {value:>14,.0f} {aim:>12,} {value / aim:>7.2f} {value / raw_rps:>11.2f} {value / log_rps:>7.2f}")
    print(f"{'send_batch 1 KiB (rec/s, MiB/s)':<34} {sb1k:>14,.0f} {sb1k * 1024 / MiB:>11.0f}M")
    print(f"{'poll_arrow 100 B (MiB/s of values)':<34} {p100_mb:>14,.0f}")
    print(f"{'poll_arrow 1 KiB (rec/s, MiB/s)':<34} {p1k:>14,.0f} {p1k_mb:>11.0f}M")
    for name, (records, client_s, broker_s) in cpu.items():
        print(f"{name + ' CPU cost':<34} client {client_s:5.1f} s + broker {broker_s:5.1f} s -> "
              f"{records / max(1e-9, client_s + broker_s):>12,.0f} rec per CPU-second "
              f"({records / max(1e-9, client_s):,.0f} client-only)")
    print(f"{'produce->consume latency (ms)':<34} p50 {p50:>6.2f}  p99 {p99:>6.2f}  (aim p99 < {AIMS['p99_ms']:.0f}; "
          f"{len(lat)} records at ~2,000/s; p99 vs aim {p99 / AIMS['p99_ms']:.2f})")
    # the figures as data (bench/report.py); with --peers, the peers on the same record sizes (issue 19)
    figures = {"send_batch": {100: sb100, 1024: sb1k}, "send": snd, "poll_arrow": {100: p100, 1024: p1k},
               "p50_ms": p50, "p99_ms": p99, "latency_ms": lat, "raw_disk": raw_rps, "partition_log": log_rps,
               "cpu": cpu, "aims": AIMS}
    if args.peers:
        from bench.peers import compare
        figures["peers"] = compare.client(figures, seconds=min(args.seconds, 3.0))
    return figures


if __name__ == "__main__":
    main()
