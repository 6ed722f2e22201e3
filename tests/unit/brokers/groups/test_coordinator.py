"""``GroupCoordinator`` (the shell) over a real ``Partition`` on disk (RF=1, no gRPC):
loading on leadership, appends then answers, replay after a restart (a new leader),
dropping the shard when leadership moves, refused produce-side input, session expiry by
the ticker.  Real brokers and failover: tests/integration/test_groups*.py and
tests/fault/test_group_failover.py."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator, Mapping

import pytest

from brokers.groups import INTERNAL_TOPIC, GroupConfig, GroupCoordinator, InternalTopicSpec
from brokers.groups.messages import CommitOffsets, Heartbeat
from brokers.groups.model import CommittedOffset, Subscription
from brokers.groups.records import OffsetRecord, to_frame
from brokers.log.append import check_frames
from brokers.metadata.image import MetadataImage
from brokers.partition import FollowerFetch, LeaderAndIsr, Partition
from spark_log.config import TopicConfig
from spark_log.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    NotLeaderError,
    UnknownMemberIdError,
)
from tests.support.wait import wait_until

from ..metadata.helpers import broker, build, topic

ME = 1


class Source:
    """A one-partition ``PartitionSource``: the internal partition on disk, led by ``ME``."""

    def __init__(self, directory: Path, image: MetadataImage) -> None:
        self.image = image
        self.partition = Partition(topic=INTERNAL_TOPIC, partition=0, topic_id="id-offsets", directory=directory,
                                   config=TopicConfig(cleanup_policy="compact", retention_ms=-1), broker_id=ME)
        epoch = image.topics[INTERNAL_TOPIC].partitions[0].leader_epoch if INTERNAL_TOPIC in image.topics else 0
        self.partition.become(LeaderAndIsr(leader_id=ME, leader_epoch=epoch, partition_epoch=0, replicas=(ME,), isr=(ME,)),
                              config=self.partition.config)

    def get(self, topic: str, index: int, *, leader: bool = True) -> Partition:
        if (topic, index) != (INTERNAL_TOPIC, 0):
            raise NotLeaderError(f"no {topic}-{index} here")
        return self.partition


def _image(leader: int = ME) -> MetadataImage:
    records = [broker(1), broker(2), *topic("t", [(1,)] * 4)]
    image = build(records + topic(INTERNAL_TOPIC, [(1, 2)]))
    if leader != ME:
        records += topic(INTERNAL_TOPIC, [(leader, 1)])
        image = build(records)
    return image


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[Source, GroupCoordinator]]:
    source = Source(tmp_path / "offsets-0", _image())
    coordinator = _coordinator(source)
    try:
        yield source, coordinator
    finally:
        coordinator.stop()
        source.partition.close()


def _coordinator(source: Source, created: list[tuple[str, int, int, Mapping[str, str]]] | None = None) -> GroupCoordinator:
    def create(name: str, partitions: int, rf: int, config: Mapping[str, str]) -> None:
        assert created is not None
        created.append((name, partitions, rf, dict(config)))

    coordinator = GroupCoordinator(broker_id=ME, partitions=source, create_topic=create,
                                   config=GroupConfig(min_session_timeout_ms=100), tick_ms=20,
                                   topic=InternalTopicSpec(partitions=4, replication_factor=3))
    coordinator.start()
    coordinator.on_reconciled(source.image)
    wait_until(lambda: coordinator.loaded_partitions() == [0], timeout=10, message="the partition never loaded")
    return coordinator


def _join(coordinator: GroupCoordinator, member: str, *, epoch: int = 0, session_ms: int = 30_000,
          owned: frozenset[tuple[str, int]] = frozenset()) -> tuple[int, frozenset[tuple[str, int]]]:
    answer = coordinator.heartbeat(Heartbeat(group_id="g", member_id=member, member_epoch=epoch,
                                             subscription=Subscription(("t",)), owned=owned,
                                             session_timeout_ms=session_ms))
    return answer.member_epoch, answer.assignment


def test_requests_append_then_answer_and_a_new_leader_replays_them(tmp_path: Path) -> None:
    source = Source(tmp_path / "offsets-0", _image())
    coordinator = _coordinator(source)
    epoch, parts = _join(coordinator, "a")
    assert len(parts) == 4
    coordinator.commit_offsets(CommitOffsets(group_id="g", member_id="a", member_epoch=epoch,
                                             offsets={("t", 1): CommittedOffset(17, "m")}))
    coordinator.commit_offsets(CommitOffsets(group_id="simple", offsets={("t", 2): CommittedOffset(5)}))
    end = source.partition.offsets().log_end_offset
    assert end == 3 and source.partition.high_watermark == 3  # one record per decision, durable before the answer
    coordinator.stop()
    source.partition.close()

    again = Source(tmp_path / "offsets-0", _image())  # the "new leader": same log, fresh memory
    reloaded = _coordinator(again)
    try:
        assert reloaded.fetch_offsets("g", None)[("t", 1)] .offset == 17
        assert reloaded.fetch_offsets("g", None)[("t", 1)].metadata == "m"
        assert reloaded.fetch_offsets("simple", [("t", 2)])[("t", 2)].offset == 5
        view = reloaded.describe_group("g")
        assert view.group is not None and view.group.members["a"].assigned == parts
        assert _join(reloaded, "a", epoch=epoch, owned=parts) == (epoch, parts)  # the member goes on, not fenced
    finally:
        reloaded.stop()
        again.partition.close()


def test_leadership_moving_away_drops_the_groups(started: tuple[Source, GroupCoordinator]) -> None:
    source, coordinator = started
    _join(coordinator, "a")
    coordinator.on_reconciled(_image(leader=2))
    assert coordinator.loaded_partitions() == []
    with pytest.raises(NotCoordinatorError):
        _join(coordinator, "a")


def test_a_new_leader_serves_once_its_tail_is_replicated(tmp_path: Path) -> None:
    """A record the old leader appended but no follower confirmed: the new coordinator
    answers "load in progress" until the high watermark reaches its log end, then serves
    the state including that record."""
    source = Source(tmp_path / "offsets-0", _image())
    partition = source.partition
    partition.become(LeaderAndIsr(leader_id=ME, leader_epoch=0, partition_epoch=1, replicas=(ME, 2), isr=(ME, 2)),
                     config=partition.config)
    record = OffsetRecord("g", "t", 0, CommittedOffset(9))
    partition.append_as_leader(check_frames(to_frame([record], timestamp_ms=1), max_message_bytes=1 << 20))
    partition.become(LeaderAndIsr(leader_id=ME, leader_epoch=4, partition_epoch=2, replicas=(ME, 2), isr=(ME, 2)),
                     config=partition.config)
    coordinator = GroupCoordinator(broker_id=ME, partitions=source, create_topic=lambda *a: None, tick_ms=20)
    coordinator.start()
    try:
        with pytest.raises(NotCoordinatorError):
            coordinator.describe_group("g")
        coordinator.on_reconciled(_reelected(source.image, epoch=4))
        with pytest.raises(CoordinatorLoadInProgressError):
            coordinator.describe_group("g")
        assert partition.high_watermark == 0 and partition.offsets().log_end_offset == 1
        partition.answer_follower_fetch(FollowerFetch(2, 1, 4, 0), max_bytes=1 << 20)  # the follower caught up
        wait_until(lambda: coordinator.loaded_partitions() == [0], timeout=10, message="never loaded")
        assert coordinator.fetch_offsets("g", None)[("t", 0)].offset == 9
    finally:
        coordinator.stop()
        partition.close()


def _reelected(image: MetadataImage, *, epoch: int) -> MetadataImage:
    """``image`` with this broker leading the internal partition in leader epoch ``epoch``."""
    offsets = image.topics[INTERNAL_TOPIC]
    info = dataclasses.replace(offsets.partitions[0], leader_epoch=epoch, replicas=(ME, 2), isr=(ME, 2))
    return dataclasses.replace(image, topics={**image.topics,
                                              INTERNAL_TOPIC: dataclasses.replace(offsets, partitions={0: info})})


def test_find_coordinator_creates_the_internal_topic_once(tmp_path: Path) -> None:
    created: list[tuple[str, int, int, Mapping[str, str]]] = []
    source = Source(tmp_path / "offsets-0", build([broker(1), broker(2)]))
    coordinator = GroupCoordinator(broker_id=ME, partitions=source, create_topic=lambda *a: created.append(a),
                                   topic=InternalTopicSpec(partitions=4, replication_factor=3))
    try:
        with pytest.raises(CoordinatorNotAvailableError):
            coordinator.find_coordinator("g")
        assert created == [(INTERNAL_TOPIC, 4, 2, {"cleanup.policy": "compact", "retention.ms": "-1",
                                                   "retention.bytes": "-1", "segment.bytes": str(100 * 1024 * 1024)})]
        source.image = _image()
        where = coordinator.find_coordinator("g")
        assert (where.broker_id, where.partition, where.address) == (1, 0, "127.0.0.1:9001")
    finally:
        source.partition.close()


def test_the_ticker_expires_silent_members(started: tuple[Source, GroupCoordinator]) -> None:
    source, coordinator = started
    epoch, _ = _join(coordinator, "a", session_ms=200)
    wait_until(lambda: coordinator.describe_group("g").state == "Empty", timeout=10,
               message="the silent member was never expired")
    with pytest.raises(UnknownMemberIdError):
        _join(coordinator, "a", epoch=epoch)


def test_the_ticker_drops_offsets_of_a_topic_re_created_between_two_views(
        started: tuple[Source, GroupCoordinator]) -> None:
    """The topic was deleted and re-created between two images this broker saw: only its
    id tells; its old offsets are left out at once and tombstoned by the ticker (found by a
    review: a re-created topic's consumer started at the deleted topic's offsets)."""
    source, coordinator = started
    coordinator.commit_offsets(CommitOffsets(group_id="simple", offsets={("t", 1): CommittedOffset(1000)}))
    assert coordinator.fetch_offsets("simple", None)[("t", 1)].offset == 1000
    source.image = build([broker(1), broker(2), *topic("t", [(1,)] * 4, topic_id="id-t-again"), *topic("u", [(1,)]),
                          *topic(INTERNAL_TOPIC, [(1, 2)])])
    assert coordinator.fetch_offsets("simple", None) == {}
    wait_until(lambda: "simple" not in coordinator.committed_offsets(), timeout=10,
               message="the re-created topic's old offsets were never tombstoned")
