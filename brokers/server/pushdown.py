"""Broker-side projection and row filtering of stored frames (pyarrow.compute).

``Pushdown(request, topic)`` is built once per Fetch; ``apply(frames, ...)`` turns the
stored frames of one partition into an Arrow IPC stream of the selected rows:

- each frame is decoded with the schema of its own schema id;
- the filter (a Substrait expression bound by the client to the topic's columns plus
  ``offset``, ``timestamp``, ``partition``; see ``spark_log._pushdown``) is evaluated on a
  batch assembled *by name* in the bound schema's order: stored columns, the computed
  ``offset``/``timestamp``/``partition`` columns, and nulls for columns the frame's (older)
  schema lacks;
- the output has the projected columns (typed as in the topic's current schema), then
  ``offset`` (int64) and ``timestamp`` (timestamp[ms]) unless projected already;
- a record's timestamp (output and filter alike) is its ``timestamp`` column (bytes
  topics), else the frame's; a ``LogAppendTime`` frame's records all take the append time
  of its header (its column keeps the producer's CreateTime: ``frame.with_append_time``).

Records below ``fetch_offset`` in the first frame are skipped.  Control frames and frames
without records (compaction emptied them) are skipped; record offsets come from the
frame (``spark_log.frame.record_offsets``: gaps inside compacted frames).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from brokers.metadata.image import TopicImage
from spark_log.filters import deserialize_filter
from spark_log.errors import CorruptRecordError, InvalidRequestError, SchemaMismatchError
from spark_log.frame import ATTR_CONTROL, ATTR_LOG_APPEND_TIME, FrameHeader, decode_batch, iter_frames, record_offsets
from spark_log.frame import with_append_time

__all__ = ["Pushdown"]

_TS = pa.timestamp("ms")


class Pushdown:
    """Projection + filter for one topic of one Fetch request."""

    def __init__(self, *, project: bool, columns: list[str], row_filter: bytes, topic: TopicImage) -> None:
        schema = topic.schema
        if schema is None:
            raise SchemaMismatchError(f"topic {topic.name!r} has no schema yet")
        self.topic = topic
        if project:
            unknown = [c for c in columns if schema.get_field_index(c) < 0]
            if unknown:
                raise InvalidRequestError(f"unknown columns {unknown} for topic {topic.name!r}; it has {schema.names}")
            self.columns = list(columns)
        else:
            self.columns = list(schema.names)
        self.expression: pc.Expression | None = None
        self.bound: pa.Schema | None = None
        if row_filter:
            self.expression, self.bound = deserialize_filter(row_filter)
        fields = [schema.field(c) for c in self.columns]
        if "offset" not in self.columns:
            fields.append(pa.field("offset", pa.int64()))
        if "timestamp" not in self.columns:
            fields.append(pa.field("timestamp", _TS))
        self.output_schema = pa.schema(fields)

    def apply(self, data: bytes | memoryview, *, fetch_offset: int, partition: int,
              aborted: Sequence[tuple[int, int, int]] = ()) -> tuple[bytes, int]:
        """``(IPC stream bytes, rows)`` of the selected rows of ``data`` (whole frames),
        without the records of the ``aborted`` transactions ((producer id, first offset,
        abort marker offset): a read_committed fetch)."""
        buffer = pa.py_buffer(data)
        sink = pa.BufferOutputStream()
        rows = 0
        with ipc.new_stream(sink, self.output_schema) as writer:
            for position, header in iter_frames(memoryview(buffer), verify=False):
                if header.attributes & ATTR_CONTROL or header.next_offset <= fetch_offset or not header.record_count:
                    continue
                if header.is_transactional and any(pid == header.producer_id and first <= header.base_offset <= last
                                                   for pid, first, last in aborted):
                    continue
                out = self._frame(buffer.slice(position, header.frame_length), header, fetch_offset, partition)
                if out is not None and out.num_rows:
                    writer.write_batch(out)
                    rows += out.num_rows
        return sink.getvalue().to_pybytes(), rows

    def _frame(self, frame: pa.Buffer, header: FrameHeader, fetch_offset: int, partition: int) -> pa.RecordBatch | None:
        schema = self.topic.schema_by_id(header.schema_id)
        if schema is None:
            raise CorruptRecordError(f"stored frame at offset {header.base_offset} has unknown schema id {header.schema_id}")
        batch = decode_batch(frame, schema)
        if header.attributes & ATTR_LOG_APPEND_TIME:   # its column keeps the producer's CreateTime
            batch = with_append_time(batch, header.max_timestamp)
        n = batch.num_rows
        numbers = record_offsets(memoryview(frame), header)  # version-2 (compacted) frames: gaps inside
        offsets = pa.array(numbers)
        if "timestamp" in batch.schema.names:
            timestamps = batch.column("timestamp").cast(_TS)
        else:
            timestamps = pa.array(np.full(n, header.first_timestamp, dtype=np.int64)).cast(_TS)
        skip = int(np.searchsorted(numbers, fetch_offset)) if header.base_offset < fetch_offset else 0
        if self.expression is not None and self.bound is not None:
            columns = []
            for field in self.bound:
                columns.append(self._column(batch, field, offsets, timestamps, partition, n))
            mask = pa.RecordBatch.from_arrays(columns, schema=self.bound)
            try:
                keep = mask.filter(self.expression)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise InvalidRequestError(f"row_filter cannot be evaluated: {exc}") from None
            indices = keep.column(keep.schema.get_field_index("offset")) if "offset" in self.bound.names else None
            if indices is None:
                # the bound schema always carries offset (the client adds it); be defensive anyway
                raise InvalidRequestError("row_filter schema lacks the offset column")
            rows = np.searchsorted(numbers, indices.to_numpy(zero_copy_only=False)).astype(np.int64)
            if skip:
                rows = rows[rows >= skip]
            return self._project(batch, offsets, timestamps).take(rows)
        out = self._project(batch, offsets, timestamps)
        return out.slice(skip) if skip else out

    def _column(self, batch: pa.RecordBatch, field: pa.Field[Any], offsets: pa.Array[Any], timestamps: pa.Array[Any],
                partition: int, n: int) -> pa.Array[Any]:
        index = batch.schema.get_field_index(field.name)
        if index >= 0:
            column = batch.column(index)
        elif field.name == "offset":
            column = offsets
        elif field.name == "timestamp":
            column = timestamps
        elif field.name == "partition":
            column = pa.array(np.full(n, partition, dtype=np.int32))
        else:
            nulls: pa.Array[Any] = pa.nulls(n, field.type)
            return nulls
        if not column.type.equals(field.type):
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise InvalidRequestError(
                    f"row_filter expects column {field.name!r} as {field.type}, the topic has {column.type}") from None
        return column

    def _project(self, batch: pa.RecordBatch, offsets: pa.Array[Any], timestamps: pa.Array[Any]) -> pa.RecordBatch:
        arrays = []
        for field in self.output_schema:
            index = batch.schema.get_field_index(field.name)
            if index >= 0:
                arrays.append(batch.column(index))
            elif field.name == "offset":
                arrays.append(offsets)
            elif field.name == "timestamp":
                arrays.append(timestamps)
            else:
                arrays.append(pa.nulls(batch.num_rows, field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.output_schema)
