"""The tiering job: copy closed, committed segments of tiered topics into their Delta tables.

    python -m jobs.tier [--bootstrap HOST:PORT] [--topic T ...] [--once | --continuous]
                        [--interval-ms N] [--engine local|spark] [--max-offsets-per-round N]

For each topic with ``remote.storage.enable=true`` (all of them, or the ``--topic``\\ s), one
*round* does, per partition (the format and what a commit records: ``spark_log/tier.py``):

1. ``[start, end)`` to tier: ``start`` is where the Delta table's snapshot ends (its
   ``spark-log:<topic>:<p>:end`` application transaction; an empty tier starts at the
   brokers' log start), ``end`` the leader's ``tierable_end`` (closed segments below the last
   stable offset).  The records are read ``read_committed`` (aborted records and every
   control frame left out): through a ``Consumer`` (``--engine local``) or through the
   ``spark-log`` Spark source (``--engine spark``, ``SparkEngine``: Spark reads the
   partitions' ranges in parallel tasks, and each task writes its rows as data files itself;
   no row comes to the driver, only the files' names, sizes and statistics).
2. One Parquet data file per partition (the Spark engine: per task, each one contiguous
   offset range) is written under the table (crash point ``files-written``), the Delta add actions carry each file's min/max ``offset`` statistics
   (crash point ``before-commit``), and **one Delta commit** adds them together with the
   application transactions that say which ``[start, end)`` of each partition the table now
   holds.  A job killed before the commit leaves unreferenced files (nothing reads them;
   ``DeltaTable.vacuum`` removes them); killed after it, the next round starts at the new
   ends: no record is written twice or skipped.
3. Tier retention: ``retention.ms`` / ``retention.bytes`` govern the tier.  Rows past them
   are deleted from Delta (a commit that also moves the partition's ``start``), whole data
   files at a time (one file per partition and round), oldest first: by a file's newest
   record for ``retention.ms``, by tier + local bytes for ``retention.bytes``.
4. Only then are the brokers told (``Admin.commit_tiered``; crash points ``after-commit``
   before the first report and ``before-local-delete`` after the first partition's report),
   and only from then on may their local retention (``local.retention.*``) delete the
   segments below ``end``.  Tier retention (step 3) runs after this report (so that
   ``retention.bytes`` counts the local bytes past the new end only), and its new starts are
   reported too.  Each round first reports any partition whose Delta range is
   ahead of the brokers' (a job killed after its commit).

One job per topic at a time: a second job's Delta commit could add the same offsets (the
application transactions make a restarted job safe, not two concurrent ones).

Crash points (tests): ``SPARK_LOG_TIER_CRASH_AT=<point>`` kills the job's process group
with SIGKILL at that point, after appending the point's name to
``SPARK_LOG_TIER_CRASH_MARKER`` (fsynced).  Production never sets it.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from spark_log import Admin, Consumer
from spark_log.errors import TieringNotEnabledError, TierOffsetInvalidError
from spark_log.errors import InvalidConfigError, SparkLogError, TierStorageError, TierUnavailableError
from spark_log.tier import (TOPIC_ID_KEY, TierTable, end_app_id, is_object_store, start_app_id, storage_failure,
                            tier_filesystem, tier_schema, to_tier_batch)

__all__ = ["CRASH_POINTS", "RoundResult", "SparkEngine", "tier_topic", "tier_all", "tiered_topics", "main"]

CRASH_POINTS = ("files-written", "before-commit", "after-commit", "before-local-delete")

Reader = Callable[[str, dict[int, tuple[int, int]]], dict[int, list[pa.RecordBatch]]]


def reach(name: str) -> None:
    if os.environ.get("SPARK_LOG_TIER_CRASH_AT", "") != name:
        return
    marker = os.environ.get("SPARK_LOG_TIER_CRASH_MARKER", "")
    if marker:
        with open(marker, "a") as out:
            out.write(f"{name}\n")
            out.flush()
            os.fsync(out.fileno())
    os.killpg(os.getpgid(0), signal.SIGKILL)


@dataclass
class RoundResult:
    """What one round did for one topic."""

    topic: str
    tiered: dict[int, tuple[int, int]] = field(default_factory=dict)  # partition -> [start, end) added
    rows: int = 0
    delta_version: int | None = None
    retention_starts: dict[int, int] = field(default_factory=dict)    # partition -> new tier start
    reported: dict[int, tuple[int, int]] = field(default_factory=dict)  # partition -> [start, end) told


# --- reading the ranges --------------------------------------------------------------------------


def consumer_reader(bootstrap: str | None, *, timeout_s: float = 60.0) -> Reader:
    """Read ranges with one ``read_committed`` Consumer (bounded seeks)."""

    def read(topic: str, ranges: dict[int, tuple[int, int]]) -> dict[int, list[pa.RecordBatch]]:
        out: dict[int, list[pa.RecordBatch]] = {p: [] for p in ranges}
        with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="none") as consumer:
            consumer.assign([(topic, p) for p in ranges])
            for p, (start, end) in ranges.items():
                consumer.seek(topic, p, start, end=end)
            deadline = time.monotonic() + timeout_s
            while any(consumer.position(topic, p) < end for p, (_, end) in ranges.items()):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"tiering {topic}: the ranges {ranges} were not read within {timeout_s} s")
                for batch in consumer.poll_arrow(timeout=0.5):
                    out[int(batch.column("partition")[0].as_py())].append(batch)
        return out

    return read


_WRITTEN_TYPES: dict[str, pa.DataType] = {"path": pa.string(), "size": pa.int64(), "partition": pa.int32(),
                                           "rows": pa.int64(), "stats": pa.string()}
_WRITTEN = pa.schema(_WRITTEN_TYPES)   # what each Spark task of SparkEngine.write answers


class SparkEngine:
    """The job's Spark engine (``spark_reader``): the ``spark-log`` source reads the ranges in
    parallel tasks, and each task writes its rows as Parquet data files of the table itself
    (``write``): only the files' names, sizes and statistics come back to the driver, which
    commits them in one Delta transaction with the application transactions, as the local
    engine does.  The executors need the tier location (as every reader of the tier does).
    A task attempt that fails, or a job killed before the commit, leaves files no commit
    names (``DeltaTable.vacuum`` removes them); nothing reads them.  Called as a ``Reader``
    it brings the rows to the driver instead."""

    def __init__(self, spark: Any, bootstrap: str | None) -> None:
        self.spark = spark
        self.bootstrap = bootstrap

    def _frame(self, topic: str, ranges: dict[int, tuple[int, int]]) -> Any:
        starting = json.dumps({topic: {str(p): s for p, (s, _) in ranges.items()}})
        ending = json.dumps({topic: {str(p): e for p, (_, e) in ranges.items()}})
        reader = (self.spark.read.format("spark-log").option("assign", json.dumps({topic: sorted(ranges)}))
                  .option("startingOffsets", starting).option("endingOffsets", ending)
                  .option("isolationLevel", "read_committed"))
        if self.bootstrap:
            reader = reader.option("kafka.bootstrap.servers", self.bootstrap)
        admin = Admin(self.bootstrap)
        try:
            kind = admin.describe_topic(topic, live=False).kind
        finally:
            admin.close()
        if kind == "bytes":
            reader = reader.option("includeHeaders", "true")
        return reader.load()   # Spark's Kafka shape; to_tier_batch picks the tier's columns by name

    def __call__(self, topic: str, ranges: dict[int, tuple[int, int]]) -> dict[int, list[pa.RecordBatch]]:
        table = self._frame(topic, ranges).toArrow()
        out: dict[int, list[pa.RecordBatch]] = {p: [] for p in ranges}
        for p in ranges:
            part = table.filter(pc.equal(table.column("partition"), pa.scalar(p, table.schema.field("partition").type)))
            out[p] = part.combine_chunks().to_batches() if part.num_rows else []
        return out

    def write(self, topic: str, ranges: dict[int, tuple[int, int]], path: str,
              schema: pa.Schema) -> tuple[list[Any], int]:
        """The ranges' rows written by the Spark tasks as data files under ``path``: their
        Delta add actions (not committed) and the number of rows."""

        def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            from jobs.tier import _sorted_table, _write_file   # on the executor

            rows = [to_tier_batch(b, schema) for b in batches if b.num_rows]
            if not rows:
                return
            table = pa.Table.from_batches(rows, schema=schema)
            for p in sorted({int(v) for v in table.column("partition").to_pylist() if v is not None}):
                part = _sorted_table(table.filter(pc.equal(table.column("partition"), pa.scalar(p, pa.int32()))))
                relative, size, stats = _write_file(path, p, part)
                yield pa.RecordBatch.from_pydict({"path": [relative], "size": [size], "partition": [p],
                                                  "rows": [part.num_rows], "stats": [stats]}, schema=_WRITTEN)

        written = (self._frame(topic, ranges)
                   .mapInArrow(task, "path string, size long, partition int, rows long, stats string").collect())
        # (the schema's Arrow types must be exactly _WRITTEN's: Spark reads the vectors as declared)
        actions = [_add_action(r.path, r.size, r.partition, r.stats)
                   for r in sorted(written, key=lambda r: (r.partition, r.path))]
        return actions, sum(r.rows for r in written)


def spark_reader(spark: Any, bootstrap: str | None) -> SparkEngine:
    """The Spark engine (``SparkEngine``): tasks read the ranges with the ``spark-log`` source
    and write the table's data files; the driver commits."""
    return SparkEngine(spark, bootstrap)


