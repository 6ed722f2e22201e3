"""Compaction benchmark: bytes cleaned per second, next to a raw read-and-rewrite of the same
bytes on the same disk, in the same run.

    python -m bench.compaction_bench [--dir DIR] [--mib 128] [--spark-mib 32] [--repeats 2] [--no-spark]

The topic: 100-byte incompressible values (10-digit id + 90 random bytes, as the connector
bench) under 16-byte keys, each key written ten times in a shuffled order, so **90% of the
records are overwritten**; frames of 4,096 records, LZ4 (as producers write them).

- **broker cleaner** (in process, the broker's own code: ``Partition.clean`` with the
  pool's throttle, no I/O limit): a one-replica partition holding ``--mib`` MiB in 32 MiB
  segments (the active one small) is cleaned once: the plan (offset map of the dirty range)
  and its apply (every closed segment rewritten aside, fsynced, swapped in).  Rate = stored
  bytes below the plan's end / wall time.
- **raw read-and-rewrite** of the very same segment bytes: read them and write them to a
  new file on the same disk, fsync: what moving those bytes costs at best.
- **Spark job** (``--spark-mib`` MiB on a one-broker local cluster, RF=1, in 16 MiB
  segments): ``jobs.compact.compact_topic`` end to end (Spark reads the range through the
  ``spark-log`` source, builds the offset map, the broker rewrites), and the broker
  cleaner of that cluster on an identical topic (``Admin.compact(wait=True)``), each next
  to the raw read-and-rewrite of that topic's segment files on that broker's disk.

Both sides start cold: the files are fsynced and dropped from the page cache
(``posix_fadvise DONTNEED``) before each measurement; each side runs ``--repeats`` times
and its best run counts (on a shared machine the least disturbed one).  Ratios are the
cleaner's rate over the raw rate.  A benchmark, never a test: it asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from brokers.log.append import check_frames
from brokers.log.cleaner.records import KeySpec
from brokers.log.cleaner.throttle import Throttler
from brokers.partition import LeaderAndIsr, Partition
from spark_log.clock import SystemClock
from spark_log.config import TopicConfig
from spark_log.frame import encode_batch
from spark_log.schemas import BYTES_SCHEMA

MiB = 1024 * 1024
FRAME_RECORDS = 4096
RECORD_BYTES = 100
OVERWRITES = 10  # each key written ten times: 90% of the records are overwritten
SPEC = KeySpec("bytes", (), "", lambda schema_id: BYTES_SCHEMA if schema_id == 0 else None)


def drop_cache(paths: list[Path]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def history(mib: int, seed: int = 12) -> list[pa.RecordBatch]:
    """The topic's batches of ``FRAME_RECORDS`` records: about ``mib`` MiB of values."""
    rng = random.Random(seed)
    records = mib * MiB // RECORD_BYTES
    keys = records // OVERWRITES
    order = [i % keys for i in range(records)]
    rng.shuffle(order)
    noise = os.urandom(records * 90)
    now_ms = int(time.time() * 1000)  # recent: brokers expire producers whose records are a week old
    batches = []
    for start in range(0, records, FRAME_RECORDS):
        chunk = order[start: start + FRAME_RECORDS]
        values = [f"{start + i:010d}".encode() + noise[(start + i) * 90: (start + i + 1) * 90] for i in range(len(chunk))]
        batches.append(pa.record_batch([
            pa.array([f"key-{k:012d}".encode() for k in chunk], pa.binary()), pa.array(values, pa.binary()),
            pa.nulls(len(chunk), BYTES_SCHEMA.field("headers").type),
            pa.array([now_ms + start] * len(chunk), pa.int64()).cast(pa.timestamp("ms"))], schema=BYTES_SCHEMA))
    return batches


def raw_rewrite(sources: list[Path], target: Path) -> tuple[int, float]:
    """Read ``sources`` and write them to ``target`` (fsync): ``(bytes, seconds)``, cold."""
    drop_cache(sources)
    started = time.perf_counter()
    total = 0
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for source in sources:
            with open(source, "rb", buffering=0) as handle:
                while chunk := handle.read(8 * MiB):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view):]
                    total += len(chunk)
        os.fsync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - started
    target.unlink()
    return total, elapsed


