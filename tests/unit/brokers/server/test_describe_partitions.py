"""``DescribePartitionsHandler`` over a real ``PartitionManager`` (real logs on disk).

The metadata image is built by hand (this broker is 1; brokers 2 and 3 are its followers
or lead other partitions); follower positions reach the leader through
``Partition.answer_follower_fetch``, as the leader-fetch path records them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pytest

from brokers.metadata.image import BrokerInfo, MetadataImage, PartitionInfo, SchemaVersion, TopicImage, frozen_map
from brokers.partition import FollowerFetch
from brokers.server.describe_partitions import DescribePartitionsHandler
from brokers.server.partition_manager import PartitionManager
from brokers.server.produce import validate_frames
from spark_log.clock import ManualClock
from spark_log.errors import ErrorCode, InvalidRequestError
from spark_log.frame import encode_batch
from spark_log.proto import broker_pb2 as pb
from spark_log.schemas import BYTES_SCHEMA, SchemaHistory

ME = 1


def _image(topics: dict[str, dict[int, PartitionInfo]]) -> MetadataImage:
    brokers = {b: BrokerInfo(broker_id=b, incarnation=f"i{b}", broker_epoch=b, address=f"127.0.0.1:{9000 + b}")
               for b in (1, 2, 3)}
    history = SchemaHistory.bytes_topic()
    schemas = (SchemaVersion(schema_id=0, schema=history.latest),)
    return MetadataImage(
        brokers=frozen_map(brokers),
        topics=frozen_map({name: TopicImage(name=name, topic_id=f"id-{name}", partitions=frozen_map(parts),
                                            schemas=schemas)
                           for name, parts in topics.items()}),
        offset=10, epoch=1)


@pytest.fixture()
def clock() -> ManualClock:
    return ManualClock(monotonic_ms=1_000)


@pytest.fixture()
def manager(tmp_path: Path, clock: ManualClock) -> Iterator[PartitionManager]:
    manager = PartitionManager(broker_id=ME, data_dir=tmp_path, clock=clock)
    image = _image({
        "t": {0: PartitionInfo(replicas=(1, 2, 3), isr=(1, 2), leader=1, leader_epoch=4, partition_epoch=7),
              1: PartitionInfo(replicas=(2, 1, 3), isr=(2, 1, 3), leader=2, leader_epoch=2, partition_epoch=3),
              2: PartitionInfo(replicas=(3, 2), isr=(3,), leader=None, leader_epoch=5, partition_epoch=9)},
    })
    manager.publish(None, image)
    manager.reconcile(image)
    try:
        yield manager
    finally:
        for partition in manager.hosted():
            partition.close()


def _append(manager: PartitionManager, topic: str, index: int, count: int) -> None:
    partition = manager.get(topic, index)
    batch = pa.record_batch([pa.array([None] * count, pa.binary()), pa.array([b"v"] * count),
                             pa.array([[]] * count, BYTES_SCHEMA.field("headers").type),
                             pa.array([0] * count, pa.timestamp("ms"))], schema=BYTES_SCHEMA)
    data = memoryview(bytes(encode_batch(batch, schema_id=0)))
    partition.append_as_leader(validate_frames(data, manager.image.topics[topic]), gap_timeout_ms=1000)


def _fetched(manager: PartitionManager, topic: str, index: int, replica: int, fetch_offset: int) -> None:
    partition = manager.get(topic, index)
    partition.answer_follower_fetch(FollowerFetch(replica, fetch_offset, current_leader_epoch=-1, last_fetched_epoch=-1),
                                    max_bytes=0)


def _request(*entries: tuple[str, list[int]]) -> pb.DescribePartitionsRequest:
    return pb.DescribePartitionsRequest(topics=[pb.DescribePartitionsTopic(topic=t, partitions=p) for t, p in entries])


def _progress(state: pb.PartitionState) -> dict[int, tuple[int, int]]:
    return {p.broker_id: (p.log_end_offset, p.caught_up_ms_ago) for p in state.replicas_progress}


def test_leader_reports_its_live_state(manager: PartitionManager, clock: ManualClock) -> None:
    handler = DescribePartitionsHandler(manager)
    _append(manager, "t", 0, 5)
    _fetched(manager, "t", 0, 3, 2)       # out of the ISR, behind
    clock.advance(300)
    _fetched(manager, "t", 0, 2, 5)       # the ISR follower caught up: HW = 5
    clock.advance(700)
    _append(manager, "t", 0, 3)           # leader LEO 8, HW stays 5 until follower 2 fetches again

    (state,) = handler.handle(_request(("t", [0]))).partitions
    assert state.error.code == 0
    assert (state.topic, state.partition, state.leader_id) == ("t", 0, ME)
    assert (state.leader_epoch, state.partition_epoch) == (4, 7)
    assert list(state.replicas) == [1, 2, 3] and list(state.isr) == [1, 2] and not state.pending_isr
    assert (state.log_start_offset, state.high_watermark, state.last_stable_offset) == (0, 5, 5)
    assert state.log_end_offset == 8
    assert state.log_size_bytes == manager.get("t", 0).log_size_bytes() > 0  # the leader's log on disk
    # follower 3 never caught up: the leader counts it as caught up when it became leader (t=1000)
    assert _progress(state) == {1: (8, 0), 2: (5, 700), 3: (2, 1000)}


def test_a_follower_that_never_fetched_shows_minus_one(manager: PartitionManager) -> None:
    (state,) = DescribePartitionsHandler(manager).handle(_request(("t", [0]))).partitions
    assert _progress(state) == {1: (0, 0), 2: (-1, -1), 3: (-1, -1)}
    assert state.high_watermark == 0 and state.log_end_offset == 0 and state.log_size_bytes == 0


def test_not_leader_names_the_leader_and_no_leader_says_so(manager: PartitionManager) -> None:
    answer = DescribePartitionsHandler(manager).handle(_request(("t", [1, 2])))
    led_elsewhere, offline = answer.partitions
    assert led_elsewhere.error.code == ErrorCode.NOT_LEADER
    assert led_elsewhere.error.leader_address == "127.0.0.1:9002" and led_elsewhere.error.leader_id == 2
    assert led_elsewhere.high_watermark == -1 and not led_elsewhere.replicas_progress
    assert offline.error.code == ErrorCode.NOT_LEADER and offline.error.leader_address == ""
    assert offline.leader_id == -1


def test_a_topic_without_partitions_listed_means_all_of_them(manager: PartitionManager) -> None:
    answer = DescribePartitionsHandler(manager).handle(_request(("t", []), ("t", [0])))
    assert [(s.partition, s.error.code) for s in answer.partitions] == [
        (0, 0), (1, ErrorCode.NOT_LEADER), (2, ErrorCode.NOT_LEADER)]


def test_unknown_topic_or_partition_is_a_per_partition_error(manager: PartitionManager) -> None:
    answer = DescribePartitionsHandler(manager).handle(_request(("nope", []), ("t", [7]), ("t", [0])))
    codes = [(s.topic, s.partition, s.error.code) for s in answer.partitions]
    assert codes == [("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("t", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                     ("t", 0, 0)]


@pytest.mark.parametrize("request_", [
    pb.DescribePartitionsRequest(),
    _request(("", [0])),
    _request(("t", [0, -1])),
], ids=["no-topics", "empty-name", "negative-partition"])
def test_a_malformed_request_is_refused_whole(manager: PartitionManager, request_: pb.DescribePartitionsRequest) -> None:
    with pytest.raises(InvalidRequestError):
        DescribePartitionsHandler(manager).handle(request_)


def test_a_removed_replica_is_a_retriable_error(manager: PartitionManager) -> None:
    manager.get("t", 0).close()
    (state,) = DescribePartitionsHandler(manager).handle(_request(("t", [0]))).partitions
    assert state.error.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