# --- writing Delta ---------------------------------------------------------------------------


def _stats(table: pa.Table) -> str:
    offsets = table.column("offset")
    stamps = table.column("timestamp").cast(pa.int64())
    low, high = pc.min_max(offsets).values()
    t_low, t_high = pc.min_max(stamps).values()

    def iso(us: Any) -> Any:
        value = us.as_py()
        if value is None:
            return None
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(value // 1_000_000)) + f".{value % 1_000_000:06d}"

    mins: dict[str, Any] = {"offset": low.as_py()}
    maxs: dict[str, Any] = {"offset": high.as_py()}
    if iso(t_low) is not None:
        mins["timestamp"], maxs["timestamp"] = iso(t_low), iso(t_high)
    return json.dumps({"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs,
                       "nullCount": {"offset": 0}})


def _sorted_table(table: pa.Table) -> pa.Table:
    return table.take(pc.sort_indices(table.column("offset")))


def _write_file(path: str, p: int, table: pa.Table, filesystem: Any = None) -> tuple[str, int, str]:
    """One Parquet data file of partition ``p`` under the table at ``path`` (``table``: tier
    rows in offset order), fsynced under a temporary name and then renamed (an object store,
    ``filesystem`` rooted at the table: one PUT, atomic): its path relative to the table, its
    size and its Delta statistics."""
    relative = f"partition={p}/part-{uuid.uuid4().hex}.parquet"
    if filesystem is not None:
        pq.write_table(table.drop_columns(["partition"]), relative, filesystem=filesystem)
        return relative, int(filesystem.get_file_info(relative).size), _stats(table.select(["offset", "timestamp"]))
    full = os.path.join(path, relative)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    pq.write_table(table.drop_columns(["partition"]), full + ".tmp")
    with open(full + ".tmp", "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(full + ".tmp", full)
    return relative, os.path.getsize(full), _stats(table.select(["offset", "timestamp"]))


def _add_action(relative: str, size: int, p: int, stats: str) -> Any:
    from deltalake.transaction import AddAction

    return AddAction(relative, size, {"partition": str(p)}, int(time.time() * 1000), True, stats)


def _write_files(path: str, topic: str, schema: pa.Schema, batches: dict[int, list[pa.RecordBatch]],
                 storage_options: dict[str, str] | None = None) -> list[Any]:
    """One Parquet file per partition (rows in offset order); their Delta add actions."""
    filesystem = tier_filesystem(path, storage_options)
    actions = []
    for p, parts in sorted(batches.items()):
        rows = [to_tier_batch(b, schema) for b in parts if b.num_rows]
        if not rows:
            continue
        relative, size, stats = _write_file(path, p, _sorted_table(pa.Table.from_batches(rows, schema=schema)),
                                            filesystem)
        actions.append(_add_action(relative, size, p, stats))
    return actions


def _open_table(path: str, schema: pa.Schema, topic_id: str, storage_options: dict[str, str] | None = None) -> Any:
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(path, storage_options=storage_options):
        DeltaTable.create(path, schema, mode="ignore", partition_by=["partition"],
                          configuration={"delta.appendOnly": "false", TOPIC_ID_KEY: topic_id},
                          raise_if_key_not_exists=False, storage_options=storage_options)
    table = DeltaTable(path, storage_options=storage_options)
    have = {f.name for f in table.schema().fields}
    added = [f for f in schema if f.name not in have]
    if added:   # the topic's schema evolved (nullable columns at the end): the table follows
        from deltalake.schema import Field as DeltaField

        table.alter.add_columns([DeltaField.from_arrow(f) for f in added])
        table = DeltaTable(path, storage_options=storage_options)
    return table


def _commit_properties(txns: dict[str, int], note: dict[str, Any]) -> Any:
    from deltalake import CommitProperties, Transaction

    return CommitProperties(app_transactions=[Transaction(app_id=a, version=v) for a, v in sorted(txns.items())],
                            custom_metadata={"spark-log": json.dumps(note, sort_keys=True)})


# --- one round -----------------------------------------------------------------------------------


def tiered_topics(admin: Admin) -> list[str]:
    out = []
    for name in admin.list_topics():
        config = admin.describe_topic(name, live=False).config
        if str(config.get("remote.storage.enable", "false")).lower() == "true":
            out.append(name)
    return sorted(out)


def tier_topic(admin: Admin, topic: str, *, reader: Reader, now_ms: int | None = None,
               max_records_per_partition: int | None = None) -> RoundResult:
    """One round for ``topic`` (module docstring).  Raises ``TieringNotEnabledError``,
    ``TierStorageError`` (the tier's storage failed: bounded, never a hang)."""
    description = admin.describe_topic(topic, live=False)
    config = description.config
    if str(config.get("remote.storage.enable", "false")).lower() != "true":
        raise TieringNotEnabledError(f"topic {topic!r} is not tiered: set remote.storage.enable=true")
    tiers = admin.describe_tier(topic)
    if isinstance(reader, SparkEngine) and is_object_store(tiers.location):
        raise InvalidConfigError(f"the Spark engine writes the tier's data files from its tasks to local or mounted "
                                 f"paths only; tier {topic!r} to {tiers.location} with --engine local")
    table = TierTable(tiers.location, topic, description.topic_id, tiers.storage_options)
    infos = {p: info for (t, p), info in tiers.partitions.items() if t == topic}
    try:
        return _tier_topic(admin, topic, description, config, table, infos, reader=reader, now_ms=now_ms,
                           max_records_per_partition=max_records_per_partition)
    except OSError as exc:   # deltalake's and pyarrow's storage errors (bounded timeouts and retries)
        raise storage_failure(table.path, f"tiering {topic}", exc) from None


def _tier_topic(admin: Admin, topic: str, description: Any, config: dict[str, str], table: TierTable,
                infos: dict[int, Any], *, reader: Reader, now_ms: int | None,
                max_records_per_partition: int | None) -> RoundResult:
    result = RoundResult(topic)
    try:
        held = {p: table.range(p) for p in infos}
    except TierStorageError:
        raise
    except TierUnavailableError as exc:   # a table of an earlier topic of the same name
        raise TierOffsetInvalidError(str(exc)) from None

    # a job killed after its Delta commit: tell the brokers first
    for p, info in sorted(infos.items()):
        h = held[p]
        if not h.empty and (h.end, h.start) != (info.tiered_end, info.tier_start):
            admin.commit_tiered(topic, p, start=h.start, end=h.end)
            result.reported[p] = (h.start, h.end)

    ranges: dict[int, tuple[int, int]] = {}
    starts: dict[int, int] = {}
    for p, info in sorted(infos.items()):
        h = held[p]
        start = info.log_start_offset if h.empty else h.end
        if not h.empty and h.end < info.log_start_offset:
            raise TierOffsetInvalidError(
                f"{topic}-{p}: the tier ends at {h.end} but the brokers' log starts at {info.log_start_offset}: records "
                f"in between are in neither (deleted before they were tiered)")
        end = info.tierable_end
        if max_records_per_partition is not None:
            end = min(end, start + max_records_per_partition)
        if end > start:
            ranges[p] = (start, end)
            starts[p] = info.log_start_offset if h.empty else h.start
    if ranges:
        schema = tier_schema(description.kind, description.schema if description.kind == "typed" else None)
        delta = _open_table(table.path, schema, description.topic_id, table.storage_options)
        if isinstance(reader, SparkEngine):   # the tasks write the data files; only their names come back
            actions, result.rows = reader.write(topic, ranges, table.path, schema)
        else:
            batches = reader(topic, ranges)
            actions = _write_files(table.path, topic, schema, batches, table.storage_options)
            result.rows = sum(b.num_rows for parts in batches.values() for b in parts)
        reach("files-written")
        txns: dict[str, int] = {}
        for p, (start, end) in ranges.items():
            txns[end_app_id(topic, p)] = end
            txns[start_app_id(topic, p)] = starts[p]
        reach("before-commit")
        delta.create_write_transaction(actions, mode="append", schema=delta.schema(), partition_by=["partition"],
                                       commit_properties=_commit_properties(txns, {
                                           "topic": topic, "ranges": {str(p): r for p, r in ranges.items()}}))
        delta.update_incremental()
        result.delta_version = delta.version()
        result.tiered = dict(ranges)
        reach("after-commit")
    table.load(refresh=True)
    first = True
    for p in sorted(ranges):
        h = table.range(p, refresh=False)
        admin.commit_tiered(topic, p, start=h.start, end=h.end)
        result.reported[p] = (h.start, h.end)
        if first:
            first = False
            reach("before-local-delete")
    if ranges:   # the brokers' untiered bytes as of the new ends (retention.bytes counts tier + untiered)
        infos = {p: info for (t, p), info in admin.describe_tier(topic).partitions.items() if t == topic}
    result.retention_starts = _tier_retention(table, topic, config, infos, now_ms=now_ms)
    table.load(refresh=True)
    for p in sorted(result.retention_starts):
        h = table.range(p, refresh=False)
        admin.commit_tiered(topic, p, start=h.start, end=h.end)
        result.reported[p] = (h.start, h.end)
    return result


def _tier_retention(table: TierTable, topic: str, config: dict[str, str], infos: dict[int, Any], *,
                    now_ms: int | None) -> dict[int, int]:
    """``retention.ms`` / ``retention.bytes`` over the tier: per partition, the new start
    (rows below it deleted in one Delta commit that moves the starts).  A compact-only
    topic keeps its tier (as its log, it has no time or size retention)."""
    if "delete" not in str(config.get("cleanup.policy", "delete")):
        return {}
    retention_ms = int(config.get("retention.ms", "-1"))
    retention_bytes = int(config.get("retention.bytes", "-1"))
    if retention_ms < 0 and retention_bytes < 0:
        return {}
    delta = table.load(refresh=True)
    if delta is None:
        return {}
    now = int(time.time() * 1000) if now_ms is None else now_ms
    files = pa.table(delta.get_add_actions(flatten=True)).to_pydict()
    new_starts: dict[int, int] = {}
    for p in infos:
        held = table.range(p, refresh=False)
        if held.empty:
            continue
        mine = sorted((int(files["max.offset"][i]), int(files["size_bytes"][i]), files["max.timestamp"][i])
                      for i in range(len(files["path"])) if str(files["partition.partition"][i]) == str(p))
        start = held.start
        if retention_ms >= 0:   # whole files past retention.ms (by their newest record), oldest first
            for max_offset, _, newest in mine:
                stamp = _ms(newest)
                if stamp is None or now - stamp <= retention_ms:
                    break
                start = max(start, max_offset + 1)
        if retention_bytes >= 0:  # the tier and the local log together within retention.bytes
            total = sum(size for max_offset, size, _ in mine if max_offset >= start) + infos[p].untiered_bytes
            for max_offset, size, _ in mine:
                if max_offset < start:
                    continue
                if total <= retention_bytes:
                    break
                total -= size
                start = max_offset + 1
        start = min(start, held.end)
        if start > held.start:
            new_starts[p] = start
    if new_starts:
        predicate = " OR ".join(f'("partition" = {p} AND "offset" < {s})' for p, s in sorted(new_starts.items()))
        delta.delete(predicate, commit_properties=_commit_properties(
            {start_app_id(topic, p): s for p, s in new_starts.items()} |
            {end_app_id(topic, p): table.range(p, refresh=False).end for p in new_starts},
            {"topic": topic, "retention_starts": {str(p): s for p, s in new_starts.items()}}))
    return new_starts


def _ms(value: Any) -> int | None:
    if value is None:
        return None
    if hasattr(value, "timestamp"):
        import calendar

        return int(calendar.timegm(value.timetuple()) * 1000 + value.microsecond // 1000)
    return int(value) // 1000


def tier_all(admin: Admin, topics: Iterable[str] | None, *, reader: Reader,
             max_records_per_partition: int | None = None) -> list[RoundResult]:
    names = list(topics) if topics else tiered_topics(admin)
    return [tier_topic(admin, name, reader=reader, max_records_per_partition=max_records_per_partition)
            for name in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.tier", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--topic", action="append", default=[])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="one round, then exit (the default)")
    mode.add_argument("--continuous", action="store_true", help="a round every --interval-ms until stopped")
    parser.add_argument("--interval-ms", type=int, default=10_000)
    parser.add_argument("--engine", choices=("local", "spark"), default="local")
    parser.add_argument("--max-offsets-per-round", type=int, default=2_000_000,
                        help="per partition and round (bounds a round: the local engine holds its rows)")
    args = parser.parse_args(argv)
    spark = None
    reader: Reader
    if args.engine == "spark":
        from connectors.session import local_session

        spark = local_session()
        reader = spark_reader(spark, args.bootstrap)
    else:
        reader = consumer_reader(args.bootstrap)
    admin = Admin(args.bootstrap)
    stop: dict[str, bool] = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        while True:
            try:
                rounds = tier_all(admin, args.topic, reader=reader, max_records_per_partition=args.max_offsets_per_round)
            except (SparkLogError, TimeoutError) as exc:
                if not args.continuous or (isinstance(exc, SparkLogError) and not exc.retriable):
                    raise
                print(f"round failed, retried at the next one: {exc}", file=sys.stderr, flush=True)
                rounds = []
            for done in rounds:
                spans = ", ".join(f"{p}: [{s}, {e})" for p, (s, e) in sorted(done.tiered.items())) or "nothing new"
                print(f"tiered {done.topic}: {done.rows} rows ({spans}); delta version {done.delta_version}",
                      flush=True)
            if not args.continuous or _stopped(stop):
                return 0
            deadline = time.monotonic() + args.interval_ms / 1000
            while time.monotonic() < deadline and not _stopped(stop):
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))  # the round's pacing, not synchronisation
    finally:
        admin.close()
        if spark is not None:
            spark.stop()


def _stopped(flag: dict[str, bool]) -> bool:
    return flag["now"]


if __name__ == "__main__":
    sys.exit(main())
