"""The Delta tier's format (kernel): one Delta table per topic, and how to read it.

Layout.  ``<tier location>/<topic>`` is an ordinary Delta table (any Delta reader can query
it: ``deltalake``, Spark with delta-spark, DuckDB).  Its columns: a bytes topic's ``key``,
``value``, ``headers``, ``timestamp``; a typed topic's own columns and ``timestamp``; then
``partition`` (int32) and ``offset`` (int64).  ``timestamp`` is Delta's ``timestamp_ntz``
(microseconds; the records' milliseconds exactly): each record's timestamp as a consumer
reads it, so in a ``LogAppendTime`` topic the leader's append time, not the producer's
CreateTime the stored records keep (the tiering job reads through the Consumer or the
``spark-log`` source, which both take a LogAppendTime frame's header time).  The table is
partitioned by ``partition``; inside a partition every data file holds one contiguous
offset range of one tiering commit, and Delta's per-file min/max statistics on ``offset``
let a reader of an offset range open only the files that overlap it.

What the tier holds.  Only committed records: the tiering job reads ``read_committed``
below the last stable offset, so aborted records and transaction markers (and every other
control frame) are left out.  The tier holds a topic's *history*: the records the log held
when they were tiered.  It is never compacted, so a tiered topic cannot be compacted
(``TopicConfig`` refuses ``remote.storage.enable`` with a ``compact`` cleanup policy, as
Kafka does): a key tombstoned and compacted away on the brokers would come back from it.

Which offsets it holds.  Each Delta commit records, per partition it touches, Delta
application transactions (the protocol's ``txn`` actions, "SetTransaction"):
``spark-log:<topic>:<p>:end`` with version = the tiered end offset (every committed record
below it that is not below the tier start is in the table) and ``spark-log:<topic>:<p>:start``
with version = the tier's first offset.  They are part of the same atomic commit as the
data, so the table's latest snapshot says exactly which range ``[start, end)`` of each
partition it holds; a killed tiering job restarts from ``end`` (no duplicate, no gap).
Tier retention deletes rows below a new start in one commit that moves ``start``.

Which topic.  A table records its topic's id (table configuration ``spark-log.topic-id``): a
topic deleted and created again under the same name is another topic, and its tiering job
refuses the old table (move or delete it by hand) and readers never read it.  Deleting a
topic leaves its table.

Where.  The cluster's tier location (broker setting ``tier_location``) is a local path (shared
storage on a real cluster) or an object store URI ``s3://bucket/prefix``; an object store's
options (endpoint, region, credentials, timeouts: ``tier_storage_options``, deltalake's
``storage_options`` names) are the brokers'; ``DescribeTier`` hands jobs and union readers the
location and the options that are not secrets (``public_options``: no keys, tokens or
passwords), and each client process brings its own credentials (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN`` in its environment, or an instance role),
as every reader of a Delta table on S3 does.  Every storage call is bounded (``bounded_options``: connect and request
timeouts, a few retries), and a storage failure (no such bucket, an endpoint that does not
answer) is a ``TierStorageError`` naming the location and the cause, never the credentials.

Thread-safety: ``TierTable`` is used by one thread at a time.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .arrays import repeated_int32, repeated_string
from .errors import TierStorageError, TierUnavailableError
from .schemas import BYTES_SCHEMA

TOPIC_ID_KEY = "spark-log.topic-id"

__all__ = ["TOPIC_ID_KEY", "is_object_store", "bounded_options", "public_options", "storage_failure", "tier_filesystem", "TierRange", "TierTable", "tier_schema", "to_tier_batch", "from_tier_table", "table_path",
           "end_app_id", "start_app_id", "TIER_TIMESTAMP"]

TIER_TIMESTAMP = pa.timestamp("us")


@dataclass(frozen=True, slots=True)
class TierRange:
    """``[start, end)``: the offsets of one partition the tier holds (empty when ``start >= end``)."""

    start: int
    end: int

    @property
    def empty(self) -> bool:
        return self.start >= self.end


def is_object_store(location: str) -> bool:
    """Whether ``location`` is an object store URI (``s3://...``), not a local path."""
    return location.startswith(("s3://", "s3a://"))


# Bounds on every object store call (deltalake / object_store option names); a setting of the
# cluster's tier_storage_options wins.
_BOUNDS = {"connect_timeout": "5s", "timeout": "30s", "max_retries": "3", "retry_timeout": "20s"}


def bounded_options(location: str, options: dict[str, str] | None) -> dict[str, str] | None:
    """The storage options for ``location``: an object store's with bounded timeouts and
    retries (so a wrong endpoint fails within seconds, never hangs); None for a local path."""
    if not is_object_store(location):
        return None
    return {**_BOUNDS, **(options or {})}


def storage_failure(location: str, action: str, exc: BaseException) -> TierStorageError:
    """A storage failure as a ``TierStorageError`` (the cause's text names URLs, never keys)."""
    cause = " ".join(str(exc).split())
    return TierStorageError(f"the Delta tier at {location}: {action} failed: {type(exc).__name__}: {cause}")


_SECRET_WORDS = ("secret", "token", "password", "access_key", "key_id", "credential", "sas", "signature")


def public_options(options: dict[str, str] | None) -> dict[str, str]:
    """``options`` without the secrets (any option whose name says key, secret, token,
    password, credential or signature): what the brokers may hand to a client."""
    return {name: value for name, value in (options or {}).items()
            if not any(word in name.lower() for word in _SECRET_WORDS)}


def tier_filesystem(path: str, options: dict[str, str] | None) -> Any:
    """A pyarrow filesystem rooted at the table ``path`` for an object store (deltalake's
    object store client, the same options and bounds as the Delta reads); None for a local path."""
    if not is_object_store(path):
        return None
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    return pafs.PyFileSystem(DeltaStorageHandler(path, bounded_options(path, options)))


def table_path(location: str, topic: str) -> str:
    """The Delta table of ``topic`` under the cluster's tier ``location``."""
    if is_object_store(location):
        return location.rstrip("/") + "/" + topic
    return os.path.join(location, topic)


def end_app_id(topic: str, partition: int) -> str:
    return f"spark-log:{topic}:{partition}:end"


def start_app_id(topic: str, partition: int) -> str:
    return f"spark-log:{topic}:{partition}:start"


def tier_schema(kind: str, topic_schema: pa.Schema | None) -> pa.Schema:
    """The Delta table's schema for a topic of ``kind`` (``topic_schema``: a typed topic's)."""
    if kind == "bytes":
        data = [f for f in BYTES_SCHEMA if f.name != "timestamp"]
    else:
        if topic_schema is None:
            raise TierUnavailableError("a typed topic without a schema has nothing to tier")
        data = [f for f in topic_schema if f.name != "timestamp"]
    fields = [pa.field(f.name, f.type, nullable=True) for f in data]
    return pa.schema(fields + [pa.field("timestamp", TIER_TIMESTAMP, nullable=True),
                               pa.field("partition", pa.int32(), nullable=True),
                               pa.field("offset", pa.int64(), nullable=True)])


def to_tier_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A consumer batch (data columns, ``timestamp``, ``topic``, ``partition``, ``offset``) in
    the tier's layout ``schema`` (a column the batch lacks, from an older schema: nulls)."""
    arrays = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        if index < 0:
            arrays.append(pa.nulls(batch.num_rows, field.type))
        else:
            arrays.append(batch.column(index).cast(field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def from_tier_table(table: pa.Table, *, topic: str, partition: int, data_schema: pa.Schema,
                    columns: Sequence[str] | None = None) -> pa.Table:
    """Tier rows in a consumer's layout: the data columns of ``data_schema`` (the topic's
    columns, or only ``columns``), then ``timestamp`` (ms), ``topic``, ``partition``,
    ``offset``."""
    n = table.num_rows
    names = [f.name for f in data_schema if f.name != "timestamp" and (columns is None or f.name in columns)]
    arrays: list[Any] = []
    for name in names:
        field = data_schema.field(name)
        arrays.append(table.column(name).cast(field.type) if name in table.column_names
                      else pa.nulls(n, field.type))
    names += ["timestamp", "topic", "partition", "offset"]
    arrays += [table.column("timestamp").cast(pa.timestamp("ms")),
               repeated_string(topic, n),
               repeated_int32(partition, n),
               table.column("offset").cast(pa.int64())]
    return pa.Table.from_arrays(arrays, names=names)


class TierTable:
    """A topic's Delta table, read side: the ranges it holds and the rows of a range."""

    def __init__(self, location: str, topic: str, topic_id: str = "",
                 storage_options: dict[str, str] | None = None) -> None:
        self.topic = topic
        self.topic_id = topic_id   # "": do not check which topic the table belongs to
        self.path = table_path(location, topic)
        self.storage_options = bounded_options(location, storage_options)
        self._table: Any = None

    def load(self, *, refresh: bool = True) -> Any | None:
        """The ``deltalake.DeltaTable`` (latest snapshot when ``refresh``); None when the
        topic was never tiered."""
        try:
            return self._load(refresh)
        except OSError as exc:   # deltalake's storage errors (bounded by bounded_options)
            raise storage_failure(self.path, "reading the table's log", exc) from None

    def _load(self, refresh: bool) -> Any | None:
        from deltalake import DeltaTable

        if self._table is None:
            if not DeltaTable.is_deltatable(self.path, storage_options=self.storage_options):
                return None
            table = DeltaTable(self.path, storage_options=self.storage_options)
            owner = table.metadata().configuration.get(TOPIC_ID_KEY)
            if self.topic_id and owner and owner != self.topic_id:
                raise TierUnavailableError(
                    f"the Delta table {self.path} belongs to an earlier topic {self.topic!r} (id {owner}), not to "
                    f"the current one (id {self.topic_id}): move or delete it")
            self._table = table
        elif refresh:
            self._table.update_incremental()
        return self._table

    def range(self, partition: int, *, refresh: bool = True) -> TierRange:
        """What the table's snapshot holds of ``partition`` (``TierRange(0, 0)``: nothing)."""
        table = self.load(refresh=refresh)
        if table is None:
            return TierRange(0, 0)
        end = table.transaction_version(end_app_id(self.topic, partition))
        if end is None:
            return TierRange(0, 0)
        start = table.transaction_version(start_app_id(self.topic, partition))
        return TierRange(int(start or 0), int(end))

    def _scan(self, partition: int, start: int, end: int, action: str, *, columns: list[str] | None = None,
              where: Any = None) -> pa.Table:
        """The rows of ``partition`` with ``start <= offset < end`` (and ``where``, a dataset
        expression), in no particular order, of the snapshot loaded last."""
        import pyarrow.dataset as ds   # here: it imports pandas, which a broker process never needs

        table = self.load(refresh=False)
        assert table is not None
        condition = (ds.field("partition") == partition) & (ds.field("offset") >= start) & (ds.field("offset") < end)
        try:
            found: pa.Table = table.to_pyarrow_dataset().to_table(
                columns=columns, filter=condition if where is None else condition & where)
        except OSError as exc:
            raise storage_failure(self.path, action, exc) from None
        return found

    def first_at_or_after(self, partition: int, timestamp_ms: int, start: int, end: int) -> tuple[int, int] | None:
        """``(offset, timestamp ms)`` of the lowest offset of ``partition`` in ``[start, end)``
        the table holds whose timestamp is at least ``timestamp_ms`` (ListOffsets by time,
        KIP-405); None when there is none."""
        held = self.range(partition)
        low, high = max(start, held.start), min(end, held.end)
        if held.empty or low >= high:
            return None
        import pyarrow.dataset as ds   # here: see _scan()

        found = self._scan(partition, low, high, f"searching partition {partition} by timestamp",
                           columns=["offset", "timestamp"],
                           where=ds.field("timestamp") >= pa.scalar(timestamp_ms * 1000, TIER_TIMESTAMP))
        if not found.num_rows:
            return None
        at = pc.index(found.column("offset"), pc.min(found.column("offset"))).as_py()
        stamp = found.column("timestamp")[at].cast(pa.timestamp("ms")).cast(pa.int64()).as_py()
        return int(found.column("offset")[at].as_py()), int(stamp)

    def read(self, partition: int, start: int, end: int, *, max_rows: int | None = None) -> pa.Table:
        """The rows of ``partition`` with ``start <= offset < end``, in offset order (at most
        ``max_rows``, the lowest offsets).  Raises ``TierUnavailableError`` when the table
        does not hold ``[start, end)``."""
        held = self.range(partition, refresh=False)
        if held.empty or not (held.start <= start and end <= held.end):
            held = self.range(partition)
        if start < end and (held.empty or start < held.start or end > held.end):
            raise TierUnavailableError(
                f"the Delta tier of {self.topic!r} ({self.path}) holds [{held.start}, {held.end}) of partition "
                f"{partition}, not [{start}, {end})")
        found = self._scan(partition, start, end, f"reading [{start}, {end}) of partition {partition}")
        if found.num_rows:
            found = found.take(pc.sort_indices(found.column("offset")))
        if max_rows is not None and found.num_rows > max_rows:
            found = found.slice(0, max_rows)
        return found
