"""Read a partition replica's records straight from a node's segment files (tests only).

The broker holds the log directory's lock, so this reads the ``<base>.log`` files without
``PartitionLog``: whole frames in order, a torn tail (a frame still being written) is
ignored.  Returns ``[(offset, value), ...]`` for a bytes topic, offsets as the frames carry
them (compacted frames have gaps inside; frames compaction emptied hold nothing).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from spark_log.frame import HEADER_SIZE, FrameHeader, decode_batch, marker_of, parse_header, record_offsets
from spark_log.schemas import BYTES_SCHEMA

__all__ = ["read_replica", "replica_dir", "replica_markers"]


def replica_dir(node_dir: Path, topic: str, partition: int) -> Path:
    return Path(node_dir) / f"{topic}-{partition}"


def _frames(directory: Path) -> Iterator[tuple[bytes, int, FrameHeader]]:
    """``(segment bytes, position, header)`` of every whole frame, in offset order."""
    if not directory.exists():
        return
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        position = 0
        while position + HEADER_SIZE <= len(data):
            try:
                header = parse_header(data, position)
            except Exception:  # noqa: BLE001 - a torn tail
                break
            end = position + header.frame_length
            if end > len(data) or header.frame_length <= 0:
                break
            yield data, position, header
            position = end


def read_replica(directory: Path) -> list[tuple[int, bytes | None]]:
    records: list[tuple[int, bytes | None]] = []
    for data, position, header in _frames(directory):
        if header.record_count and not header.is_control:
            batch = decode_batch(data[position:position + header.frame_length], BYTES_SCHEMA)
            offsets = record_offsets(data, header, position).tolist()
            records.extend(zip(offsets, batch.column("value").to_pylist()))
    return records


def replica_markers(directory: Path) -> list[int]:
    """The offsets of the transaction markers a replica's segment files hold."""
    return [header.base_offset for data, position, header in _frames(directory)
            if marker_of(data, header, position) is not None]
