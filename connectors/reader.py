"""The readers of the ``spark-log`` source: streaming (micro-batch) and batch.

Where things run
----------------
- ``SparkLogStreamReader``'s offset methods (``initialOffset``, ``latestOffset``,
  ``reportLatestOffset``, ``prepareForTriggerAvailableNow``, ``partitions``,
  ``commit``) run in one long-lived Python process on the driver; it keeps an
  ``Admin`` client, opened lazily and closed by ``stop``.
- ``read(partition)`` runs on executors.  It is static and stateless: it uses only the
  picklable plan and the ``RangePartition`` it is given, opens its own ``Consumer``,
  and yields ``pyarrow.RecordBatch``\\ es shaped exactly as the source's schema, with
  no per-row Python.
- Readers and partitions pickle; clients never travel (``__getstate__`` drops them).

Offsets and replay
------------------
Offsets are ``{topic: {partition: next_offset}}`` (``connectors.offsets``).
``partitions(start, end)`` is a pure function of its arguments and the plan, and a
range ``[start, end)`` always yields the records with those offsets, so a micro-batch
that Spark replays from its offset log reads exactly the same records.
``latestOffset(start, limit)`` honours ``ReadMaxRows`` (``maxOffsetsPerTrigger``) and
``ReadMaxBytes`` (``maxBytesPerTrigger``, soft: it uses each partition's average stored
record size); ``ReadAllAvailable`` ignores both, as the contract requires.  New
partitions and, with ``subscribePattern``, new topics are picked up at the next trigger
and read from offset 0.

Consumer groups
---------------
With ``groupId`` the driver commits the end offsets of every completed micro-batch to
that group, as a group without members (``connectors.group_progress``: at every
``latestOffset`` call, whose ``start`` is the end of the last completed batch, and in
``commit``), so lag tools see the query; the checkpoint stays its only source of truth.
``startingOffsets=group`` starts a query without a checkpoint at the group's committed
offsets (``offsets.from_group``: clamped to the log; none: the earliest offset).

Data loss
---------
With ``failOnDataLoss=true`` (default) a query fails with ``OffsetOutOfRangeError`` when
records it must read were deleted (retention) or a partition it read vanished or
shrank; with ``false`` it skips what is gone and goes on.  Offsets a compacted topic no
longer holds (records compaction removed, control frames) are not data loss: a range
yields the records it still holds and ends at its end offset all the same.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, Filter, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from spark_log.errors import InvalidConfigError, OffsetOutOfRangeError, SchemaMismatchError, UnknownTopicOrPartitionError

from . import client
from . import offsets as off
from .filters import PushedFilters, push_filters
from .group_progress import GroupProgress
from .plan import RangePartition, ReadPlan

if TYPE_CHECKING:
    from spark_log import Admin

__all__ = ["fetch_projection", "read_range", "SparkLogStreamReader", "SparkLogBatchReader", "SparkLogFilteringBatchReader"]


def fetch_projection(plan: ReadPlan) -> list[str] | None:
    """The columns the brokers should project, or None to fetch the stored frames whole.

    A projection makes the broker decode every frame, select and re-encode it; whole
    frames travel as stored and decode zero-copy here (about twice as fast for a bytes
    topic read in full).  So the projection is pushed only when it leaves out a data
    column: on bytes topics when ``value`` is not read (``headers`` and ``key`` alone
    are small), on typed topics when a column of the topic's schema is not read.
    Either way the batches handed to Spark are the same (``to_spark_batch`` selects by
    name).
    """
    columns = list(plan.fetch_columns)
    if plan.kind == "bytes":
        return None if "value" in columns else columns
    if plan.topic_schema is not None and set(plan.topic_schema.names) <= set(columns):
        return None
    return columns


# Batches handed to Spark hold at least this many rows (or bytes) unless the range ends
# first: each Arrow batch costs Spark a fixed overhead, which makes 5k-row batches (the
# frames the Spark sink writes) ~30% slower than 20k-row ones through the Python Data
# Source path.  Smaller fetched frames are concatenated (one copy).
COALESCE_ROWS = 16_384
COALESCE_BYTES = 8 << 20


def read_range(plan: ReadPlan, part: RangePartition, pushed: PushedFilters | None = None) -> Iterator[pa.RecordBatch]:
    """Batches of ``part`` shaped to ``plan.schema`` (the body of both readers' ``read``),
    in offset order, fetched frames smaller than ``COALESCE_ROWS`` concatenated."""
    from .schema_mapping import spark_arrow_schema, to_spark_batch

    target = spark_arrow_schema(plan.schema)
    timestamp_type = part.timestamp_type
    if timestamp_type is None:
        timestamp_type = plan.timestamp_types.get(part.topic, 0)
    pending: list[pa.RecordBatch] = []
    rows = size = 0

    def joined() -> pa.RecordBatch:
        if len(pending) == 1:
            return pending[0]
        # pa.concat_batches is public since pyarrow 19; pyarrow-stubs 20 does not export it
        batch: pa.RecordBatch = pa.concat_batches(pending)  # type: ignore[attr-defined]
        return batch

    for batch in client.read_range(
        plan.options,
        off.OffsetRange(part.topic, part.partition, part.start, part.end),
        columns=fetch_projection(plan),
        row_filter=pushed.row_filter if pushed is not None else None,
    ):
        if batch.num_rows:
            pending.append(to_spark_batch(batch, target, timestamp_type=timestamp_type))
            rows, size = rows + batch.num_rows, size + pending[-1].nbytes
            if rows >= COALESCE_ROWS or size >= COALESCE_BYTES:
                yield joined()
                pending, rows, size = [], 0, 0
    if pending:
        yield joined()


class _DriverSide:
    """The driver's lazily opened ``Admin`` and topic discovery, shared by both readers."""

    def __init__(self, plan: ReadPlan) -> None:
        self.plan = plan
        self._admin: Admin | None = None
        # the topics admitted so far and their timestamp types (the plan's copy is the
        # executors' too, so it is never updated: ranges carry what they need)
        self.timestamp_types = dict(plan.timestamp_types)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_admin"] = None
        return state

    @property
    def admin(self) -> Admin:
        if self._admin is None:
            self._admin = client.open_admin(self.plan.options)
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            admin, self._admin = self._admin, None
            admin.close()

    def topics(self) -> list[str]:
        """The topics read now: the assigned ones, else those that exist and are subscribed
        or match ``subscribePattern`` (a deleted subscribed topic drops out: data loss,
        which ``failOnDataLoss`` decides; one created later is read from offset 0)."""
        o = self.plan.options
        if o.assign is not None:
            return sorted({tp.topic for tp in o.assign})
        found = sorted(t for t in client.list_topics(self.admin) if self.plan.matches(t))
        return [t for t in found if t in self.timestamp_types or self._check_kind(t)]

    def _check_kind(self, topic: str) -> bool:
        """Admit a newly matched topic (False: a typed topic without a schema yet, which
        holds nothing; it is looked at again next time)."""
        info = client.describe(self.admin, topic)
        if info.kind == "typed" and info.schema is None:
            return False
        if info.kind != self.plan.kind or (info.kind == "typed" and info.schema != self.plan.topic_schema):
            option = "subscribe" if self.plan.options.subscribe is not None else "subscribePattern"
            raise SchemaMismatchError(
                f"topic '{topic}' is read through '{option}' but its schema differs from the query's "
                f"({info.kind} topic); a query reads topics of one schema"
            )
        self.timestamp_types[topic] = info.timestamp_type
        return True

    def ranges(self, ranges: list[off.OffsetRange]) -> list[InputPartition]:
        """``ranges`` as Spark tasks, each with its topic's timestamp type."""
        return [RangePartition(r.topic, r.partition, r.start, r.end, self._timestamp_type(r.topic)) for r in ranges]

    def _timestamp_type(self, topic: str) -> int:
        if topic not in self.timestamp_types:  # planned before this driver admitted it (a replay)
            try:
                self.timestamp_types[topic] = client.describe(self.admin, topic).timestamp_type
            except UnknownTopicOrPartitionError:
                return 0  # deleted: nothing of it is read
        return self.timestamp_types[topic]

    def latest(self) -> off.Offsets:
        return self._offsets("latest")

    def earliest(self) -> off.Offsets:
        return self._offsets("earliest")

    def _offsets(self, spec: str | int) -> off.Offsets:
        o = self.plan.options
        out: off.Offsets = {}
        for attempt in range(3):
            try:
                found = client.list_offsets_for_topics(self.admin, self.topics(), spec, o.isolation_level)
                break
            except UnknownTopicOrPartitionError:
                if o.assign is not None or attempt == 2:
                    raise
                # a topic deleted between listing the topics and asking for its offsets: list again
        for tp, offset in found.items():
            if o.assign is None or tp in o.assign:
                out[tp] = offset
        if o.assign is not None:
            missing = sorted(set(o.assign) - set(out))
            if missing:
                raise InvalidConfigError(f"option 'assign' names partitions that do not exist: {missing}", key="assign")
        return out

    def starting(self, default: str) -> off.Offsets:
        o = self.plan.options
        latest = self.latest()
        if o.starting_timestamp is not None:
            found = self._offsets(o.starting_timestamp)
            return {tp: found.get(tp, latest[tp]) for tp in latest}
        spec = o.starting_offsets if o.starting_offsets is not None else default
        if spec == "group":
            assert o.group_id is not None  # ReaderOptions.parse requires it
            progress = GroupProgress(o.group_id, o.bootstrap, security=o.security, client_id=o.client_id)
            try:
                return off.from_group(progress.committed(), self.earliest(), latest)
            finally:
                progress.close()
        return off.resolve(spec, self.earliest(), latest, option="startingOffsets")


class SparkLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader of topics (see the module docstring for the contract)."""

    def __init__(self, plan: ReadPlan) -> None:
        plan.options.check_streaming()
        self._plan = plan
        self._driver = _DriverSide(plan)
        self._target: off.Offsets | None = None
        self._last_latest: off.Offsets | None = None
        self._record_bytes: dict[off.TopicPartition, float] = {}  # sampled once per partition
        o = plan.options
        self._progress = GroupProgress(o.group_id, o.bootstrap, security=o.security, client_id=o.client_id) if o.group_id is not None else None

    def initialOffset(self) -> off.JsonOffsets:
        return off.to_json(self._driver.starting("latest"))

    def getDefaultReadLimit(self) -> ReadLimit:
        o = self._plan.options
        if o.max_offsets_per_trigger is not None:
            return ReadMaxRows(o.max_offsets_per_trigger)
        if o.max_bytes_per_trigger is not None:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._driver.latest()

    def latestOffset(self, start: off.JsonOffsets, limit: ReadLimit) -> off.JsonOffsets:
        begin = off.from_json(start)
        if self._progress is not None:  # ``start`` ends the last completed micro-batch
            self._progress.publish(begin)
        latest = self._target if self._target is not None else self._driver.latest()
        self._last_latest = latest
        latest = self._check_loss(begin, latest)
        o = self._plan.options
        end = dict(latest)
        if not isinstance(limit, ReadAllAvailable):
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else o.max_offsets_per_trigger
            max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else o.max_bytes_per_trigger
            if max_rows is not None:
                end = off.limit_rows(begin, end, max_rows)
            if max_bytes is not None:
                unknown = {tp: v for tp, v in end.items() if tp not in self._record_bytes}
                self._record_bytes.update(client.bytes_per_record(o, begin, unknown))
                end = off.limit_bytes(begin, end, max_bytes, self._record_bytes)
        # Partitions that stay put keep their place in the offset (never dropped).
        merged = {**{tp: v for tp, v in begin.items() if tp in latest or not o.fail_on_data_loss}, **end}
        return off.to_json({tp: v for tp, v in merged.items() if tp in latest})

    def _check_loss(self, begin: off.Offsets, latest: off.Offsets) -> off.Offsets:
        gone = sorted(tp for tp in begin if tp not in latest)
        back = sorted(tp for tp in begin if tp in latest and latest[tp] < begin[tp])
        if self._plan.options.fail_on_data_loss and (gone or back):
            what = [f"{t}-{p} no longer exists" for t, p in gone] + [
                f"{t}-{p} ends at {latest[off.TopicPartition(t, p)]} < {begin[off.TopicPartition(t, p)]} already read"
                for t, p in back
            ]
            raise OffsetOutOfRangeError(
                "data loss: " + "; ".join(what) + ". Set failOnDataLoss=false to go on without it."
            )
        return latest

    def reportLatestOffset(self) -> off.JsonOffsets | None:
        latest = self._last_latest if self._last_latest is not None else self._driver.latest()
        return off.to_json(latest)

    def partitions(self, start: off.JsonOffsets, end: off.JsonOffsets) -> Sequence[InputPartition]:
        o = self._plan.options
        ranges = off.plan_ranges(
            off.from_json(start),
            off.from_json(end),
            min_partitions=o.min_partitions,
            max_records_per_partition=o.max_records_per_partition,
        )
        return self._driver.ranges(ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return read_range(self._plan, partition)

    def commit(self, end: off.JsonOffsets) -> None:
        """Progress lives in Spark's checkpoint; with ``groupId`` the completed ``end`` is
        also published to the group (``connectors.group_progress``)."""
        if self._progress is not None:
            self._progress.publish(off.from_json(end))

    def stop(self) -> None:
        self._driver.close()
        if self._progress is not None:
            self._progress.close()


class SparkLogBatchReader(DataSourceReader):
    """Batch reader: ``startingOffsets``/``startingTimestamp`` to ``endingOffsets``.

    The ranges are resolved when Spark plans the DataFrame; Spark keeps that plan for
    later actions on the same DataFrame (load again to see newer records).
    """

    def __init__(self, plan: ReadPlan) -> None:
        plan.options.check_batch()
        self._plan = plan
        self._pushed = PushedFilters()

    def partitions(self) -> Sequence[InputPartition]:
        driver = _DriverSide(self._plan)
        try:
            o = self._plan.options
            begin = driver.starting("earliest")
            latest = driver.latest()
            end = latest if o.ending_offsets in (None, "latest") else off.resolve(
                o.ending_offsets, driver.earliest(), latest, option="endingOffsets"
            )
            off.check_order(begin, end, starting="startingTimestamp" if o.starting_timestamp is not None else "startingOffsets")
            if self._pushed.min_timestamp is not None:
                by_time = driver._offsets(self._pushed.min_timestamp)
                begin = {tp: max(v, by_time.get(tp, end.get(tp, v))) for tp, v in begin.items()}
            begin, end = self._pushed.narrow(begin, end)
            ranges = off.plan_ranges(
                begin, end, min_partitions=o.min_partitions, max_records_per_partition=o.max_records_per_partition
            )
            return driver.ranges(ranges)
        finally:
            driver.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):  # Spark's placeholder for "no partitions"
            return iter(())
        return read_range(self._plan, partition, self._pushed)


class SparkLogFilteringBatchReader(SparkLogBatchReader):
    """The batch reader with filter pushdown (option ``pushFilters=true``).

    ``pushFilters`` narrows the ranges for predicates on ``topic``, ``partition`` and
    ``offset`` (exact: Spark does not re-check them), raises the start for
    ``timestamp >``/``>=`` (Spark re-checks), and sends simple predicates on typed
    topics' columns to the brokers as a row filter (Spark re-checks them too).

    Opt-in because Spark 4.2 keeps the reader of the last query that pushed filters on
    a DataFrame and reuses it for a later query on the same DataFrame that has no
    pushable filter (``PythonDataSourceV2.readInfo``), which would apply the old
    filters: with ``pushFilters=true``, load a fresh DataFrame per query.
    """

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        self._pushed, remaining = push_filters(filters, self._plan)
        yield from remaining
