"""Read a partition replica's records straight from a node's segment files (tests only).

The broker holds the log directory's lock, so this reads the ``<base>.log`` files without
``PartitionLog``: whole frames in order, a torn tail (a frame still being written) is
ignored.  Returns ``[(offset, value), ...]`` for a bytes topic, offsets as the frames carry
them (compacted frames have gaps inside; frames compaction emptied hold nothing).
"""
from __future__ import annotations

from pathlib import Path

from spark_log.frame import HEADER_SIZE, decode_batch, parse_header, record_offsets
from spark_log.schemas import BYTES_SCHEMA

__all__ = ["read_replica", "replica_dir"]


def replica_dir(node_dir: Path, topic: str, partition: int) -> Path:
    return Path(node_dir) / f"{topic}-{partition}"


def read_replica(directory: Path) -> list[tuple[int, bytes | None]]:
    records: list[tuple[int, bytes | None]] = []
    if not directory.exists():
        return records
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
            if header.record_count and not header.is_control:
                batch = decode_batch(data[position:end], BYTES_SCHEMA)
                offsets = record_offsets(data, header, position).tolist()
                records.extend(zip(offsets, batch.column("value").to_pylist()))
            position = end
    return records
