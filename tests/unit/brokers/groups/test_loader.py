"""``loader.load``: the timers a new coordinator's members get.  A load waits for the high
watermark (the followers fetching in the new leader epoch) before it replays; however long
that takes, every member must get a full session (and an ``UNREVOKED`` member a full
rebalance timeout) counted from when the new coordinator starts serving, not from when
the load began (found by a review: every member expired at the first tick after a load
slower than a session)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from brokers.groups.core import GroupShard
from brokers.groups.loader import load
from brokers.groups.model import GroupConfig, MemberState
from brokers.groups.records import Record, to_frame
from brokers.log.append import check_frames
from brokers.partition import LeaderAndIsr, Partition, PartitionOffsets, PartitionRead
from spark_log.config import TopicConfig

from .support import Driver

TOPICS = {"t": ("id-t", 6)}
LOAD_MS = 12_000  # how long the high-watermark wait takes: longer than any timeout below


class SlowHighWatermark:
    """A real partition whose high-watermark wait takes ``LOAD_MS`` of the fake clock."""

    def __init__(self, partition: Partition, clock: list[int]) -> None:
        self.partition, self.clock = partition, clock

    def offsets(self) -> PartitionOffsets:
        return self.partition.offsets()

    def wait_for_high_watermark(self, offset: int, timeout_ms: int, *, leader_epoch: int | None = None) -> bool:
        self.clock[0] += LOAD_MS
        return self.partition.wait_for_high_watermark(offset, timeout_ms, leader_epoch=leader_epoch)

    def read(self, offset: int, *, max_bytes: int, max_offset: int | None = None) -> PartitionRead:
        return self.partition.read(offset, max_bytes=max_bytes, max_offset=max_offset)


@pytest.fixture()
def partition(tmp_path: Path) -> Iterator[Partition]:
    p = Partition(topic="__consumer_offsets", partition=0, topic_id="x", directory=tmp_path / "p",
                  config=TopicConfig(cleanup_policy="compact", retention_ms=-1), broker_id=1)
    p.become(LeaderAndIsr(leader_id=1, leader_epoch=0, partition_epoch=0, replicas=(1,), isr=(1,)), config=p.config)
    try:
        yield p
    finally:
        p.close()


def _slow_load(partition: Partition, records: list[Record]) -> tuple[GroupShard, int]:
    """Load ``records`` through a high-watermark wait of ``LOAD_MS``; the shard and when it
    started serving."""
    partition.append_as_leader(check_frames(to_frame(records, timestamp_ms=1), max_message_bytes=1 << 20))
    clock = [1_000_000]
    shard = GroupShard(config=GroupConfig(min_session_timeout_ms=100))
    load(SlowHighWatermark(partition, clock), leader_epoch=0, shard=shard, now_ms=lambda: clock[0])
    return shard, clock[0]


def test_a_slow_load_gives_every_member_a_full_session_from_when_it_serves(partition: Partition) -> None:
    d = Driver(topics=TOPICS)
    d.heartbeat("a", session_ms=3000)
    shard, serving = _slow_load(partition, d.log)
    assert shard.session_deadline("g", "a") == serving + 3000
    assert shard.tick(serving + 2999).records == ()  # nobody could heartbeat the loading coordinator
    assert len(shard.tick(serving + 3000).records) == 1


def test_a_slow_load_gives_an_unrevoked_member_a_full_rebalance_timeout(partition: Partition) -> None:
    d = Driver(topics=TOPICS)
    d.heartbeat("a", session_ms=60_000, rebalance_ms=5000)
    d.heartbeat("b", session_ms=60_000, rebalance_ms=5000)
    d.heartbeat("a", session_ms=60_000, rebalance_ms=5000)  # asked to revoke
    group = d.shard.group("g")
    assert group is not None and group.members["a"].state is MemberState.UNREVOKED
    shard, serving = _slow_load(partition, d.log)
    assert shard.tick(serving + 4999).records == ()
    assert len(shard.tick(serving + 5000).records) == 1  # then the revocation timeout does apply
