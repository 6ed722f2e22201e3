"""The connector's narrow view of ``spark_log``'s clients (the only module that calls them).

- Driver side: ``open_admin``, ``list_topics``, ``describe`` (kind, partition count,
  schema, key columns, timestamp type), ``list_offsets``, ``group_offsets`` and
  ``commit_group`` (a query's progress as a member-less consumer group), ``check_writable``,
  ``create_typed_topic`` and ``register_schema`` (the sink's schema on first write),
  ``bytes_per_record`` (a sampled estimate for ``maxBytesPerTrigger``).
- Executor side: ``read_range`` yields the records of exactly one offset range as Arrow
  batches; ``open_producer`` wraps an idempotent ``Producer`` for one write task.

``read_range`` contract: for ``[start, end)`` of one partition it yields batches (data
columns plus ``topic``, ``partition``, ``offset``, ``timestamp``) holding exactly the
records with ``start <= offset < end`` that pass ``row_filter``, in offset order (a
compacted partition holds fewer: its gaps are crossed, never reported as loss); it stops
once the consumer's position reaches ``end``.  Records below the log start offset, and a
partition whose topic was deleted, are data loss: ``OffsetOutOfRangeError`` with
``failOnDataLoss`` (default), else skipped.  A
fetch that makes no progress for ``pollTimeoutMs`` raises ``RequestTimeoutError``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from concurrent.futures import Future
from typing import Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from spark_log import Admin, Consumer, Producer
from spark_log.errors import (
    OffsetOutOfRangeError,
    RequestTimeoutError,
    SchemaMismatchError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from . import offsets as off
from .options import ReaderOptions, WriterOptions

__all__ = [
    "TopicView",
    "open_admin",
    "list_topics",
    "describe",
    "list_offsets",
    "list_offsets_for_topics",
    "group_offsets",
    "commit_group",
    "check_writable",
    "create_typed_topic",
    "register_schema",
    "bytes_per_record",
    "read_range",
    "open_producer",
    "TaskProducer",
]


@dataclass(frozen=True)
class TopicView:
    """What the connector needs to know about a topic."""

    name: str
    kind: str  # "bytes" or "typed"
    partitions: int
    schema: pa.Schema | None  # typed topics' current schema (None: none registered yet)
    key_columns: tuple[str, ...]
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    tombstone_column: str = ""  # the topic's tombstone.column ("": none)


def open_admin(options: ReaderOptions | WriterOptions) -> Admin:
    """An ``Admin`` for the query's cluster, with its security settings and client id."""
    return Admin(options.bootstrap, security=options.security, client_id=options.client_id)


def list_topics(admin: Admin) -> list[str]:
    return [t for t in admin.list_topics() if not t.startswith("__")]


def describe(admin: Admin, topic: str) -> TopicView:
    """Raises ``UnknownTopicOrPartitionError`` when ``topic`` does not exist."""
    d = admin.describe_topic(topic, live=False)  # kind and schema: no leader round trips
    log_append = str(d.config.get("message.timestamp.type", d.config.get("message_timestamp_type", ""))) == "LogAppendTime"
    return TopicView(
        name=d.name,
        kind=d.kind,
        partitions=d.num_partitions,
        schema=d.schema if d.kind == "typed" else None,
        key_columns=tuple(d.key_columns),
        timestamp_type=1 if log_append else 0,
        tombstone_column=str(d.config.get("tombstone.column", "")),
    )


def list_offsets(admin: Admin, topic: str, spec: str | int, isolation_level: str) -> dict[int, int]:
    """``{partition: offset}`` for "earliest", "latest" or a timestamp in ms."""
    return dict(admin.list_offsets(topic, spec, isolation_level=isolation_level))


def list_offsets_for_topics(admin: Admin, topics: list[str], spec: str | int,
                            isolation_level: str) -> dict[off.TopicPartition, int]:
    """Offsets of every partition of ``topics`` in one call (one request per leader broker)."""
    found = admin.list_offsets_for_topics(topics, spec, isolation_level=isolation_level)
    return {off.TopicPartition(t, p): offset for (t, p), offset in found.items()}


def group_offsets(admin: Admin, group: str) -> dict[off.TopicPartition, int]:
    """Every offset ``group`` committed (empty for a group that does not exist)."""
    return {off.TopicPartition(t, p): o.offset for (t, p), o in admin.list_group_offsets(group).items()}


def commit_group(admin: Admin, group: str, offsets: Mapping[off.TopicPartition, int], metadata: str) -> None:
    """Commit ``offsets`` to ``group`` as a group without members (``NonEmptyGroupError``
    while consumers are members of it)."""
    admin.alter_group_offsets(group, {(tp.topic, tp.partition): (int(o), metadata) for tp, o in offsets.items()})


