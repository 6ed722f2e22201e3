"""Stray replica directories left by a reassignment (or deletion) while a broker was down
(``brokers.server.strays``)."""
from __future__ import annotations

import json
from pathlib import Path

from brokers.metadata import records as r
from brokers.partition.directory import METADATA_FILE
from brokers.server.strays import stray_directories
from tests.unit.brokers.metadata.helpers import broker, build, topic


def replica(root: Path, name: str, topic_id: str | None) -> Path:
    directory = root / name
    directory.mkdir()
    (directory / "00000000000000000000.log").write_bytes(b"")
    if topic_id is not None:
        (directory / METADATA_FILE).write_text(json.dumps({"topic_id": topic_id}))
    return directory


def test_moved_away_deleted_and_recreated_partitions_are_strays(tmp_path: Path) -> None:
    image = build([broker(1), broker(2), *topic("a", [(1, 2), (2,)]), *topic("b", [(2,)], topic_id="new-b")])
    image = build([r.PartitionChangeRecord(topic="a", partition=0, replicas=(2,), isr=(2,), leader=2)], image)
    never = replica(tmp_path, "a-1", "id-a")  # broker 1 is not (any more) a replica of a-1 either
    moved = replica(tmp_path, "a-0", "id-a")  # moved away from broker 1
    recreated = replica(tmp_path, "b-0", "old-b")  # topic b deleted and re-created meanwhile
    deleted = replica(tmp_path, "gone-0", "id-gone")
    foreign = replica(tmp_path, "notes-0", None)  # no partition.metadata: never ours to delete
    (tmp_path / "broker.port").write_text("1")
    strays = stray_directories(tmp_path, image, 1, hosted=set())
    assert strays == [moved, never, recreated, deleted]
    assert foreign not in strays


def test_hosted_and_assigned_replicas_are_kept(tmp_path: Path) -> None:
    image = build([broker(1), broker(2), *topic("a", [(1, 2), (2, 1)])])
    replica(tmp_path, "a-0", "id-a")
    replica(tmp_path, "a-1", "id-a")
    assert stray_directories(tmp_path, image, 1, hosted={("a", 0)}) == []
    assert stray_directories(tmp_path, image, 3, hosted=set()) == [tmp_path / "a-0", tmp_path / "a-1"]
    assert stray_directories(tmp_path / "missing", image, 1, hosted=set()) == []
