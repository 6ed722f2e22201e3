"""Compaction as a Spark job: ``python -m jobs.compact --topic T [--dry-run]``.

For big topics: Spark reads each partition's cleanable range through the ``spark-log``
source, in parallel, and decides what survives; the brokers rewrite their segments.

1. ``Admin.describe_compaction``: each partition's leader gives its log start ``S``, its
   cleaned offset ``C`` (everything below is compacted already) and its cleanable end ``E``
   (last stable offset, active segment, ``min.compaction.lag.ms``).
2. One batch read of every partition's ``[S, E)``, of the key columns and offsets only
   (the JVM source prunes columns down to the frames' buffers: values are never
   decompressed).  Spark computes, per partition and key, the latest offset and the number
   of records (its partial aggregation runs in each read task, so only one row per key and
   task is shuffled); those with the latest offset in the dirty range ``[C, E)`` are the
   **offset map**, Kafka's cleaner's first pass, done by Spark's tasks instead of a broker
   thread.
3. The map goes to every replica's broker, then to the leader, which publishes a plan
   ending at ``E`` (``Admin.offer_offset_map``).  Each replica rewrites its segments with it
   when the plan is committed, checking the map against its log record by record (a map
   that does not match is refused and the replica builds its own: nothing is lost on the
   job's say).  Given the same cleaned offset and tombstone horizon the result is exactly
   what the broker cleaner leaves, because both apply ``brokers/log/cleaner/plan.py``'s
   rules with the same map.
4. The job waits for every replica to apply the plan and checks the leader's count: the
   records it kept below ``E`` and the expired tombstones it removed (the plan's
   ``delete.retention.ms`` horizon: telling tombstones apart needs the values, which a real
   run does not read) together are exactly Spark's survivors, the latest record of each
   key plus every record without a key.

It reports, per partition, records and stored bytes before and after.  ``--dry-run`` stops
after step 2 and reports what a clean would keep (with the horizon a plan made now would
have: a dry run also reads which latest records are tombstones), changing nothing.  The
report says where the time went (``plan_seconds``, ``map_seconds``, ``offer_seconds``,
``rewrite_seconds``; the Spark session's start is not in it).  Exit code 0, or 1 with one
line (``compact: ...``) on an error.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from spark_log import Admin, ReplicaCompaction
from spark_log.compaction import record_keys
from spark_log.errors import SparkLogError, TopicNotCompactedError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["PartitionReport", "CompactionReport", "compact_topic", "main"]


@dataclass(frozen=True, slots=True)
class PartitionReport:
    """One partition: the range ``[log_start, end)`` cleaned, records and stored bytes in it
    before and after (``records_after``: Spark's count of survivors; ``broker_records_kept``:
    what the leader kept, -1 in a dry run)."""

    partition: int
    log_start: int
    cleaned_before: int
    end: int
    records_before: int
    records_after: int
    bytes_before: int
    bytes_after: int
    plan_offset: int
    tombstone_horizon_ms: int
    broker_records_kept: int


@dataclass(frozen=True, slots=True)
class CompactionReport:
    topic: str
    dry_run: bool
    partitions: list[PartitionReport]
    seconds: float
    # Where ``seconds`` went (none of it the Spark session's start, which comes before the job):
    map_seconds: float = 0.0  # Spark's pass: reading keys and offsets, the latest offset per key, to the driver
    apply_seconds: float = 0.0  # offering the maps, and waiting until every replica applied them
    plan_seconds: float = 0.0  # asking the leaders for each partition's range (describe)
    offer_seconds: float = 0.0  # of apply_seconds: sending the maps (the leader publishes its plan)
    rewrite_seconds: float = 0.0  # of apply_seconds: waiting for every replica's rewrite

    @property
    def records_before(self) -> int:
        return sum(p.records_before for p in self.partitions)

    @property
    def records_after(self) -> int:
        return sum(p.records_after for p in self.partitions)

    @property
    def bytes_before(self) -> int:
        return sum(p.bytes_before for p in self.partitions)

    @property
    def bytes_after(self) -> int:
        return sum(p.bytes_after for p in self.partitions)


def _read_ranges(spark: SparkSession, bootstrap: str | None, topic: str,
                 ranges: dict[int, tuple[int, int]], source: str) -> DataFrame:
    reader = spark.read.format(source).option("subscribe", topic)
    if bootstrap:
        reader = reader.option("bootstrap", bootstrap)
    starting = {topic: {str(p): start for p, (start, _) in ranges.items()}}
    ending = {topic: {str(p): end for p, (_, end) in ranges.items()}}
    return reader.option("startingOffsets", json.dumps(starting)).option("endingOffsets", json.dumps(ending)).load()


def _horizon_now(state: ReplicaCompaction, delete_retention_ms: int) -> int:
    """The tombstone horizon a plan made now would have (never below the last plan's)."""
    horizon = int(time.time() * 1000) - delete_retention_ms
    return max(horizon, state.plan.tombstone_horizon_ms) if state.plan is not None else horizon


def compact_topic(spark: SparkSession, topic: str, *, bootstrap: str | None = None, dry_run: bool = False,
                  timeout_s: float = 300.0, source: str = "spark-log") -> CompactionReport:
    """Compact ``topic`` (module docstring), reading through the data source ``source`` (a
    format name: the session's ``spark-log``, or an implementation's class).  Raises ``TopicNotCompactedError``,
    ``CompactionConflictError`` (another clean moved a cleaned offset meanwhile: run again),
    ``RequestTimeoutError`` (the replicas did not apply the plans within ``timeout_s``)."""
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    started = time.monotonic()
    with Admin(bootstrap) as admin:
        described = admin.describe_topic(topic, live=False)
        policy = described.config.get("cleanup.policy", "delete")
        if "compact" not in policy:
            raise TopicNotCompactedError(f"topic {topic!r} has cleanup.policy={policy}; set cleanup.policy=compact")
        retention_ms = int(described.config.get("delete.retention.ms", "86400000"))
        if described.kind == "bytes":
            keys, tombstone_column = ["key"], ""
        else:
            keys, tombstone_column = list(described.key_columns), described.config.get("tombstone.column", "")
        states = {p: found[0] for p, found in admin.describe_compaction(topic).items() if found}
        missing = sorted(set(described.partitions) - set(states))
        if missing:
            raise SparkLogError(f"the leaders of {topic} partitions {missing} could not be asked")
        ranges = {p: (s.log_start_offset, max(s.log_start_offset, s.cleanable_end)) for p, s in states.items()}
        cleaned = {p: max(s.cleaned_offset, s.log_start_offset) for p, s in states.items()}
        horizons = {p: _horizon_now(s, retention_ms) for p, s in states.items()}

        # One pass over the range, no cache and no window: per partition and key, the latest
        # offset, how many records the key has, and whether its latest record is a tombstone
        # (with its timestamp).  That table is both the offset map (keys whose latest offset is
        # in the dirty range) and, once the plan's tombstone horizon is known, the count of
        # survivors: every keyless record, and each key's latest unless it is a tombstone older
        # than the horizon.  Keys with nulls group together, as the broker cleaner's keys do.
        mapping = time.monotonic()
        frame = _read_ranges(spark, bootstrap, topic, ranges, source)
        aggregates = [F.max("offset").alias("latest"), F.count(F.lit(1)).alias("n")]
        if dry_run:  # which latest records are tombstones, and how old: the dry run's count applies the horizon
            tombstone: Column = (F.col("value").isNull() if described.kind == "bytes"
                                 else F.coalesce(F.col(tombstone_column), F.lit(False)) if tombstone_column
                                 else F.lit(False))
            aggregates += [F.max_by(tombstone, F.col("offset")).alias("latest_tombstone"),
                           F.max_by(F.unix_millis(F.col("timestamp")), F.col("offset")).alias("latest_ms")]
        per_key = frame.groupBy("partition", *keys).agg(*aggregates).toArrow().combine_chunks()
        keyed: Any = (pc.is_valid(per_key.column("key")) if described.kind == "bytes"
                      else pa.chunked_array([pa.array([True] * per_key.num_rows, pa.bool_())]))
        records_before = {p: _sum(per_key.filter(_in_partition(per_key, p)).column("n")) for p in ranges}
        offering = time.monotonic()

        plans: dict[int, tuple[int, int]] = {}  # partition -> (plan offset, tombstone horizon)
        if not dry_run:
            for p, (start, end) in sorted(ranges.items()):
                if end <= cleaned[p]:
                    continue
                dirty = pc.and_(keyed, pc.greater_equal(per_key.column("latest"), pa.scalar(cleaned[p], pa.int64())))
                table = _offset_map(per_key.filter(dirty), p, keys, described.kind, described.schema)
                plan = admin.offer_offset_map(topic, p, table, start=cleaned[p], end=end)
                plans[p] = (plan.offset, plan.tombstone_horizon_ms)
                horizons[p] = plan.tombstone_horizon_ms
        # Without the horizon (a real run reads no values): each key's latest record and every keyless one
        latest = {p: _survivors(per_key, keyed, p, None) for p in ranges}
        records_after = {p: _survivors(per_key, keyed, p, horizons[p]) for p in ranges} if dry_run else dict(latest)

        applying = time.monotonic()
        final = {p: [s] for p, s in states.items()}
        if plans:
            final = admin.wait_for_compaction(topic, sorted(plans), timeout_s=timeout_s)
        applied = time.monotonic()
        reports = []
        for p, (start, end) in sorted(ranges.items()):
            before = states[p]
            bytes_before = before.clean_bytes + before.dirty_bytes
            after_state = final[p][0] if final.get(p) else before
            kept = after_state.records_kept if p in plans else -1
            if p in plans:
                # Spark decided which record of each key survives; the leader also removed the
                # tombstones among them older than the plan's horizon (a real run reads keys and
                # offsets only, never the values that would tell tombstones apart): both together
                # must account for every latest record.
                removed = after_state.tombstones_removed
                if kept + removed != latest.get(p, 0):
                    raise SparkLogError(f"{topic}-{p}: the leader kept {kept} records below {end} and removed "
                                        f"{removed} expired tombstones, Spark decided {latest.get(p, 0)} survive")
                records_after[p] = kept
            bytes_after = after_state.clean_bytes if p in plans else bytes_before
            reports.append(PartitionReport(p, start, cleaned[p], end, records_before.get(p, 0),
                                           records_after.get(p, 0), bytes_before, bytes_after,
                                           plans.get(p, (-1, 0))[0], horizons[p], kept))
    return CompactionReport(topic, dry_run, reports, time.monotonic() - started, offering - mapping,
                            applied - offering, mapping - started, applying - offering, applied - applying)


def _in_partition(per_key: pa.Table, partition: int) -> Any:
    import pyarrow.compute as pc

    return pc.equal(per_key.column("partition"), pa.scalar(partition, per_key.schema.field("partition").type))


def _sum(column: Any) -> int:
    import pyarrow.compute as pc

    return int(pc.sum(column).as_py() or 0)


def _survivors(per_key: pa.Table, keyed: Any, partition: int, horizon_ms: int | None) -> int:
    """Records of ``partition`` a clean with tombstone horizon ``horizon_ms`` keeps: every
    keyless one, and each key's latest record unless it is a tombstone older than the horizon
    (``keyed``: a boolean column of ``per_key``, true where the row is a key's, not keyless).
    ``horizon_ms`` None: no tombstone removed (``per_key`` without tombstone columns)."""
    import pyarrow.compute as pc

    mine = _in_partition(per_key, partition)
    keyless = _sum(per_key.filter(pc.and_(mine, pc.invert(keyed))).column("n"))
    if horizon_ms is None:
        return keyless + _sum(pc.and_(mine, keyed).cast(pa.int64()))
    latest_tombstone: Any = per_key.column("latest_tombstone")
    tombstones: Any = pc.fill_null(latest_tombstone, False)
    expired = pc.fill_null(pc.and_(tombstones,
                                   pc.less(per_key.column("latest_ms"), pa.scalar(horizon_ms, pa.int64()))), False)
    return keyless + _sum(pc.and_(pc.and_(mine, keyed), pc.invert(expired)).cast(pa.int64()))


def _offset_map(maps: pa.Table, partition: int, keys: list[str], kind: str, schema: pa.Schema | None) -> pa.Table:
    """One partition's offset map as the brokers take it: ``key`` (the compaction key bytes,
    ``spark_log.compaction.record_keys``) and ``offset``."""
    import pyarrow.compute as pc

    rows = maps.filter(pc.equal(maps.column("partition"), pa.scalar(partition, maps.schema.field("partition").type)))
    encoded = record_keys(rows, kind=kind, key_columns=keys, schema=None if kind == "bytes" else schema)
    return pa.table({"key": encoded, "offset": rows.column("latest").cast(pa.int64())})


def _print(report: CompactionReport) -> None:
    verb = "would keep" if report.dry_run else "kept"
    for p in report.partitions:
        plan = f", plan at offset {p.plan_offset}" if p.plan_offset >= 0 else ""
        print(f"{report.topic}-{p.partition}: [{p.log_start}, {p.end}) records {p.records_before} -> {p.records_after}, "
              f"bytes {p.bytes_before} -> {p.bytes_after}{plan}")
    shrink = f"{report.bytes_before} -> {report.bytes_after} bytes" if not report.dry_run else \
        f"{report.bytes_before} bytes stored"
    print(f"COMPACTION {'DRY RUN' if report.dry_run else 'OK'}: {report.topic} {verb} {report.records_after} of "
          f"{report.records_before} records, {shrink}, in {report.seconds:.1f} s (describe {report.plan_seconds:.1f} s, "
          f"Spark's pass {report.map_seconds:.1f} s, maps offered {report.offer_seconds:.1f} s, the brokers' rewrite "
          f"{report.rewrite_seconds:.1f} s)", flush=True)


def main(argv: list[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """The command line; ``spark``: run on this session (left running) instead of a new local one."""
    parser = argparse.ArgumentParser(prog="python -m jobs.compact", description=__doc__.split("\n\n")[0])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--bootstrap", default=None, help="default: $SPARK_LOG_BOOTSTRAP or the local cluster")
    parser.add_argument("--dry-run", action="store_true", help="report what a clean would keep; change nothing")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--connector", choices=("python", "auto", "jvm"), default="python",
                        help="the spark-log source of a new local session: python (default), or the JVM one (auto: "
                             "when its jar was built), which reads only the key and offset columns' buffers")
    parser.add_argument("--timeout-s", type=float, default=300.0)
    parser.add_argument("--json", action="store_true", help="print the report as JSON too")
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    repo = str(Path(__file__).resolve().parents[1])  # Spark's Python workers import connectors from here
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p)
    from connectors.session import local_session

    session = spark if spark is not None else local_session(args.bootstrap, app_name=f"compact-{args.topic}",
                                                             connector=args.connector, master=args.master)
    try:
        report = compact_topic(session, args.topic, bootstrap=args.bootstrap, dry_run=args.dry_run,
                               timeout_s=args.timeout_s)
    except SparkLogError as exc:
        print(f"compact: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        if spark is None:
            session.stop()
    _print(report)
    if args.json:
        print(json.dumps({**asdict(report), "records_before": report.records_before,
                          "records_after": report.records_after}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
