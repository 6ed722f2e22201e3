"""What the cleaner needs to know about the records of one stored frame.

``KeySpec`` is the topic's compaction view (kind, key columns, tombstone column, and the
schema of each schema id, from the metadata image); ``frame_records`` decodes one frame
with it into ``FrameRecords``: the decoded batch, each record's offset
(``spark_log.frame.record_offsets``: version-2 frames have gaps), compaction key
(``spark_log.compaction.record_keys``; null for a bytes record without a key), whether it
is a tombstone, and its timestamp (the ``timestamp`` column of a bytes topic; the frame's
timestamp for typed topics and for ``LogAppendTime`` frames, whose header holds the append
time).

Thread-safety: pure functions over the caller's buffers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from spark_log.compaction import has_keys, record_keys, tombstones
from spark_log.errors import CorruptRecordError
from spark_log.frame import ATTR_LOG_APPEND_TIME, FrameHeader, decode_batch, record_offsets

__all__ = ["KeySpec", "FrameRecords", "frame_records"]


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
    batch: pa.RecordBatch
    offsets: npt.NDArray[np.int64]
    keys: pa.Array[Any]
    keyed: npt.NDArray[np.bool_]
    tombstones: npt.NDArray[np.bool_]
    timestamps: npt.NDArray[np.int64]


def frame_records(frame: memoryview, header: FrameHeader, spec: KeySpec) -> FrameRecords:
    """Decode the records of one data frame (``frame`` holds exactly it).  Raises
    ``CorruptRecordError`` for an unknown schema id or a damaged body."""
    schema = spec.schema_for(header.schema_id)
    if schema is None:
        raise CorruptRecordError(f"frame at offset {header.base_offset} has schema id {header.schema_id}, "
                                 "which the topic does not know")
    batch = decode_batch(frame, schema)
    offsets = record_offsets(frame, header)
    keys = record_keys(batch, kind=spec.kind, key_columns=spec.key_columns, schema=schema)
    marks = tombstones(batch, kind=spec.kind, tombstone_column=spec.tombstone_column)
    n = batch.num_rows
    if header.attributes & ATTR_LOG_APPEND_TIME or "timestamp" not in batch.schema.names:
        stamp = header.max_timestamp if header.attributes & ATTR_LOG_APPEND_TIME else header.first_timestamp
        times = np.full(n, stamp, dtype=np.int64)
    else:
        column = batch.column("timestamp").cast(pa.timestamp("ms")).cast(pa.int64())
        times = np.asarray(column.fill_null(header.first_timestamp).to_numpy(zero_copy_only=False), dtype=np.int64)
    return FrameRecords(batch, offsets, keys, has_keys(keys), marks, times)
