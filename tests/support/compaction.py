"""Compaction test support: keyed frames, the model of a compacted log, and reading a log's
records back (unit, property, fault and integration tests share it).

The model (``expected``) is the contract of ``brokers/log/cleaner/plan.py``: after a plan
``(end, tombstone horizon)`` every record at or past ``end`` is still there; below ``end``
a record stays iff it has no key, or it is the latest record of its key below ``end`` and
not a tombstone whose timestamp is below the horizon.  Offsets never change.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence, TypeVar

import pyarrow as pa

from spark_log.frame import decode_batch, encode_batch, iter_frames, record_offsets
from spark_log.schemas import BYTES_SCHEMA

__all__ = ["Record", "collect", "keyed_batch", "keyed_frame", "expected", "frames_records", "log_records"]

T = TypeVar("T")


def collect(into: list[T], items: Iterable[T]) -> bool:
    """Append ``items`` to ``into``; True (for ``wait_until(lambda: collect(...) and done)``)."""
    into.extend(items)
    return True


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    key: bytes | None
    value: bytes | None  # None: a tombstone
    timestamp: int


def keyed_batch(keys: Sequence[bytes | None], values: Sequence[bytes | None], timestamps: Sequence[int]) -> pa.RecordBatch:
    n = len(keys)
    return pa.record_batch([pa.array(list(keys), pa.binary()), pa.array(list(values), pa.binary()),
                            pa.nulls(n, BYTES_SCHEMA.field("headers").type),
                            pa.array(list(timestamps), pa.int64()).cast(pa.timestamp("ms"))], schema=BYTES_SCHEMA)


def keyed_frame(keys: Sequence[bytes | None], values: Sequence[bytes | None], *, timestamp: int | Sequence[int],
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                compression: str | None = "lz4", transactional: bool = False) -> bytes:
    stamps = [timestamp] * len(keys) if isinstance(timestamp, int) else list(timestamp)
    return encode_batch(keyed_batch(keys, values, stamps), compression=compression, producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=base_sequence, transactional=transactional)


def expected(records: Iterable[Record], *, end: int, tombstone_horizon_ms: int) -> list[Record]:
    """The model: what a log holding ``records`` holds after a plan (module docstring)."""
    ordered = sorted(records, key=lambda r: r.offset)
    latest: dict[bytes, int] = {}
    for record in ordered:
        if record.key is not None and record.offset < end:
            latest[record.key] = record.offset
    out = []
    for record in ordered:
        if record.offset >= end or record.key is None:
            out.append(record)
        elif latest[record.key] == record.offset and not (record.value is None
                                                           and record.timestamp < tombstone_horizon_ms):
            out.append(record)
    return out


def frames_records(data: bytes | memoryview) -> list[Record]:
    """The records of a bytes topic's frames (control and empty frames hold none)."""
    out: list[Record] = []
    for position, header in iter_frames(data):
        if header.is_control or not header.record_count:
            continue
        batch = decode_batch(memoryview(data)[position: position + header.frame_length], BYTES_SCHEMA)
        offsets = record_offsets(data, header, position).tolist()
        stamps = batch.column("timestamp").cast(pa.int64()).to_pylist()
        out.extend(Record(o, k, v, int(t or 0)) for o, k, v, t in zip(offsets, batch.column("key").to_pylist(),
                                                              batch.column("value").to_pylist(), stamps))
    return out


def log_records(log: object) -> list[Record]:
    """Every record of a ``PartitionLog`` from its log start (frames CRC-checked)."""
    offset = log.log_start_offset  # type: ignore[attr-defined]
    out: list[Record] = []
    while offset < log.log_end_offset:  # type: ignore[attr-defined]
        result = log.read(offset, max_bytes=1 << 22, verify=True)  # type: ignore[attr-defined]
        if not len(result.data):
            break
        out.extend(frames_records(bytes(result.data)))
        offset = result.next_offset
    return out