@dataclass
class Side:
    name: str
    bytes: int = 0
    seconds: float = float("inf")
    kept: str = ""

    @property
    def mib_s(self) -> float:
        return self.bytes / MiB / self.seconds if self.seconds else float("inf")


def broker_cleaner_run(root: Path, frames: list[bytes]) -> tuple[Side, Side]:
    """One in-process run: build the log, raw-rewrite its closed segments, clean it."""
    directory = root / "p"
    shutil.rmtree(directory, ignore_errors=True)
    config = TopicConfig(segment_bytes=32 * MiB, cleanup_policy="compact", retention_ms=-1, max_message_bytes=64 * MiB)
    partition = Partition(topic="bench", partition=0, topic_id="bench", directory=directory, config=config,
                          broker_id=1, clock=SystemClock())
    partition.become(LeaderAndIsr(leader_id=1, leader_epoch=1, partition_epoch=1, replicas=(1,), isr=(1,)),
                     config=config)
    try:
        for frame in frames:
            partition.append_as_leader(check_frames(frame, max_message_bytes=64 * MiB))
        partition.append_as_leader(check_frames(frames[0], max_message_bytes=64 * MiB))  # rolls: the rest is closed
        closed = sorted(directory.glob("*.log"))[:-1]
        stored = sum(p.stat().st_size for p in closed)
        raw_bytes, raw_s = raw_rewrite(closed, root / "raw.bin")
        drop_cache(closed)
        throttle = Throttler(0, clock=SystemClock(), wait=lambda s: False)
        started = time.perf_counter()
        while partition.clean(SPEC, throttle=throttle, budget_bytes=1 << 30, stop=lambda: False) is not None:
            pass
        seconds = time.perf_counter() - started
        status = partition.compaction_status()
        kept = f"{status.last.records_kept:,} of {status.last.records_read:,} records, " \
               f"{status.last.bytes_read / MiB:.0f} -> {status.last.bytes_written / MiB:.1f} MiB"
        return Side("raw read+rewrite", raw_bytes, raw_s), Side("broker cleaner", stored, seconds, kept)
    finally:
        partition.delete()


def best(sides: list[Side]) -> Side:
    return min(sides, key=lambda s: s.seconds)


def report(rows: list[tuple[Side, Side]]) -> None:
    for raw, cleaner in rows:
        print(f"  {cleaner.name:<34} {cleaner.bytes / MiB:8.1f} MiB in {cleaner.seconds:6.2f} s = {cleaner.mib_s:7.1f} "
              f"MiB/s  vs raw {raw.mib_s:7.1f} MiB/s: {cleaner.mib_s / raw.mib_s:5.0%}   {cleaner.kept}")


