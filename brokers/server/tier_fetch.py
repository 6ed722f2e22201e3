"""Fetches below the brokers' log start answered from the Delta tier (the data listener's
``FETCH_TIER``): the JVM connector's union read, as Kafka brokers serve remote-tier reads
(KIP-405).

Why on the broker.  The broker already knows the tier's location (``tier_location``) and,
from its partitions' TIERED frames, which range ``[tier_start, tiered_end)`` the tier holds;
reading the Delta table needs a Delta reader (``deltalake``, Python), which the JVM
connector does not ship (no Delta jars on these machines).  Answering as frames means the
JVM reader decodes tier records with the same code, checks and ``ColumnarBatch`` path as
log records, and security (TLS, SCRAM, ACLs as ``Broker.Fetch``: READ on the topic, the
consumer byte-rate quota) is the data listener's.

The answer, per requested partition (the FETCH layout, fields read differently):

- records ``[fetch_offset, stop)`` with ``stop = min(tiered_end, max_offset (when > 0),
  fetch_offset + window)``, as version-2 frames (rows carry their offsets: the tier has gaps
  where the log had aborted records, markers or compacted-away rows), uncompressed, of the
  topic's latest schema (a column an older tiered schema lacks: nulls), one frame per run
  of equal timestamps for a typed topic (its records' timestamp is the frame's) and at most
  ``_FRAME_ROWS`` rows; ``next_fetch_offset`` = past the last offset answered (``stop``,
  or the first row left out by ``max_bytes``), so a gap at the end is crossed too;
- ``high_watermark`` = the tier's end, ``log_start_offset`` = the tier's start;
- no aborted transactions: the tier holds committed records only (``read_committed``
  holds whatever the request's isolation);
- a request with a projection or a row filter (the data listener's pushdown block, as on
  FETCH) is answered with an Arrow IPC stream of the selected rows, made by the same
  ``pushdown.Pushdown`` the brokers' Fetch uses: the tier's rows are filtered on the broker,
  not after crossing the network;
- ``OFFSET_OUT_OF_RANGE`` when the tier does not hold ``fetch_offset`` (below its start,
  at or past its end, nothing tiered, or a topic without ``remote.storage.enable``): then
  ``log_start_offset``/``high_watermark`` still say what the tier holds, so the reader can
  tell records lost from both (below the tier's start) from ones the brokers hold;
- ``TIER_UNAVAILABLE`` (retriable) when the broker's TIERED frame says the tier holds the
  offset and the Delta table cannot be read or does not hold it: never answered as empty.

Only the leader answers (``NotLeaderError`` otherwise), as for FETCH.  The window adapts to
the partition's bytes per row (the first read takes ``_FIRST_WINDOW`` offsets), so one
answer reads about ``max_bytes`` from the table and never a whole large partition.

Thread-safety: ``collect`` may be called from many threads; the tables are
``tier_tables.TierTables``'.
"""
from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa

from spark_log import frame
from spark_log.errors import OffsetOutOfRangeError, SparkLogError, TierUnavailableError
from spark_log.proto import broker_pb2 as pb

from brokers.metrics.counters import BrokerCounters

from .errors import to_pb
from .partition_manager import PartitionManager
from .pushdown import Pushdown
from .tier_tables import TierTables
from .wire import ARROW_STREAM, RECORDS, FetchPart

__all__ = ["TierFetchHandler", "tier_frames"]

log = logging.getLogger(__name__)

_FIRST_WINDOW = 1024          # offsets of a partition's first tier read (bytes per row unknown yet)
_MAX_WINDOW = 1 << 16         # offsets of one tier read at most
_FRAME_ROWS = 8192            # rows of one answered frame at most
_DEFAULT_MAX_BYTES = 16 << 20


def tier_frames(rows: pa.Table, *, schema: pa.Schema, schema_id: int, typed: bool,
                max_bytes: int) -> tuple[list[bytes], int | None]:
    """Tier ``rows`` (the Delta table's columns, offset order) as version-2 frames of
    ``schema``, until ``max_bytes`` (at least one frame).  Returns the frames and the offset
    of the first row left out (None: every row is in a frame)."""
    n = rows.num_rows
    if n == 0:
        return [], None
    offsets = rows.column("offset").to_numpy().astype(np.int64)
    stamps = rows.column("timestamp").cast(pa.timestamp("ms")).cast(pa.int64()).fill_null(pa.scalar(0, pa.int64())).to_numpy()
    arrays = []
    for field in schema:
        if field.name == "timestamp":
            arrays.append(rows.column("timestamp").cast(field.type))
        elif field.name in rows.column_names:
            arrays.append(rows.column(field.name).cast(field.type))
        else:   # a column an older schema of the tier lacks
            arrays.append(pa.nulls(n, field.type))
    data = pa.Table.from_arrays(arrays, schema=schema)
    # frame boundaries: every _FRAME_ROWS rows, and (typed topics) where the timestamp changes
    cuts = set(range(0, n, _FRAME_ROWS))
    if typed:
        cuts.update((np.flatnonzero(np.diff(stamps) != 0) + 1).tolist())
    bounds = sorted(cuts) + [n]
    out: list[bytes] = []
    size = 0
    for lo, hi in zip(bounds, bounds[1:]):
        if out and size >= max_bytes:
            return out, int(offsets[lo])
        base = int(offsets[lo])
        deltas = offsets[lo:hi] - base
        batch = data.slice(lo, hi - lo).combine_chunks().to_batches()[0]
        chunk = stamps[lo:hi]
        encoded = frame.encode_v2(base_offset=base, last_offset_delta=int(deltas[-1]), deltas=deltas,
                                  message=frame.ipc_message(batch, frame.Codec.NONE), partition_leader_epoch=0,
                                  first_timestamp=int(chunk[0]), max_timestamp=int(chunk.max()),
                                  schema_id=schema_id)
        out.append(encoded)
        size += len(encoded)
    return out, None


