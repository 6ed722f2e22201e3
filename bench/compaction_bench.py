"""Compaction benchmark: bytes cleaned per second, next to a raw read-and-rewrite of the same
bytes on the same disk, in the same run.

    python -m bench.compaction_bench [--dir DIR] [--mib 128] [--pairs 5] [--spark-mib 128] [--repeats 2]
                                     [--partitions 2] [--no-spark] [--no-in-process]

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
  segments, ``--partitions`` partitions): ``jobs.compact.compact_topic`` end to end (Spark
  reads the range through the ``spark-log`` source, builds the offset map, the broker
  rewrites), and the broker cleaner of that cluster on an identical topic
  (``Admin.compact(wait=True)``).  Spark's fixed costs are printed apart: the session's
  start and a job on an almost empty topic (once on the new session, once warm), then the
  session's first full-size job, apart (the JVM compiles the read and aggregate's hot loops
  during it: several CPU-seconds; ``--no-warm-job`` measures it among the runs).  The job's
  rate and ratio are of its wall time **without** the session's start (a session that runs
  jobs, as a notebook's); each run also prints its time and rate with the start added, and
  where the time went (describe, Spark's pass, maps offered, the brokers' rewrite), and the
  job's *ceiling*: the brokers' share of each run alone over its raw runs (what the job
  reaches if Spark's pass took no time, since every replica checks the job's map against
  its log record by record before it rewrites: nothing is removed on the job's say), and
  Spark's pass alone over the same raw runs (what the job reaches with instant brokers).

Pairs, not bests: every measured run sits between two raw runs over the same bytes (the
one before reads the segments, the one after a copy made before the clean), each cold:
files fsynced and the guest's page cache dropped (``/proc/sys/vm/drop_caches`` as root,
else ``posix_fadvise DONTNEED``).  On a virtual disk the host caches below the guest, so
the raw rate swings between runs; a run is compared with the mean of its own two raw runs,
and the medians and ranges of rates and ratios are printed.  In-process runs also print
the cleaner's CPU time and how long it waited for a CPU (``/proc/.../schedstat``), with
the ratio both sides would have without those waits: on a shared machine a CPU-bound
cleaner's wall time is mostly the wait.  A benchmark, never a test: it asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

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


_DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def drop_cache(paths: list[Path]) -> str:
    """Make the next read of ``paths`` cold, as far as the guest can: fsync them, then drop
    the whole page cache (root: ``/proc/sys/vm/drop_caches``), else the files' pages
    (``posix_fadvise DONTNEED``).  A cache below the guest (the host's, on a VM) stays;
    both sides of a pair get the same treatment.  Returns which way was used."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    try:
        os.sync()
        _DROP_CACHES.write_text("3\n")
        return "drop_caches"
    except OSError:
        return "fadvise"


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


def run_queue_s() -> float:
    """Seconds this thread has waited for a CPU while runnable (Linux schedstat; 0 elsewhere):
    on a shared machine a CPU-bound run's wall time is mostly this wait."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat", encoding="ascii") as handle:
            return int(handle.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def by_key(batches: list[pa.RecordBatch], partitions: int) -> list[list[pa.RecordBatch]]:
    """The history split by key over ``partitions`` (key number modulo ``partitions``, so
    every version of a key is in one partition and 90% of each partition's records are
    overwritten), in frames of ``FRAME_RECORDS`` records per partition."""
    if partitions == 1:
        return [batches]
    table = pa.Table.from_batches(batches)
    numbers = [int(key[4:]) % partitions for key in table.column("key").to_pylist() if isinstance(key, bytes)]
    owner = pa.array(numbers, pa.int64())
    return [table.filter(pc.equal(owner, pa.scalar(p, pa.int64()))).combine_chunks()
            .to_batches(max_chunksize=FRAME_RECORDS) for p in range(partitions)]


def raw_rewrite(sources: list[Path], target: Path) -> tuple[int, float, float]:
    """Read ``sources`` and write them to ``target`` (fsync), cold: ``(bytes, seconds, seconds
    of them this thread waited for a CPU)``."""
    drop_cache(sources)
    waited = run_queue_s()
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
    elapsed, waited = time.perf_counter() - started, run_queue_s() - waited
    target.unlink()
    return total, elapsed, waited


@dataclass
class Side:
    name: str
    bytes: int = 0
    seconds: float = float("inf")
    waited: float = 0.0  # of ``seconds``, waiting for a CPU (in-process runs; 0: not measured)
    kept: str = ""
    cpu_seconds: float = 0.0  # this process's CPU time (in-process runs)
    # of ``seconds``, what no faster Spark pass could take off (the Spark job: describe, the
    # maps offered, the replicas' check and rewrite); 0: not a Spark job
    brokers_seconds: float = 0.0

    @property
    def mib_s(self) -> float:
        return self.bytes / MiB / self.seconds if self.seconds else float("inf")

    @property
    def unwaited_mib_s(self) -> float:
        """The rate without the time spent waiting for a CPU."""
        busy = self.seconds - self.waited
        return self.bytes / MiB / busy if busy > 0 else float("inf")


@dataclass
class Pair:
    """One measured side bracketed by raw read-and-rewrites of the same bytes just before
    and just after it (cold each time): drift of the disk or the host's cache during the
    pair shows as a gap between the two raw rates, and the side is compared to their mean."""

    before: Side
    side: Side
    after: Side

    @property
    def raw_mib_s(self) -> float:
        return (self.before.mib_s + self.after.mib_s) / 2

    @property
    def ratio(self) -> float:
        return self.side.mib_s / self.raw_mib_s

    @property
    def unwaited_ratio(self) -> float:
        """Both sides without their waits for a CPU (schedstat): what the ratio is on a machine
        where the cleaner gets a core when it needs one."""
        return self.side.unwaited_mib_s / ((self.before.unwaited_mib_s + self.after.unwaited_mib_s) / 2)


def copy_files(paths: list[Path], directory: Path) -> list[Path]:
    """Byte-for-byte copies of ``paths`` (the raw run after a clean reads the bytes before it)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    copies = []
    for path in paths:
        shutil.copyfile(path, directory / path.name)
        copies.append(directory / path.name)
    return copies


def broker_cleaner_run(root: Path, frames: list[bytes]) -> Pair:
    """One in-process run: build the log, raw-rewrite its closed segments, clean it (cold),
    raw-rewrite a copy of the closed segments as they were before the clean."""
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
        copies = copy_files(closed, root / "copy")
        before = Side("raw", *raw_rewrite(closed, root / "raw.bin"))
        drop_cache(closed)
        throttle = Throttler(0, clock=SystemClock(), wait=lambda s: False)
        started, cpu, waited = time.perf_counter(), time.process_time(), run_queue_s()
        while partition.clean(SPEC, throttle=throttle, budget_bytes=1 << 30, stop=lambda: False) is not None:
            pass
        seconds, cpu, waited = time.perf_counter() - started, time.process_time() - cpu, run_queue_s() - waited
        after = Side("raw", *raw_rewrite(copies, root / "raw.bin"))
        shutil.rmtree(root / "copy", ignore_errors=True)
        status = partition.compaction_status()
        kept = f"{status.last.records_kept:,} of {status.last.records_read:,} records, " \
               f"{status.last.bytes_read / MiB:.0f} -> {status.last.bytes_written / MiB:.1f} MiB"
        return Pair(before, Side("broker cleaner, in process", stored, seconds, waited, kept, cpu), after)
    finally:
        partition.delete()


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def summary(pairs: list[Pair]) -> None:
    """Medians and spreads of a side's pairs: its rate, the raw rate around it, their ratio."""
    if not pairs:
        return
    side = pairs[0].side
    rates = [p.side.mib_s for p in pairs]
    raws = [r.mib_s for p in pairs for r in (p.before, p.after)]
    ratios = [p.ratio for p in pairs]
    print(f"  {side.name}: {side.bytes / MiB:.1f} MiB per run, {len(pairs)} runs; {side.kept}")
    print(f"    rate   median {median(rates):7.1f} MiB/s   (range {min(rates):.1f}-{max(rates):.1f})")
    print(f"    raw    median {median(raws):7.1f} MiB/s   (range {min(raws):.1f}-{max(raws):.1f}; read + fsynced "
          f"rewrite of the same bytes, just before and just after each run)")
    print(f"    ratio  median {median(ratios):7.0%}         (range {min(ratios):.0%}-{max(ratios):.0%}; "
          f"each run over the mean of its two raw runs)")
    if all(p.side.brokers_seconds for p in pairs):
        brokers = [p.side.bytes / MiB / p.side.brokers_seconds / p.raw_mib_s for p in pairs]
        spark = [p.side.bytes / MiB / (p.side.seconds - p.side.brokers_seconds) / p.raw_mib_s for p in pairs]
        print(f"    ceiling median {median(brokers):6.0%}         (range {min(brokers):.0%}-{max(brokers):.0%}; "
              f"the brokers' share of each run alone over its raw runs: describe, maps offered, every replica "
              f"checking the map record by record and rewriting; the job with an instant Spark pass)")
        print(f"    ceiling median {median(spark):6.0%}         (range {min(spark):.0%}-{max(spark):.0%}; "
              f"Spark's pass of each run alone over its raw runs: the job with instant brokers)")
    if any(p.side.cpu_seconds for p in pairs):
        cpu = median([p.side.cpu_seconds for p in pairs])
        print(f"    CPU    median {cpu:7.2f} s per run = {side.bytes / MiB / cpu:.0f} MiB/s of this process's CPU "
              f"(wall {median([p.side.seconds for p in pairs]):.2f} s, of which waiting for a CPU "
              f"{median([p.side.waited for p in pairs]):.2f} s)")
        unwaited = [p.unwaited_ratio for p in pairs]
        print(f"    ratio without the waits for a CPU (both sides): median {median(unwaited):.0%} "
              f"(range {min(unwaited):.0%}-{max(unwaited):.0%})")


def spark_run(root: Path, mib: int, repeats: int, partitions: int, warm_job: bool = True
              ) -> tuple[list[Pair], list[Pair]]:
    """The Spark job and the cluster's broker cleaner on identical topics of a 1-broker cluster;
    prints the fixed costs (session start, a job on an almost empty topic) first."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    repo = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p)
    from brokers.launcher.local import LocalCluster
    from connectors.session import jvm_available, local_session
    from jobs.compact import compact_topic
    from spark_log import Admin, Producer

    cluster = LocalCluster(root / "cluster", brokers=1, extra_config={"log_cleaner_backoff_ms": 200})
    bootstrap = cluster.up(timeout_s=120)
    started = time.perf_counter()
    spark = local_session(bootstrap, app_name="compaction-bench", master="local[2]",
                          conf={"spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false"})
    session_s = time.perf_counter() - started
    batches = history(mib)
    job_runs: list[Pair] = []
    broker_runs: list[Pair] = []
    config = {"cleanup.policy": "compact", "segment.bytes": 16 * MiB, "min.cleanable.dirty.ratio": 1.0}

    def produce(topic: str, frames: list[pa.RecordBatch]) -> None:
        with Producer(bootstrap, batch_size=FRAME_RECORDS * (RECORD_BYTES + 30), linger_ms=50,
                      delivery_timeout_ms=600_000) as producer:
            for p, batches_of_p in enumerate(by_key(frames, partitions)):
                for batch in [*batches_of_p, batches_of_p[0]]:  # the last one closes the segments written before
                    for future in producer.send_batch(topic, batch, partition=p):
                        future.result(timeout=300)

    try:
        with Admin(bootstrap) as admin:
            fixed = []
            for attempt in range(2):  # the first job also warms the session up (its JIT, the source's classes)
                topic = f"bench-tiny-{attempt}"
                admin.create_topic(topic, partitions=partitions, config=config)
                produce(topic, batches[:2])
                started = time.perf_counter()
                compact_topic(spark, topic, bootstrap=bootstrap)
                fixed.append(time.perf_counter() - started)
                admin.delete_topic(topic)
            print(f"  Spark fixed costs ({'JVM' if jvm_available(spark) else 'Python'} spark-log source, master "
                  f"local[2]): session start {session_s:.1f} s; a job on an almost empty topic {fixed[0]:.1f} s on a "
                  f"new session, {fixed[1]:.1f} s after it (the fixed cost per job: not taken off the rates below)")
            if warm_job:  # the first job of full size on the session pays the JVM's JIT of the read and aggregate
                topic = "bench-warm"
                admin.create_topic(topic, partitions=partitions, config=config)
                produce(topic, batches)
                started = time.perf_counter()
                done = compact_topic(spark, topic, bootstrap=bootstrap)
                print(f"  Spark's first full-size job on the session (JIT warm-up; not in the figures below): "
                      f"{time.perf_counter() - started:.1f} s, Spark's pass {done.map_seconds:.1f} s", flush=True)
                admin.delete_topic(topic)
            for repeat in range(repeats):
                topics = {kind: f"bench-{kind}-{repeat}" for kind in ("job", "broker")}
                for topic in topics.values():
                    admin.create_topic(topic, partitions=partitions, config=config)
                    produce(topic, batches)
                for kind, topic in topics.items():
                    closed = [log for p in range(partitions)
                              for log in sorted((cluster.node_dir(1) / f"{topic}-{p}").glob("*.log"))[:-1]]
                    copies = copy_files(closed, root / "copy")
                    before = Side("raw", *raw_rewrite(closed, root / "raw.bin"))
                    drop_cache(closed)
                    started = time.perf_counter()
                    if kind == "job":
                        done = compact_topic(spark, topic, bootstrap=bootstrap)
                        seconds = time.perf_counter() - started
                        print(f"    Spark job run {repeat}: {seconds:.1f} s without the session's start "
                              f"({seconds + session_s:.1f} s with it; {done.bytes_before / MiB / (seconds + session_s):.1f}"
                              f" MiB/s): describe {done.plan_seconds:.2f} s, Spark's pass (keys and offsets read, "
                              f"latest offset per key) {done.map_seconds:.2f} s, maps offered {done.offer_seconds:.2f} s,"
                              f" the brokers' rewrite {done.rewrite_seconds:.2f} s", flush=True)
                        side = Side(f"Spark job (1 broker, RF=1, {partitions} partition(s))", done.bytes_before, seconds,
                                    kept=f"{done.records_after:,} of {done.records_before:,} records",
                                    brokers_seconds=done.plan_seconds + done.apply_seconds)
                    else:
                        states = admin.compact(topic, wait=True, timeout_s=600)
                        seconds = time.perf_counter() - started
                        read = sum(s[0].bytes_read for s in states.values())
                        side = Side("broker cleaner via Admin.compact", read, seconds,
                                    kept=f"{sum(s[0].records_kept for s in states.values()):,} of "
                                    f"{sum(s[0].records_read for s in states.values()):,} records")
                    after = Side("raw", *raw_rewrite(copies, root / "raw.bin"))
                    (job_runs if kind == "job" else broker_runs).append(Pair(before, side, after))
                    admin.delete_topic(topic)
    finally:
        spark.stop()
        cluster.down(timeout_s=60)
    return job_runs, broker_runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compaction_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=".spark-log/bench", help="where to write (the disk under test)")
    parser.add_argument("--mib", type=int, default=128, help="MiB of records for the in-process broker cleaner")
    parser.add_argument("--pairs", type=int, default=5, help="in-process runs (each between two raw runs)")
    parser.add_argument("--spark-mib", type=int, default=128, help="MiB of records for the Spark job and the cluster")
    parser.add_argument("--repeats", type=int, default=2, help="Spark job and cluster runs (each between two raw runs)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the Spark job's and cluster's topics")
    parser.add_argument("--no-warm-job", action="store_true",
                        help="measure the session's first full-size job too (else it runs once unmeasured first)")
    parser.add_argument("--no-spark", action="store_true", help="only the in-process broker cleaner")
    parser.add_argument("--no-in-process", action="store_true", help="only the Spark job and the cluster's cleaner")
    args = parser.parse_args(argv)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="compaction-bench-", dir=args.dir))
    cold = drop_cache([])
    print(f"compaction bench: 100-byte values, 90% of the records overwritten, frames of {FRAME_RECORDS} records "
          f"(LZ4); cold reads ({cold}), fsynced writes, same disk ({args.dir}); load average {load()} at the start")
    try:
        if not args.no_in_process:
            frames = [encode_batch(b, compression="lz4") for b in history(args.mib)]
            summary([broker_cleaner_run(root, frames) for _ in range(args.pairs)])
        if not args.no_spark:
            job_runs, broker_runs = spark_run(root, args.spark_mib, args.repeats, args.partitions,
                                              warm_job=not args.no_warm_job)
            summary(job_runs)
            summary(broker_runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"  load average {load()} at the end")


if __name__ == "__main__":
    main()