def check_writable(data: pa.Schema, topic_schema: pa.Schema, topic: str) -> None:
    """Refuse, at query start, a DataFrame whose columns do not match the topic's schema."""
    want = {f.name: f.type for f in topic_schema}
    have = {f.name: f.type for f in data}
    missing = [n for n in want if n not in have]
    unknown = [n for n in have if n not in want]
    if missing or unknown:
        raise SchemaMismatchError(
            f"the DataFrame does not match topic '{topic}': missing columns {missing}, unexpected {unknown} "
            f"(topic schema: {', '.join(f'{f.name}: {f.type}' for f in topic_schema)})"
        )
    for name, type_ in want.items():
        try:
            pa.array([], have[name]).cast(type_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise SchemaMismatchError(f"column '{name}' of topic '{topic}' is {type_}; the DataFrame has {have[name]}") from None


def create_typed_topic(admin: Admin, topic: str, *, partitions: int, replication_factor: int,
                       key_columns: tuple[str, ...], config: Mapping[str, str] | None = None) -> TopicView:
    """Create ``topic`` as a typed topic without a schema (the caller registers one) with
    ``config``; a topic that another writer created first is described instead."""
    try:
        admin.create_topic(topic, partitions=partitions, replication_factor=replication_factor,
                           key_columns=list(key_columns) or None, kind="typed", config=dict(config or {}))
    except TopicAlreadyExistsError:
        pass
    return describe(admin, topic)


def register_schema(admin: Admin, topic: str, schema: pa.Schema) -> int:
    """Register ``schema`` as the topic's next schema version (the first one: id 0);
    the latest schema again is a no-op.  Raises ``SchemaMismatchError`` /
    ``InvalidSchemaError`` as ``Admin.register_schema``."""
    return int(admin.register_schema(topic, schema))


def bytes_per_record(options: ReaderOptions, begin: Mapping[off.TopicPartition, int], end: Mapping[off.TopicPartition, int]) -> dict[off.TopicPartition, float]:
    """Average decoded record size of each partition with a backlog, sampled from one
    fetch at its start offset (an estimate: ``maxBytesPerTrigger`` is a soft limit)."""
    out: dict[off.TopicPartition, float] = {}
    todo = [tp for tp, e in end.items() if e > begin.get(tp, 0)]
    if not todo:
        return out
    with Consumer(options.bootstrap, isolation_level=options.isolation_level, auto_offset_reset="earliest",
                  security=options.security, client_id=options.client_id,
                  fetch_max_bytes=1 << 20, max_partition_fetch_bytes=1 << 20) as consumer:
        consumer.assign(todo)
        for tp in todo:
            consumer.seek(tp.topic, tp.partition, begin.get(tp, 0))
        deadline = time.monotonic() + 5.0
        while len(out) < len(todo) and time.monotonic() < deadline:
            for batch in consumer.poll_arrow(timeout=0.2):
                if batch.num_rows:
                    tp = off.TopicPartition(batch.column("topic")[0].as_py(), batch.column("partition")[0].as_py())
                    out.setdefault(tp, batch.nbytes / batch.num_rows)
    return out


def read_range(
    options: ReaderOptions,
    r: off.OffsetRange,
    *,
    columns: list[str] | None,
    row_filter: pc.Expression | None = None,
) -> Iterator[pa.RecordBatch]:
    """The records of ``r`` (see the module docstring for the contract)."""
    if r.end <= r.start:
        return
    consumer = Consumer(options.bootstrap, columns=columns, row_filter=row_filter,
                        security=options.security, client_id=options.client_id,
                        isolation_level=options.isolation_level, auto_offset_reset="none")
    try:
        try:
            consumer.assign([(r.topic, r.partition)])
        except UnknownTopicOrPartitionError:
            _deleted(options, r)
            return
        start = r.start
        consumer.seek(r.topic, r.partition, start, end=r.end)  # nothing fetched or prefetched past r.end
        position = start
        last_progress = time.monotonic()
        while position < r.end:
            try:
                batches = consumer.poll_arrow(timeout=0.5)
            except OffsetOutOfRangeError:
                start = _after_loss(consumer, options, r, position)
                if start >= r.end:
                    return
                consumer.seek(r.topic, r.partition, start, end=r.end)
                position = start
                continue
            for batch in batches:
                offsets = batch.column("offset")
                if batch.num_rows and (offsets[0].as_py() < start or offsets[-1].as_py() >= r.end):
                    low, high = pa.scalar(start, pa.int64()), pa.scalar(r.end, pa.int64())
                    batch = batch.filter(pc.and_(pc.greater_equal(offsets, low), pc.less(offsets, high)))
                if batch.num_rows:
                    yield batch
            now_position = consumer.position(r.topic, r.partition)
            if now_position > position:
                position, last_progress = now_position, time.monotonic()
            elif time.monotonic() - last_progress > options.poll_timeout_ms / 1000:
                raise RequestTimeoutError(
                    f"{r.topic}-{r.partition}: no records after offset {position} for {options.poll_timeout_ms} ms "
                    f"while reading up to {r.end} (pollTimeoutMs)"
                )
    finally:
        consumer.close()


def _deleted(options: ReaderOptions, r: off.OffsetRange) -> None:
    """``r``'s partition no longer exists (its topic was deleted): raises with failOnDataLoss."""
    if options.fail_on_data_loss:
        raise OffsetOutOfRangeError(
            f"data loss: {r.topic}-{r.partition} no longer exists (was the topic deleted?): records "
            f"[{r.start}, {r.end}) are lost. Set failOnDataLoss=false to skip them and go on.")


def _after_loss(consumer: Consumer, options: ReaderOptions, r: off.OffsetRange, position: int) -> int:
    """Where to go on after ``position`` fell out of the log; raises with failOnDataLoss."""
    consumer.seek_to_beginning([(r.topic, r.partition)])
    earliest = consumer.position(r.topic, r.partition)
    if earliest <= position:  # the log now ends before position: it was truncated
        message = f"{r.topic}-{r.partition}: offset {position} is past the end of the log (was the topic recreated?)"
        resume = r.end
    else:
        message = (f"{r.topic}-{r.partition}: records [{position}, {min(earliest, r.end)}) were deleted "
                   f"(retention) before this query read them")
        resume = earliest
    if options.fail_on_data_loss:
        raise OffsetOutOfRangeError(f"data loss: {message}. Set failOnDataLoss=false to skip them and go on.")
    return resume


class TaskProducer:
    """One write task's idempotent producer: ``send_frame`` + ``finish`` (see writer.py).
    With ``transactional_id`` a participant of a transaction (``join``) instead."""

    def __init__(self, options: WriterOptions, producer_id: int | None, producer_epoch: int,
                 transactional_id: str | None = None) -> None:
        self._producer = Producer(
            options.bootstrap, acks=options.acks, compression=options.compression, linger_ms=0,
            batch_size=options.batch_size, producer_id=producer_id, producer_epoch=producer_epoch,
            delivery_timeout_ms=options.timeout_ms, security=options.security, client_id=options.client_id,
            transactional_id=transactional_id, transaction_timeout_ms=options.transaction_timeout_ms,
        )
        self._options = options
        self._futures: list[Future[tuple[int, int]]] = []

    def join(self, label: int, run: str) -> bool:
        """Join micro-batch ``label``'s transaction; False: it committed before (write nothing)."""
        return self._producer.join_transaction(label, run)

    @property
    def producer_id(self) -> int:
        return self._producer.producer_id

    def partitions_for(self, topic: str) -> int:
        """Partition count of ``topic`` (rows that name their own topic)."""
        admin = open_admin(self._options)
        try:
            return describe(admin, topic).partitions
        finally:
            admin.close()

    def send_frame(self, topic: str, rows: pa.RecordBatch, *, partition: int) -> None:
        """Send ``rows`` to ``partition``; the producer cuts frames deterministically."""
        self._futures.extend(self._producer.send_batch(topic, rows, partition=partition))

    def finish(self, *, timeout_ms: int) -> None:
        """Wait for every acknowledgement; raises the first failure."""
        self._producer.flush(timeout_ms / 1000)
        for future in self._futures:
            future.result(timeout=timeout_ms / 1000)

    def __enter__(self) -> "TaskProducer":
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        try:
            self._producer.close(timeout=5.0)
        except Exception:
            if kind is None:  # do not hide the error that is already on its way out
                raise


def open_producer(options: WriterOptions, *, producer_id: int, producer_epoch: int) -> TaskProducer:
    return TaskProducer(options, producer_id, producer_epoch)


def open_participant(options: WriterOptions, transactional_id: str) -> TaskProducer:
    """A write task's producer in the transaction of ``transactional_id`` (call ``join``)."""
    return TaskProducer(options, None, 0, transactional_id=transactional_id)


def end_batch_transaction(options: WriterOptions, transactional_id: str, label: int, run: str, commit: bool,
                          participants: list[int]) -> None:
    """The driver's commit (or abort) of a micro-batch's transaction (``Admin.end_batch_transaction``)."""
    admin = open_admin(options)
    try:
        admin.end_batch_transaction(transactional_id, label=label, run=run, commit=commit, participants=participants,
                                    timeout_s=max(120.0, options.timeout_ms / 1000))
    finally:
        admin.close()
