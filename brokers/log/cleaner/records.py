"""What the cleaner needs to know about the records of one stored frame.

``KeySpec`` is the topic's compaction view (kind, key columns, tombstone column, and the
schema of each schema id, from the metadata image); ``frame_records`` decodes one frame
with it into ``FrameRecords``: the decoded batch, each record's offset
(``spark_log.frame.record_offsets``: version-2 frames have gaps), compaction key
(``spark_log.compaction.record_keys``; null for a bytes record without a key), whether it
is a tombstone, and (on demand) its timestamp (the ``timestamp`` column of a bytes topic;
the frame's timestamp for typed topics and for ``LogAppendTime`` frames, whose header holds
the append time).  ``frame_keys`` decodes the key columns alone (the offset map's pass).
Both decode with a pass's ``BatchReader`` (frames fed to open Arrow stream readers).

Thread-safety: the functions are pure over the caller's buffers; a ``BatchReader`` belongs
to one thread (one pass).
"""
from __future__ import annotations

import functools
import io
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.ipc as ipc

from spark_log.compaction import has_keys, record_keys, tombstones
from spark_log.errors import CorruptRecordError
from spark_log.frame import ATTR_LOG_APPEND_TIME, FrameHeader, decode_batch, frame_body, record_offsets

__all__ = ["KeySpec", "FrameRecords", "BatchReader", "frame_records", "frame_keys", "timestamps_of"]


@dataclass(frozen=True, slots=True)
class KeySpec:
    """A topic's compaction view.  ``schema_for(schema_id)`` gives the schema a frame was
    written with (None: unknown, which makes the clean fail rather than guess)."""

    kind: str
    key_columns: tuple[str, ...]
    tombstone_column: str
    schema_for: Callable[[int], pa.Schema | None]


@dataclass(frozen=True, slots=True)
class FrameRecords:
    header: FrameHeader
    batch: pa.RecordBatch
    offsets: npt.NDArray[np.int64]
    keys: pa.Array[Any]
    keyed: npt.NDArray[np.bool_]
    tombstones: npt.NDArray[np.bool_]

    def timestamps(self) -> npt.NDArray[np.int64]:
        """Each record's timestamp (ms): ``timestamps_of(self.batch, self.header)``."""
        return timestamps_of(self.batch, self.header)


def timestamps_of(batch: pa.RecordBatch, header: FrameHeader) -> npt.NDArray[np.int64]:
    """The timestamp (ms) of each record of ``batch`` (the frame's records, or rows taken from
    them): the ``timestamp`` column, or the frame's (typed topics; ``LogAppendTime``: the
    append time in the header)."""
    if header.attributes & ATTR_LOG_APPEND_TIME or "timestamp" not in batch.schema.names:
        stamp = header.max_timestamp if header.attributes & ATTR_LOG_APPEND_TIME else header.first_timestamp
        return np.full(batch.num_rows, stamp, dtype=np.int64)
    column = batch.column("timestamp").cast(pa.timestamp("ms")).cast(pa.int64())
    return np.asarray(column.fill_null(header.first_timestamp).to_numpy(zero_copy_only=False), dtype=np.int64)


def _schema_of(header: FrameHeader, spec: KeySpec) -> pa.Schema:
    schema = spec.schema_for(header.schema_id)
    if schema is None:
        raise CorruptRecordError(f"frame at offset {header.base_offset} has schema id {header.schema_id}, "
                                 "which the topic does not know")
    return schema


def frame_records(frame: memoryview, header: FrameHeader, spec: KeySpec,
                  reader: BatchReader | None = None) -> FrameRecords:
    """Decode the records of one data frame (``frame`` holds exactly it), with the pass's
    ``reader`` (a new one if None).  Raises ``CorruptRecordError`` for an unknown schema id or
    a damaged body."""
    schema = _schema_of(header, spec)
    if header.record_count:
        batch = (reader or BatchReader()).read(frame, header, schema, None)
    else:
        batch = decode_batch(frame, schema)
    offsets = record_offsets(frame, header)
    keys = record_keys(batch, kind=spec.kind, key_columns=spec.key_columns, schema=schema)
    marks = tombstones(batch, kind=spec.kind, tombstone_column=spec.tombstone_column)
    return FrameRecords(header, batch, offsets, keys, has_keys(keys), marks)


