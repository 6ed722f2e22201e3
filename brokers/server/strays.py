"""Stray replica directories: partitions that moved away from (or were deleted under) a
broker while it was down.

A running broker deletes a replica when the metadata image takes it away
(``PartitionManager.reconcile``).  A broker that was down at that moment never opens the
partition again, so its directory would stay forever (Kafka's "stray logs", KAFKA-14616).
``stray_directories`` finds them: every ``<topic>-<partition>`` directory under
``data_dir`` with a ``partition.metadata`` file (the broker deletes nothing else) that is
not hosted now and whose topic id is absent from ``image`` (deleted, or re-created under
a new id) or whose partition does not list ``broker_id`` among its replicas.

Only an image that is not stale may be trusted with this: the caller uses it once, on
the first image at or past the metadata floor (the controller's metadata offset when the
broker registered), which already holds every move made before the broker came back;
a partition re-assigned here later starts outside the ISR and copies the log again.
Pure apart from reading the directory listing and the metadata files.
"""
from __future__ import annotations

from collections.abc import Container
from pathlib import Path

from brokers.metadata.image import MetadataImage
from brokers.partition.directory import read_topic_id

__all__ = ["stray_directories"]


def stray_directories(data_dir: Path, image: MetadataImage, broker_id: int,
                      hosted: Container[tuple[str, int]]) -> list[Path]:
    strays: list[Path] = []
    if not data_dir.is_dir():
        return strays
    for directory in sorted(data_dir.iterdir()):
        if not directory.is_dir():
            continue
        topic_id = read_topic_id(directory)
        name, sep, index_text = directory.name.rpartition("-")
        if topic_id is None or not sep or not index_text.isdigit():
            continue
        index = int(index_text)
        if (name, index) in hosted:
            continue
        topic = image.topic_by_id(topic_id)
        info = topic.partitions.get(index) if topic is not None and topic.name == name else None
        if info is None or broker_id not in info.replicas:
            strays.append(directory)
    return strays
