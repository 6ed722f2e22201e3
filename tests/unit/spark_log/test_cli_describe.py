"""``spark_log._cli_describe``: the describe table and JSON (pure formatting) and the
``PartitionDescription`` flags computed from a wire description."""
from __future__ import annotations

import json

from spark_log._admin import PartitionDescription, _describe
from spark_log._cli_describe import partition_json, partition_table, status_of
from spark_log.proto import broker_pb2 as pb

HEALTHY = PartitionDescription(0, 1, 4, (1, 2, 3), (1, 2, 3), high_watermark=50, log_start_offset=0,
                               last_stable_offset=50, log_end_offsets={1: 50, 2: 50, 3: None})
SHRUNK = PartitionDescription(1, 2, 7, (2, 3, 1), (2, 1), high_watermark=9, log_start_offset=0,
                              last_stable_offset=9, log_end_offsets={2: 12, 3: 4, 1: 9}, under_replicated=True)
OFFLINE = PartitionDescription(2, None, 3, (3,), (3,), offline=True)


def test_flags_come_from_the_committed_view() -> None:
    message = pb.TopicDescription(name="t", partitions=[
        pb.PartitionMeta(partition=0, leader_id=1, leader_epoch=2, replicas=[1, 2, 3], isr=[1, 2, 3]),
        pb.PartitionMeta(partition=1, leader_id=2, leader_epoch=2, replicas=[2, 3, 1], isr=[2]),
        pb.PartitionMeta(partition=2, leader_id=-1, leader_epoch=5, replicas=[3], isr=[3]),
    ])
    parts = _describe(message).partitions
    assert [(p.under_replicated, p.offline) for p in parts.values()] == [(False, False), (True, False), (False, True)]
    assert all(p.high_watermark is None and p.log_end_offsets is None for p in parts.values())


def test_status_words() -> None:
    assert [status_of(p) for p in (HEALTHY, SHRUNK, OFFLINE)] == ["", "UNDER-REPLICATED", "OFFLINE"]
    both = PartitionDescription(3, None, 1, (1, 2), (1,), under_replicated=True, offline=True)
    assert status_of(both) == "OFFLINE UNDER-REPLICATED"


def test_table_is_aligned_and_marks_unknowns() -> None:
    lines = partition_table([("t", HEALTHY), ("t", SHRUNK), ("t", OFFLINE)], with_topic=False)
    assert lines[0].split() == ["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "HW", "LOG", "END", "OFFSETS",
                                "STATUS"]
    assert lines[1].split() == ["0", "1", "4", "1,2,3", "1,2,3", "50", "1:50", "2:50", "3:?"]
    assert lines[2].split() == ["1", "2", "7", "2,3,1", "2,1", "9", "2:12", "3:4", "1:9", "UNDER-REPLICATED"]
    assert lines[3].split() == ["2", "-", "3", "3", "3", "-", "-", "OFFLINE"]
    column = lines[0].index("HW")
    assert [line[column:column + 2].strip() for line in lines[1:]] == ["50", "9", "-"]


def test_table_with_topic_column() -> None:
    lines = partition_table([("alpha", SHRUNK), ("b", OFFLINE)], with_topic=True)
    assert lines[0].split()[:2] == ["TOPIC", "PARTITION"]
    assert [line.split()[:2] for line in lines[1:]] == [["alpha", "1"], ["b", "2"]]


def test_json_round_trips_with_string_broker_keys_and_nulls() -> None:
    encoded = json.loads(json.dumps([partition_json(SHRUNK, "t"), partition_json(OFFLINE, "t")]))
    assert encoded[0] == {"topic": "t", "partition": 1, "leader": 2, "leader_epoch": 7, "replicas": [2, 3, 1],
                          "isr": [2, 1], "high_watermark": 9, "log_start_offset": 0, "last_stable_offset": 9,
                          "log_end_offsets": {"2": 12, "3": 4, "1": 9}, "under_replicated": True, "offline": False}
    assert encoded[1]["leader"] is None and encoded[1]["log_end_offsets"] is None and encoded[1]["offline"] is True
