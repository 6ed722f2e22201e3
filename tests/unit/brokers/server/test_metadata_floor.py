"""A restarted broker serves no partition until its metadata image reaches the floor
(the controller's metadata offset in its first heartbeat answer): a stale image replayed
from its own metadata log must not make it lead (and acknowledge writes to) a partition
that moved on.  Real ``PartitionManager`` with its thread, real logs on disk."""
from __future__ import annotations

from pathlib import Path

import pytest

from brokers.metadata.image import BrokerInfo, MetadataImage, PartitionInfo, SchemaVersion, TopicImage, frozen_map
from brokers.server.partition_manager import PartitionManager
from spark_log.errors import NotLeaderError
from spark_log.schemas import SchemaHistory
from tests.support.wait import wait_until

ME = 1


def _image(offset: int, leader: int) -> MetadataImage:
    brokers = {b: BrokerInfo(broker_id=b, incarnation=f"i{b}", broker_epoch=b, address=f"127.0.0.1:{9000 + b}")
               for b in (1, 2)}
    schemas = (SchemaVersion(schema_id=0, schema=SchemaHistory.bytes_topic().latest),)
    partition = PartitionInfo(replicas=(1, 2), isr=(1, 2), leader=leader, leader_epoch=offset, partition_epoch=offset)
    topic = TopicImage(name="t", topic_id="id-t", partitions=frozen_map({0: partition}), schemas=schemas)
    return MetadataImage(brokers=frozen_map(brokers), topics=frozen_map({"t": topic}), offset=offset, epoch=1)


class Floor:
    def __init__(self) -> None:
        self.value: int | None = None

    def __call__(self) -> int | None:
        return self.value


def test_stale_images_below_the_floor_are_not_served(tmp_path: Path) -> None:
    floor = Floor()
    manager = PartitionManager(broker_id=ME, data_dir=tmp_path, metadata_floor=floor)
    manager.start()
    try:
        stale = _image(offset=5, leader=ME)  # the replayed local log says: broker 1 leads t-0
        manager.publish(None, stale)
        with pytest.raises(NotLeaderError, match="catching up"):
            manager.get("t", 0)  # floor unknown: nothing is served
        floor.value = 20
        with pytest.raises(NotLeaderError, match="catching up"):
            manager.get("t", 0)  # image 5 < floor 20
        assert manager.hosted() == [] and not manager.caught_up

        manager.publish(None, _image(offset=20, leader=2))  # caught up: broker 2 leads now
        wait_until(lambda: manager.caught_up and manager.hosted(), timeout=10, message="never caught up")
        with pytest.raises(NotLeaderError) as refused:
            manager.get("t", 0)
        assert "catching up" not in refused.value.message and refused.value.leader_address == "127.0.0.1:9002"
        follower = manager.get("t", 0, leader=False)
        assert not follower.is_leader
    finally:
        manager.stop()


def test_the_floor_arriving_after_the_last_image_is_noticed(tmp_path: Path) -> None:
    floor = Floor()
    manager = PartitionManager(broker_id=ME, data_dir=tmp_path, metadata_floor=floor)
    manager.start()
    try:
        manager.publish(None, _image(offset=30, leader=ME))
        assert not manager.caught_up
        floor.value = 30  # a heartbeat answered; no new image follows
        wait_until(lambda: manager.caught_up, timeout=10, message="floor reached but not noticed")
        assert manager.get("t", 0).is_leader
    finally:
        manager.stop()


def test_without_a_floor_images_are_served_at_once(tmp_path: Path) -> None:
    manager = PartitionManager(broker_id=ME, data_dir=tmp_path)
    try:
        manager.publish(None, _image(offset=1, leader=ME))
        assert manager.caught_up
        assert manager.get("t", 0).is_leader
    finally:
        manager.stop()


def test_metadata_requests_are_refused_retriably_until_caught_up(tmp_path: Path) -> None:
    """Not "unknown topic" from an image not served yet: BROKER_NOT_AVAILABLE, so that
    clients ask another broker."""
    from unittest import mock

    import grpc

    from brokers.server.metadata import MetadataBuilder
    from brokers.server.service import BrokerServicer
    from spark_log.errors import ErrorCode
    from spark_log.proto import broker_pb2 as pb

    floor = Floor()
    manager = PartitionManager(broker_id=ME, data_dir=tmp_path, metadata_floor=floor)
    servicer = BrokerServicer(manager=manager, builder=MetadataBuilder(), controller_id=lambda: 1)
    manager.publish(None, _image(offset=7, leader=ME))
    context = mock.Mock(spec=grpc.ServicerContext)
    context.abort.side_effect = grpc.RpcError
    with pytest.raises(grpc.RpcError):
        servicer.Metadata(pb.MetadataRequest(all_topics=True), context)
    _code, message = context.abort.call_args.args
    assert "catching up" in message
    trailing = dict(context.set_trailing_metadata.call_args.args[0])
    assert trailing["spark-log-error-code"] == str(int(ErrorCode.BROKER_NOT_AVAILABLE))

    floor.value = 7
    manager.publish(None, _image(offset=7, leader=ME))
    answer = servicer.Metadata(pb.MetadataRequest(all_topics=True), context)
    assert [t.name for t in answer.topics] == ["t"]
    manager.stop()
