"""The writers of the ``spark-log`` sink: streaming and batch, both on Arrow batches.

Delivery guarantee (streaming): exactly-once appends per micro-batch
--------------------------------------------------------------------
Every input row of a micro-batch is appended to its topic partition **exactly once**,
even when Spark re-runs a task (task retry, speculation, executor loss) or replays the
whole micro-batch after the query's process died and restarted from its checkpoint.
How:

- Each write task produces with an idempotent producer whose ``producer_id`` is a stable
  hash of (streaming query id, Spark partition id, ``batch_id >> 15``) and whose
  ``producer_epoch`` is ``batch_id & 0x7FFF`` (the frame header holds a 16-bit epoch).
  The query id is the persistent id kept in the checkpoint, and the batch id comes from
  the task's local property ``streaming.sql.batchId``, so a re-run of the same task of
  the same micro-batch produces as the same producer, epoch and sequences.
- Frames are deterministic: the rows of one Arrow batch bound for one partition form
  one frame (cut into row-count slices of about ``batchSize`` bytes when larger), with
  no time-based lingering and sequences from 0 in input order.  The brokers acknowledge a frame whose sequences they already
  hold as a duplicate without appending it, so a re-run appends only what the first run
  did not.
- A zombie task of an older micro-batch (a lower epoch of the same producer id) is
  fenced by the brokers.

What it assumes and what it does not give:

- The input of a micro-batch must be deterministic (the same rows, in the same order,
  in the same Spark partitions, on a replay).  That holds for replayable sources
  (spark-log, Kafka, files, rate) and deterministic plans; it does not hold for plans
  with non-deterministic expressions (``rand()``, ``uuid()``, ``current_timestamp()`` as
  data) or non-deterministic repartitioning.
- It is exactly-once *append*, not atomic visibility: readers may see part of a
  micro-batch (some partitions, or the frames of a task that is re-run) before the rest
  lands.  Atomic visibility of a whole micro-batch across partitions needs transactions
  (a later issue).
- The record timestamp of rows without a ``timestamp`` column is the write time of
  the first attempt that landed.  Typed topics take no ``timestamp`` column (refused at
  start): their records always get the write time.

Batch writes (``df.write``) use the same scheme with a random job id instead of the
query id and epoch 0: a retried task appends nothing twice; re-running the job appends
again.

Tombstones
----------
On a compacted topic (``cleanup.policy=compact``) a tombstone deletes its key: for a bytes
topic it is a row with a null ``value``; for a typed topic a row whose
``tombstoneColumn`` (a boolean column, the topic's ``tombstone.column``) is true.  The
sink writes such rows like any other; the option only checks, at start, that the
DataFrame's column is boolean and is the topic's tombstone column (``createTopic=true``
creates the topic compacted with it).

Routing
-------
A ``partition`` column (int) picks the partition of each row where it is not null (a
value outside ``0 .. partitions - 1``, negative ones included, fails the task with
``InvalidConfigError``, as Kafka's producer refuses it); else the key (bytes topics:
``key``; typed topics: ``keyColumns`` or the topic's key columns) is hashed with Kafka's
murmur2 partitioner; rows without a key go to partition ``(spark_partition +
arrow_batch_index) % partitions``, so that replays route them identically.  Without
the ``topic`` option a string column ``topic`` names each row's topic (bytes topics).
"""
from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from spark_log.errors import (
    InvalidConfigError,
    InvalidSchemaError,
    SchemaMismatchError,
    UnknownTopicOrPartitionError,
)
from spark_log.schemas import HEADERS_TYPE

from . import client
from . import crash_points as crash
from .options import WriterOptions
from .schema_mapping import typed_payload

if TYPE_CHECKING:
    from spark_log import Admin

__all__ = ["WriteTarget", "WriteCommit", "SparkLogStreamWriter", "SparkLogBatchWriter", "producer_identity"]

_EPOCH_BITS = 15