@functools.lru_cache(maxsize=256)
def _schema_message(schema: pa.Schema) -> bytes:
    """The IPC stream's schema message of ``schema`` (what a frame leaves out)."""
    sink = pa.BufferOutputStream()
    ipc.new_stream(sink, schema).close()
    return sink.getvalue().to_pybytes()[:-8]  # without the end-of-stream marker


class _Feed(io.RawIOBase):
    """The input of one Arrow stream reader: the schema's message first, then each frame's
    message as it is pushed (views, never copies)."""

    def __init__(self, first: bytes) -> None:
        super().__init__()
        self._view = memoryview(first)
        self._at = 0

    def readable(self) -> bool:
        return True

    def push(self, message: memoryview) -> None:
        """The next bytes the reader gets (what is left of the previous message is dropped)."""
        self._view, self._at = message, 0

    def read(self, size: int = -1) -> memoryview:
        end = len(self._view) if size is None or size < 0 else self._at + size
        out = self._view[self._at: end]
        self._at += len(out)
        return out


class BatchReader:
    """Decodes frames' Arrow messages for one pass of one thread: an Arrow stream reader per
    (schema, fields) stays open and is fed each frame's message in turn, so a frame is never
    copied (a stream of schema message + frame body was built per frame before) and a schema
    is parsed once per pass.  Buffers are decompressed on this thread: Arrow's thread pool
    costs more than it saves on one frame's few buffers, and more still on a busy machine.
    A reader that fails (a damaged frame) is dropped, so the next frame starts afresh."""

    def __init__(self) -> None:
        self._open: dict[tuple[pa.Schema, tuple[int, ...] | None], tuple[_Feed, ipc.RecordBatchStreamReader]] = {}

    def read(self, frame: memoryview, header: FrameHeader, schema: pa.Schema,
             fields: tuple[int, ...] | None) -> pa.RecordBatch:
        """The frame's batch (only ``fields``, by index, when given).  Raises
        ``CorruptRecordError`` for a body that is not one valid record batch of ``schema``."""
        key = (schema, fields)
        entry = self._open.get(key)
        try:
            if entry is None:
                feed = _Feed(_schema_message(schema))
                options = ipc.IpcReadOptions(included_fields=list(fields) if fields is not None else None,
                                             use_threads=False)
                entry = self._open[key] = feed, ipc.open_stream(pa.PythonFile(feed, mode="r"), options=options)
            entry[0].push(frame_body(frame, header))
            batch = entry[1].read_next_batch()
        except (pa.ArrowInvalid, OSError, StopIteration) as exc:
            self._open.pop(key, None)
            reason = exc if str(exc) else "no record batch"
            raise CorruptRecordError(f"frame at offset {header.base_offset} does not hold a valid Arrow batch: "
                                     f"{reason}") from None
        if batch.num_rows != header.record_count:
            raise CorruptRecordError(f"frame at offset {header.base_offset} claims {header.record_count} records, "
                                     f"holds {batch.num_rows}")
        return batch


def frame_keys(frame: memoryview, header: FrameHeader, spec: KeySpec,
               reader: BatchReader | None = None) -> tuple[pa.Array[Any], npt.NDArray[np.int64]]:
    """The compaction key and offset of every keyed record of one data frame, decoding only
    the key columns (the offset map's pass: values are never decompressed), with the pass's
    ``reader`` (a new one if None)."""
    schema = _schema_of(header, spec)
    names = ["key"] if spec.kind == "bytes" else list(spec.key_columns)
    fields = [schema.get_field_index(name) for name in names]
    if min(fields, default=-1) < 0:
        raise CorruptRecordError(f"frame at offset {header.base_offset}: its schema lacks key columns {names}")
    batch = (reader or BatchReader()).read(frame, header, schema, tuple(sorted(fields)))
    keys = record_keys(batch, kind=spec.kind, key_columns=spec.key_columns, schema=schema)
    offsets = record_offsets(frame, header)
    keyed = has_keys(keys)
    if keyed.all():
        return keys, offsets
    return keys.filter(pa.array(keyed)), offsets[keyed]
