"""A partition replica's directory marker: ``<data_dir>/<topic>-<partition>/partition.metadata``.

The file holds ``{"topic", "partition", "topic_id"}`` as JSON.  The broker only ever deletes
directories that have one (``brokers.server.strays``, ``PartitionManager``), and a directory
whose topic id differs from the image's belongs to an older topic of the same name.
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["METADATA_FILE", "read_topic_id", "write_metadata"]

METADATA_FILE = "partition.metadata"


def read_topic_id(directory: Path) -> str | None:
    """The topic id a partition directory belongs to, or None if it is not one of ours."""
    try:
        return str(json.loads((directory / METADATA_FILE).read_text())["topic_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_metadata(directory: Path, *, topic: str, partition: int, topic_id: str) -> None:
    """Mark ``directory`` (created if missing) as a replica of ``topic_id``, unless it
    already names a topic id."""
    directory.mkdir(parents=True, exist_ok=True)
    if read_topic_id(directory) is None:
        (directory / METADATA_FILE).write_text(json.dumps({"topic": topic, "partition": partition, "topic_id": topic_id}))