def paired(runs: list[tuple[Side, Side]]) -> None:
    """Each in-process run's cleaner rate over the raw rate measured just before it, summarised.

    On a virtual disk the host caches below the guest (``fadvise DONTNEED`` drops only the
    guest's pages), so the raw rate of one run can be three times the next one's; the best
    raw run against the best cleaner run then says more about the host's cache than about the
    cleaner.  A ratio of each pair, measured back to back, and their median and spread, do not."""
    ratios = sorted(c.mib_s / r.mib_s for r, c in runs if r.seconds and c.seconds)
    if ratios:
        median = ratios[len(ratios) // 2] if len(ratios) % 2 else sum(ratios[len(ratios) // 2 - 1: len(ratios) // 2 + 1]) / 2
        raws = sorted(r.mib_s for r, _ in runs)
        print(f"  broker cleaner, paired with the raw run before it ({len(ratios)} pairs): median {median:.0%} of raw, "
              f"range {ratios[0]:.0%}-{ratios[-1]:.0%} (raw {raws[0]:.0f}-{raws[-1]:.0f} MiB/s)")


def spark_run(root: Path, mib: int, repeats: int) -> list[tuple[Side, Side]]:
    """The Spark job and the cluster's broker cleaner on identical topics of a 1-broker cluster."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    repo = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p)
    from brokers.launcher.local import LocalCluster
    from connectors.session import local_session
    from jobs.compact import compact_topic
    from spark_log import Admin, Producer

    cluster = LocalCluster(root / "cluster", brokers=1, extra_config={"log_cleaner_backoff_ms": 200})
    bootstrap = cluster.up(timeout_s=120)
    spark = local_session(bootstrap, app_name="compaction-bench", master="local[2]",
                          conf={"spark.sql.shuffle.partitions": "2"})
    batches = history(mib)
    job_runs: list[tuple[Side, Side]] = []
    broker_runs: list[tuple[Side, Side]] = []
    try:
        with Admin(bootstrap) as admin:
            for repeat in range(repeats):
                topics = {kind: f"bench-{kind}-{repeat}" for kind in ("job", "broker")}
                for topic in topics.values():
                    admin.create_topic(topic, config={"cleanup.policy": "compact", "segment.bytes": 16 * MiB,
                                                      "min.cleanable.dirty.ratio": 1.0})
                    with Producer(bootstrap, batch_size=FRAME_RECORDS * (RECORD_BYTES + 30), linger_ms=50,
                                  delivery_timeout_ms=600_000) as producer:
                        for batch in [*batches, batches[0]]:  # the last one closes the segments written before
                            for future in producer.send_batch(topic, batch, partition=0):
                                future.result(timeout=300)
                for kind, topic in topics.items():
                    directory = cluster.node_dir(1) / f"{topic}-0"
                    closed = sorted(directory.glob("*.log"))[:-1]
                    raw_bytes, raw_s = raw_rewrite(closed, root / "raw.bin")
                    drop_cache(closed)
                    started = time.perf_counter()
                    if kind == "job":
                        done = compact_topic(spark, topic, bootstrap=bootstrap)
                        seconds = time.perf_counter() - started
                        part = done.partitions[0]
                        side = Side("Spark job (1 broker, RF=1)", part.bytes_before, seconds,
                                    f"{part.records_after:,} of {part.records_before:,} records")
                        job_runs.append((Side("raw", raw_bytes, raw_s), side))
                    else:
                        states = admin.compact(topic, wait=True, timeout_s=600)[0]
                        seconds = time.perf_counter() - started
                        state = states[0]
                        side = Side("broker cleaner via Admin.compact", state.bytes_read, seconds,
                                    f"{state.records_kept:,} of {state.records_read:,} records")
                        broker_runs.append((Side("raw", raw_bytes, raw_s), side))
                    admin.delete_topic(topic)
    finally:
        spark.stop()
        cluster.down(timeout_s=60)
    pick = [(best([r for r, _ in runs]), best([s for _, s in runs])) for runs in (job_runs, broker_runs)]
    return pick


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compaction_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=".spark-log/bench", help="where to write (the disk under test)")
    parser.add_argument("--mib", type=int, default=128, help="MiB of records for the in-process broker cleaner")
    parser.add_argument("--spark-mib", type=int, default=32, help="MiB of records for the Spark job and the cluster")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=5, help="in-process runs whose paired ratios are summarised")
    parser.add_argument("--no-spark", action="store_true", help="only the in-process broker cleaner")
    args = parser.parse_args(argv)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="compaction-bench-", dir=args.dir))
    try:
        frames = [encode_batch(b, compression="lz4") for b in history(args.mib)]
        runs = [broker_cleaner_run(root, frames) for _ in range(max(args.repeats, args.pairs))]
        print(f"compaction bench: 100-byte values, 90% of the records overwritten, frames of {FRAME_RECORDS} "
              f"records (LZ4), best of {args.repeats}; cold reads, fsynced writes, same disk ({args.dir})")
        report([(best([r for r, _ in runs]), best([c for _, c in runs]))])
        paired(runs)
        if not args.no_spark:
            report(spark_run(root, args.spark_mib, args.repeats))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