def producer_identity(query_id: str, spark_partition: int, batch_id: int) -> tuple[int, int]:
    """``(producer_id, producer_epoch)`` of one write task: stable across re-runs.

    ``producer_id`` is a positive 63-bit hash of the query id, the Spark partition id
    and ``batch_id >> 15``; ``producer_epoch`` is ``batch_id & 0x7FFF``.
    """
    era = batch_id >> _EPOCH_BITS
    digest = hashlib.blake2b(f"{query_id}/{spark_partition}/{era}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF, batch_id & ((1 << _EPOCH_BITS) - 1)


@dataclass(frozen=True)
class WriteTarget:
    """What the driver resolved at start (picklable): the topic(s) and how to route.

    ``topic`` is None when rows name their topic; ``partitions`` maps each known topic
    to its partition count.
    """

    options: WriterOptions
    kind: str
    topic: str | None
    partitions: dict[str, int]
    key_columns: tuple[str, ...]
    schema: pa.Schema | None = None  # typed topics: the topic's schema, batches are cast to it


@dataclass
class WriteCommit(WriterCommitMessage):
    """What one task wrote (for logs and tests): rows, frames and the producer used.
    Transactional writes also say which transaction the task joined (``joined`` False: its
    batch committed before, it wrote nothing)."""

    spark_partition: int
    rows: int
    frames: int
    producer_id: int
    producer_epoch: int
    transactional_id: str = ""
    run: str = ""
    label: int = -1
    joined: bool = False


def resolve_target(options: WriterOptions, spark_arrow_schema: pa.Schema) -> WriteTarget:
    """Check the sink against the brokers on the driver, at query start (``df.write``:
    at write start); nothing is written when it raises.

    - A missing topic: ``UnknownTopicOrPartitionError`` naming it and how to create it,
      unless ``createTopic=true``, which creates it as a typed topic (``partitions``,
      ``replicationFactor``, key columns from ``keyColumns``) and registers the
      DataFrame's schema as below.  (Spark's Kafka sink relies on the brokers'
      auto-create; spark-log has none, so creating is explicit.)  With
      ``createTopic=true`` an existing topic (or one another writer created first) must have
      the ``partitions`` and ``replicationFactor`` asked (defaults 1 and 1), else
      ``InvalidConfigError`` naming the option.
    - A typed topic without a schema yet: the DataFrame's data columns (as the sink
      writes them: without ``topic, partition, offset, timestamp, timestampType``) are
      registered as its schema (id 0).  Two writers racing: the same schema is a no-op for
      the second; a different one is checked as below against the schema that won.
    - A typed topic with a schema needs the topic's columns in types that cast to the
      topic's; else ``SchemaMismatchError`` naming the columns.
    - A typed topic refuses a ``timestamp`` column (``SchemaMismatchError``): its records
      are stamped with the write time, and a column the sink would drop is refused rather
      than ignored.
    - A bytes topic (and rows that name their topic) needs ``value``, and ``key`` if
      present, binary or string; ``headers`` as Spark's Kafka sink takes them; ``timestamp``
      a timestamp or integer ms: ``SchemaMismatchError`` naming the column otherwise.
    - ``InvalidConfigError`` when neither ``topic`` nor a ``topic`` column is given, and
      for ``keyColumns`` other than ``key`` when rows name their topic (bytes topics).
    """
    names = spark_arrow_schema.names
    if options.topic is None:
        if "topic" not in names:
            raise InvalidConfigError("option 'topic' is required unless the DataFrame has a 'topic' column", key="topic")
        if options.key_columns not in (None, ("key",)):
            raise InvalidConfigError(
                f"option 'keyColumns' applies to typed topics (option 'topic'); rows that name their topic are "
                f"written to bytes topics, which hash the 'key' column (got {list(options.key_columns)})",
                key="keyColumns")
        _check_bytes_columns(spark_arrow_schema, "the topics the rows name")
        return WriteTarget(options, "bytes", None, {}, ("key",))
    admin = client.open_admin(options)
    try:
        info = _describe_or_create(admin, options)
        if info.kind == "bytes":
            if options.tombstone_column is not None:
                raise InvalidConfigError(
                    f"option 'tombstoneColumn' applies to typed topics; '{options.topic}' is a bytes topic, whose "
                    "tombstones are rows with a null 'value'", key="tombstoneColumn")
            if "value" not in names:
                raise SchemaMismatchError(
                    f"topic '{options.topic}' is a bytes topic (key, value, headers, timestamp) and the DataFrame has "
                    f"no 'value' column (it has {names}); to store these columns create a typed topic, e.g. "
                    f"Admin.create_topic(name, schema=...)"
                )
            if options.key_columns not in (None, ("key",)):
                raise InvalidConfigError("option 'keyColumns' applies to typed topics; bytes topics hash the 'key' column", key="keyColumns")
            _check_bytes_columns(spark_arrow_schema, f"bytes topic '{options.topic}'")
            return WriteTarget(options, "bytes", options.topic, {options.topic: info.partitions}, ("key",))
        if "timestamp" in names:
            raise SchemaMismatchError(
                f"topic '{options.topic}' is a typed topic, whose frames carry one timestamp each, and the sink "
                f"cannot yet set record timestamps from the DataFrame's 'timestamp' column (it would stamp the "
                f"write time instead); drop the column (df.drop('timestamp')) to write with the write time, or "
                f"write to a bytes topic, which keeps it")
        data = typed_payload(pa.RecordBatch.from_pylist([], schema=spark_arrow_schema))
        schema = info.schema if info.schema is not None else _register_first_schema(admin, info, data.schema)
        client.check_writable(data.schema, schema, options.topic)
        _check_tombstone_column(options, info, data.schema)
        keys = options.key_columns if options.key_columns is not None else tuple(info.key_columns)
        missing = [k for k in keys if k not in data.schema.names]
        if missing:
            raise InvalidConfigError(f"option 'keyColumns' names columns the DataFrame lacks: {missing}", key="keyColumns")
        return WriteTarget(options, "typed", options.topic, {options.topic: info.partitions}, keys, schema)
    finally:
        admin.close()


def _check_bytes_columns(schema: pa.Schema, where: str) -> None:
    """The columns a bytes topic stores, in types the executors' write converts
    (``spark_log._records.conform``): ``key``/``value`` binary or string, ``headers`` as
    ``HEADERS_TYPE``, ``timestamp`` a timestamp or integer ms.  ``SchemaMismatchError``
    naming the column otherwise: refused on the driver, before any task runs."""
    for field in schema:
        kind = field.type
        if field.name in ("key", "value"):
            ok, wanted = _is_bytes(kind), "binary or string"
        elif field.name == "headers":
            ok, wanted = _is_headers(kind), f"{HEADERS_TYPE} (Spark: array<struct<key: string, value: binary>>)"
        elif field.name == "timestamp":
            ok, wanted = pa.types.is_timestamp(kind) or pa.types.is_integer(kind), "a timestamp or integer ms"
        else:
            continue
        if not ok:
            raise SchemaMismatchError(f"column '{field.name}' of the DataFrame is {kind}; {where} take it as {wanted}")


def _is_headers(kind: pa.DataType) -> bool:
    """Whether ``kind`` is a list of ``struct<key: string, value: binary or string>``, which
    the write casts to ``HEADERS_TYPE`` (an empty-array cast cannot tell: it checks no values)."""
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not pa.types.is_struct(kind.value_type):
        return False
    item = kind.value_type
    names = [item.field(i).name for i in range(item.num_fields)]
    if names != ["key", "value"]:
        return False
    key, value = item.field(0).type, item.field(1).type
    return (pa.types.is_string(key) or pa.types.is_large_string(key)) and _is_bytes(value)


def _is_bytes(kind: pa.DataType) -> bool:
    """Binary or string (or all-null): what the write stores as bytes."""
    return (pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_string(kind)
            or pa.types.is_large_string(kind) or pa.types.is_null(kind))


def _describe_or_create(admin: Admin, options: WriterOptions) -> client.TopicView:
    topic = options.topic
    assert topic is not None
    try:
        info = client.describe(admin, topic)
        if options.create_topic:
            _check_created_as_asked(admin, info, options)
        return info
    except UnknownTopicOrPartitionError:
        if not options.create_topic:
            raise UnknownTopicOrPartitionError(
                f"topic '{topic}' does not exist; create it first (Admin.create_topic('{topic}', kind='typed') or "
                f"`spark-log topics create {topic} --typed`: the first write sets its schema; or a bytes topic), "
                f"or set option createTopic=true (with partitions / replicationFactor) to create a typed topic "
                f"from the DataFrame's schema") from None
    config = ({"cleanup.policy": "compact", "tombstone.column": options.tombstone_column}
              if options.tombstone_column is not None else None)
    info = client.create_typed_topic(admin, topic, partitions=options.partitions,
                                     replication_factor=options.replication_factor,
                                     key_columns=options.key_columns or (), config=config)
    _check_created_as_asked(admin, info, options)  # another writer may have created it first
    return info


def _check_created_as_asked(admin: Admin, info: client.TopicView, options: WriterOptions) -> None:
    """``createTopic=true`` and the topic exists: its partitions and replication factor must
    be the options' (defaults 1 and 1), else ``InvalidConfigError`` naming the option (the
    sink does not add partitions nor move replicas; the settings would have no effect)."""
    if info.partitions != options.partitions:
        raise InvalidConfigError(
            f"option 'partitions' is {options.partitions} (with createTopic=true) but topic '{info.name}' exists with "
            f"{info.partitions} partitions; set partitions={info.partitions}, or drop createTopic to write to the "
            f"topic as it is", key="partitions")
    replication_factor = admin.describe_topic(info.name, live=False).replication_factor
    if replication_factor != options.replication_factor:
        raise InvalidConfigError(
            f"option 'replicationFactor' is {options.replication_factor} (with createTopic=true) but topic "
            f"'{info.name}' exists with replication factor {replication_factor}; set "
            f"replicationFactor={replication_factor}, or drop createTopic to write to the topic as it is",
            key="replicationFactor")


def _check_tombstone_column(options: WriterOptions, info: client.TopicView, data: pa.Schema) -> None:
    """``tombstoneColumn``: a boolean column of the DataFrame, the topic's ``tombstone.column``."""
    column = options.tombstone_column
    if column is None:
        return
    index = data.get_field_index(column)
    if index < 0 or not pa.types.is_boolean(data.field(index).type):
        found = "missing" if index < 0 else f"of type {data.field(index).type}"
        raise InvalidConfigError(f"option 'tombstoneColumn' names {column!r}, which must be a boolean column of the "
                                 f"DataFrame ({found})", key="tombstoneColumn")
    if info.tombstone_column != column:
        now = f"'{info.tombstone_column}'" if info.tombstone_column else "none"
        raise InvalidConfigError(
            f"option 'tombstoneColumn' is {column!r} but topic '{info.name}' marks tombstones with {now}; set the "
            f"topic's setting first: Admin.alter_configs('{info.name}', set={{'tombstone.column': '{column}'}})",
            key="tombstoneColumn")


def _register_first_schema(admin: Admin, info: client.TopicView, schema: pa.Schema) -> pa.Schema:
    """Give a typed topic without a schema the DataFrame's; returns the topic's schema
    afterwards (``schema``, or the one another writer registered first)."""
    columns = ", ".join(f"{f.name}: {f.type}" for f in schema)
    try:
        client.register_schema(admin, info.name, schema)
        return schema
    except InvalidSchemaError as exc:
        raise InvalidSchemaError(
            f"the DataFrame's columns ({columns}) cannot be the schema of typed topic '{info.name}': {exc.message}"
        ) from None
    except SchemaMismatchError as exc:
        refused = exc  # another writer registered a different schema first: check against that one
    deadline = time.monotonic() + 10.0
    while True:  # the broker describing may lag the one that refused; metadata polling, not synchronisation
        current = client.describe(admin, info.name)
        if current.schema is not None:
            return current.schema
        if time.monotonic() > deadline:
            raise refused
        time.sleep(0.05)


def _partition_of_rows(batch: pa.RecordBatch, target: WriteTarget, n: int, fallback: int) -> np.ndarray:
    """Target partition of every row (vectorised)."""
    from spark_log.partitioner import key_array, partitions_for_keys

    out = np.full(batch.num_rows, fallback % n, dtype=np.int32)
    keys = [k for k in target.key_columns if k in batch.schema.names]
    if keys:
        key_bytes, present = key_array(batch, keys)
        hashed = partitions_for_keys(key_bytes, n)
        out = np.where(present, hashed, out).astype(np.int32)
    if "partition" in batch.schema.names:
        column = batch.column("partition")
        named = column.is_valid().to_numpy(zero_copy_only=False)  # a null partition: route by key
        given = column.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        bad = named & ((given < 0) | (given >= n))
        if bad.any():
            raise InvalidConfigError(f"column 'partition' holds {int(given[bad][0])}, but the topic has partitions "
                                     f"0 to {n - 1}", key="partition")
        out = np.where(named, given, out).astype(np.int32)
    return out


class _TaskWriter:
    """Routes and produces one task's Arrow batches (runs on an executor).  With a
    ``transaction`` ``(transactional id, label, run)`` the task joins that transaction as a
    participant with a fresh producer id instead of its idempotent identity."""

    def __init__(self, target: WriteTarget, spark_partition: int, producer_id: int, producer_epoch: int,
                 transaction: tuple[str, int, str] | None = None) -> None:
        self.target = target
        self.spark_partition = spark_partition
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.transaction = transaction
        self.rows = 0
        self.frames = 0

    def run(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:
        if self.transaction is None:
            return self._write(iterator, client.open_producer(self.target.options, producer_id=self.producer_id,
                                                              producer_epoch=self.producer_epoch))
        transactional_id, label, run = self.transaction
        producer = client.open_participant(self.target.options, transactional_id)
        try:
            joined = producer.join(label, run)
        except BaseException:
            producer.__exit__(None)
            raise
        if not joined:  # the batch committed before this replay: write nothing
            producer.__exit__(None)
            return WriteCommit(self.spark_partition, 0, 0, -1, -1, transactional_id, run, label, False)
        self.producer_id, self.producer_epoch = producer.producer_id, 0
        done = self._write(iterator, producer)
        return WriteCommit(done.spark_partition, done.rows, done.frames, done.producer_id, 0, transactional_id, run,
                           label, True)

    def _write(self, iterator: Iterator[pa.RecordBatch], opened: client.TaskProducer) -> WriteCommit:
        o = self.target.options
        partitions = dict(self.target.partitions)
        with opened as producer:
            for index, batch in enumerate(iterator):
                if batch.num_rows == 0:
                    continue
                self.rows += batch.num_rows
                for topic, rows in self._by_topic(batch):
                    if topic not in partitions:
                        partitions[topic] = producer.partitions_for(topic)
                    self._send(producer, topic, rows, partitions[topic], index)
            producer.finish(timeout_ms=o.timeout_ms)
        return WriteCommit(self.spark_partition, self.rows, self.frames, self.producer_id, self.producer_epoch)

    def _by_topic(self, batch: pa.RecordBatch) -> Iterator[tuple[str, pa.RecordBatch]]:
        if self.target.topic is not None:
            yield self.target.topic, batch
            return
        column = batch.column("topic")
        if column.null_count:
            raise InvalidConfigError("column 'topic' is null in some rows and option 'topic' is not set", key="topic")
        topics = cast("list[str]", pc.unique(column).to_pylist())  # no nulls: checked above
        for topic in sorted(topics):
            yield topic, batch.filter(pc.equal(column, pa.scalar(topic, column.type)))

    def _send(self, producer: client.TaskProducer, topic: str, batch: pa.RecordBatch, n: int, index: int) -> None:
        rows_partition = _partition_of_rows(batch, self.target, n, self.spark_partition + index)
        payload = self._payload(batch)
        order = np.argsort(rows_partition, kind="stable")
        bounds = np.flatnonzero(np.diff(rows_partition[order])) + 1
        for chunk in np.split(order, bounds):
            if len(chunk):
                rows = payload if len(chunk) == payload.num_rows else payload.take(chunk)
                producer.send_frame(topic, rows, partition=int(rows_partition[chunk[0]]))
                self.frames += 1

    def _cast(self, column: pa.Array[Any], field: pa.Field[Any]) -> pa.Array[Any]:
        """``column`` as the topic's ``field`` (pyarrow's safe cast); a value it refuses is a
        ``SchemaMismatchError`` (the JVM sink's ``Casts`` words it the same way)."""
        if column.type.equals(field.type):
            return column
        try:
            return column.cast(field.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatchError(
                f"column '{field.name}' of topic '{self.target.topic}' is {field.type}; a value of the DataFrame's "
                f"{column.type} column does not convert: {exc}") from None

    def _payload(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.target.kind == "typed":
            data = typed_payload(batch)
            schema = self.target.schema
            if schema is not None and not data.schema.equals(schema, check_metadata=False):
                data = pa.RecordBatch.from_arrays([self._cast(data.column(f.name), f) for f in schema], schema=schema)
            return data
        keep = [name for name in ("key", "value", "headers", "timestamp") if name in batch.schema.names]
        data = batch.select(keep)
        if "timestamp" in keep and pa.types.is_timestamp(data.column("timestamp").type):
            index = keep.index("timestamp")
            millis = data.column(index).cast(pa.timestamp("ms", tz=data.column(index).type.tz), safe=False)
            data = data.set_column(index, "timestamp", millis)
        return data


class SparkLogStreamWriter(DataSourceStreamArrowWriter):
    """Exactly-once streaming sink (see the module docstring for the guarantee)."""

    def __init__(self, target: WriteTarget) -> None:
        self._target = target
        # transactional=true: this writer instance's run (Spark ships this one instance to every
        # task of a batch; a restarted query builds a new one, whose tasks abort the old run's batch)
        self._run = uuid.uuid4().hex

    # pyspark's Arrow writers narrow DataSourceStreamWriter.write(Iterator[Row]) to record batches
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:  # type: ignore[override]
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None, "write() runs in a Spark task"
        batch_id = ctx.getLocalProperty("streaming.sql.batchId")
        query_id = ctx.getLocalProperty("sql.streaming.queryId")
        if batch_id is None or query_id is None:
            raise InvalidConfigError("the spark-log stream writer found no streaming batch id in its task")
        pid, epoch = producer_identity(query_id, ctx.partitionId(), int(batch_id))
        transaction = (transactional_id_of(query_id), int(batch_id), self._run) if self._target.options.transactional \
            else None
        return _TaskWriter(self._target, ctx.partitionId(), pid, epoch, transaction).run(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Idempotent writes: nothing to finish (every task's frames are acknowledged before
        it returns).  Transactional: commit the batch's transaction with the participants
        whose results Spark took."""
        _end_transaction(self._target.options, messages, batchId, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Idempotent writes: nothing to undo (frames that landed are recognised as
        duplicates on replay).  Transactional: abort the batch's transaction."""
        _end_transaction(self._target.options, messages, batchId, commit=False)


def transactional_id_of(query_id: str) -> str:
    """The transactional id of a streaming query's sink (one per query, across restarts)."""
    return f"spark-sink-{query_id}"


def _end_transaction(options: WriterOptions, messages: list[WriterCommitMessage | None], label: int, *,
                     commit: bool) -> None:
    if not options.transactional:
        return
    ours = [m for m in messages if isinstance(m, WriteCommit) and m.transactional_id]
    if not ours:
        return  # no task ran (an empty batch): nothing joined, nothing to end
    transactional_id, run = ours[0].transactional_id, ours[0].run
    participants = [m.producer_id for m in ours if m.joined]
    if commit:
        crash.reach("before-commit")
    client.end_batch_transaction(options, transactional_id, label, run, commit, participants)
    if commit:
        crash.reach("during-commit")


class SparkLogBatchWriter(DataSourceArrowWriter):
    """Batch sink: a retried task appends nothing twice (one random job id per write)."""

    def __init__(self, target: WriteTarget) -> None:
        self._target = target
        self._job_id = uuid.uuid4().hex  # fixed on the driver, shipped to every task

    # pyspark's Arrow writers narrow DataSourceWriter.write(Iterator[Row]) to record batches
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCommit:  # type: ignore[override]
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        pid, epoch = producer_identity(self._job_id, partition, 0)
        transaction = (f"spark-job-{self._job_id}", 0, self._job_id) if self._target.options.transactional else None
        return _TaskWriter(self._target, partition, pid, epoch, transaction).run(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Transactional: every task's rows become visible at once."""
        _end_transaction(self._target.options, messages, 0, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _end_transaction(self._target.options, messages, 0, commit=False)