class TierFetchHandler:
    """Answers ``FETCH_TIER`` (module docstring) from the tier at ``location``."""

    def __init__(self, manager: PartitionManager, *, location: str,
                 storage_options: dict[str, str] | None = None, counters: BrokerCounters | None = None) -> None:
        self.manager = manager
        self.counters = counters   # tier reads count in the topic's records and bytes out, as Fetch's
        self.location = location
        self.storage_options = storage_options
        self._tables = TierTables(location, storage_options)
        self._bytes_per_row: dict[tuple[str, int], float] = {}

    def collect(self, request: pb.FetchRequest) -> list[FetchPart]:
        """One ``(result, field, payload)`` per requested partition, in request order: stored-
        format frames (``RECORDS``), or an Arrow stream of the selected rows (``ARROW_STREAM``)
        when the request projects or filters."""
        budget = request.max_bytes or _DEFAULT_MAX_BYTES
        parts: list[FetchPart] = []
        pushdowns: dict[str, Pushdown] = {}
        for wanted in request.partitions:
            result = pb.FetchPartitionResult(topic=wanted.topic, partition=wanted.partition,
                                             next_fetch_offset=wanted.fetch_offset)
            payload: bytes | None = None
            field = RECORDS
            try:
                payload = self._read(wanted, result, min(budget, wanted.partition_max_bytes or budget))
                if payload and (request.project or request.row_filter):
                    pushdown = pushdowns.get(wanted.topic)
                    if pushdown is None:
                        pushdown = pushdowns[wanted.topic] = self._pushdown(request, wanted.topic)
                    payload, _ = pushdown.apply(payload, fetch_offset=wanted.fetch_offset, partition=wanted.partition)
                    field = ARROW_STREAM
            except SparkLogError as exc:
                result.error.CopyFrom(to_pb(exc))
                payload = None
            except Exception as exc:  # noqa: BLE001 - a tier that cannot be read is a typed, retriable error
                log.exception("%s-%d: reading the Delta tier failed", wanted.topic, wanted.partition)
                result.error.CopyFrom(to_pb(TierUnavailableError(
                    f"{wanted.topic}-{wanted.partition}: reading the Delta tier failed on broker "
                    f"{self.manager.broker_id}: {exc}")))
                payload = None
            if payload:
                budget = max(0, budget - len(payload))
                if self.counters is not None and result.next_fetch_offset > wanted.fetch_offset:
                    self.counters.fetched(wanted.topic, result.next_fetch_offset - wanted.fetch_offset, len(payload))
            parts.append((result, field, payload))
        return parts

    def _pushdown(self, request: pb.FetchRequest, topic: str) -> Pushdown:
        image = self.manager.image.topics.get(topic)
        if image is None:
            raise TierUnavailableError(f"{topic}: the topic is not known on this broker yet")
        return Pushdown(project=request.project, columns=list(request.columns), row_filter=request.row_filter,
                        topic=image)

    def _read(self, wanted: pb.FetchPartition, result: pb.FetchPartitionResult, max_bytes: int) -> bytes | None:
        topic, index, position = wanted.topic, wanted.partition, wanted.fetch_offset
        partition = self.manager.get(topic, index)   # the leader only: NotLeaderError names it
        status = partition.tier_status()
        start, end = status.tier_start, status.tiered_end
        result.log_start_offset, result.high_watermark = start, end
        if not (status.remote_storage_enable and start <= position < end):
            raise OffsetOutOfRangeError(f"{topic}-{index}: the Delta tier holds [{start}, {end}), not offset {position}")
        image = self.manager.image.topics.get(topic)
        if image is None or image.schema is None:
            raise TierUnavailableError(f"{topic}-{index}: the topic's schema is not known on this broker yet")
        key = (topic, index)
        per_row = self._bytes_per_row.get(key)
        window = _FIRST_WINDOW if per_row is None else int(max(1, min(_MAX_WINDOW, max_bytes // max(per_row, 1.0))))
        stop = min(end, position + window, wanted.max_offset if wanted.max_offset > 0 else end)
        table, lock = self._tables.get(topic, partition.topic_id)
        with lock:
            try:
                rows = table.read(index, position, stop)
            except TierUnavailableError:
                held = table.range(index)
                if not held.empty and held.start > position:   # tier retention ran before the brokers were told
                    result.log_start_offset = held.start
                    raise OffsetOutOfRangeError(f"{topic}-{index}: the Delta tier now starts at {held.start}, past "
                                                f"offset {position}") from None
                raise
        if rows.num_rows:
            self._bytes_per_row[key] = max(1.0, rows.nbytes / rows.num_rows)
        frames, left_out = tier_frames(rows, schema=image.schema, schema_id=image.schema_id,
                                       typed=image.kind == "typed", max_bytes=max_bytes)
        result.next_fetch_offset = stop if left_out is None else left_out
        return b"".join(frames) if frames else None

    def close(self) -> None:
        self._tables.clear()
