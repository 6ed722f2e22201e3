"""Frames and logs for storage tests (shared by unit, property and fault tests)."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from spark_log.config import TopicConfig
from spark_log.frame import encode_batch, iter_frames

BASE_TS = 1_700_000_000_000


def make_frame(records: int = 3, *, value_bytes: int = 20, ts: int = BASE_TS, tag: int = 0, compression: str | None = None) -> bytes:
    """One frame of ``records`` records; values carry ``tag`` and the record index."""
    values = [f"{tag}:{i}:".encode().ljust(value_bytes, b".") for i in range(records)]
    batch = pa.record_batch({"value": pa.array(values, pa.binary())})
    return encode_batch(batch, compression=compression, timestamp_ms=ts)


def small_config(**overrides: object) -> TopicConfig:
    values: dict[str, object] = dict(segment_bytes=4096, index_interval_bytes=256, retention_ms=-1)
    values.update(overrides)
    return TopicConfig(**values)  # type: ignore[arg-type]


def read_all(log: object, start: int | None = None, *, max_bytes: int = 1 << 20) -> list[tuple[int, bytes]]:
    """Every frame from ``start`` (default: log start) as ``(base_offset, body bytes)``."""
    offset = log.log_start_offset if start is None else start  # type: ignore[attr-defined]
    out: list[tuple[int, bytes]] = []
    while offset < log.log_end_offset:  # type: ignore[attr-defined]
        result = log.read(offset, max_bytes=max_bytes, verify=True)  # type: ignore[attr-defined]
        data = bytes(result.data)
        assert result.first_offset <= offset < result.next_offset
        for position, header in iter_frames(data):
            out.append((header.base_offset, data[position + 64: position + header.frame_length]))
        offset = result.next_offset
    return out


def body(frame: bytes) -> bytes:
    return frame[64:]


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())
