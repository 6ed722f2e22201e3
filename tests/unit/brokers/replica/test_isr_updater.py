"""``IsrUpdater``: what an AlterPartition answer does to the joiners of an expansion.

The leader counts the joiners of an expansion in its high watermark from the request on.
The controller commits an accepted expansion before the leader's metadata image shows
it, so the updater's next check asks again on the old partition epoch and is fenced as
stale.  Dropping the joiners on that answer (as the updater once did, on any error) let the
HW pass records a joiner lacked while the controller already had it in the ISR, where a
preferred-leader election could make it leader and truncate acknowledged records.  Only a
definite refusal (an invalid request at the current partition epoch) stops the counting;
the image's next partition epoch settles the rest.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

import pyarrow as pa
import pytest

from brokers.metadata.alter_isr import AlterIsr
from brokers.log.append import check_frames
from brokers.metadata.image import PartitionInfo
from brokers.partition import FollowerFetch, LeaderAndIsr, Partition
from brokers.replica.isr import IsrUpdater
from spark_log.clock import ManualClock
from spark_log.config import TopicConfig
from spark_log.errors import FencedEpochError, InvalidRequestError, RequestTimeoutError, SparkLogError
from spark_log.frame import encode_batch

ME, IN_SYNC, JOINER = 1, 2, 3


class Controller:
    """Accepts the first AlterPartition (the leader's image does not show it yet), then
    answers each later one with the next error of ``then``."""

    def __init__(self, then: Sequence[SparkLogError]) -> None:
        self.calls: list[tuple[int, tuple[int, ...]]] = []
        self.then = list(then)

    def __call__(self, *, topic: str, partition: int, broker_id: int, broker_epoch: int, leader_epoch: int,
                 partition_epoch: int, new_isr: Sequence[int]) -> PartitionInfo:
        self.calls.append((partition_epoch, tuple(new_isr)))
        if len(self.calls) > 1:
            raise self.then.pop(0)
        return PartitionInfo(replicas=(ME, IN_SYNC, JOINER), isr=tuple(new_isr), leader=ME, leader_epoch=5,
                             partition_epoch=partition_epoch + 1)


@pytest.fixture()
def leader(tmp_path: Path) -> Iterator[Partition]:
    partition = Partition(topic="t", partition=0, topic_id="id-t", directory=tmp_path / "t-0", config=TopicConfig(),
                          broker_id=ME, clock=ManualClock(monotonic_ms=1_000))
    partition.become(LeaderAndIsr(leader_id=ME, leader_epoch=5, partition_epoch=7, replicas=(ME, IN_SYNC, JOINER),
                                  isr=(ME, IN_SYNC)), config=partition.config)
    try:
        yield partition
    finally:
        partition.close()


def _append(partition: Partition, rows: int) -> None:
    batch = pa.record_batch({"value": pa.array([b"v"] * rows, pa.binary())})
    partition.append_as_leader(check_frames(encode_batch(batch, compression="none"), max_message_bytes=1 << 20))


def _fetch(partition: Partition, replica: int, offset: int) -> None:
    partition.answer_follower_fetch(FollowerFetch(replica, offset, 5, 5 if offset else -1), max_bytes=0)


class Batched:
    """The batched call (``alter_partitions``) over a one-at-a-time ``Controller``."""

    def __init__(self, single: Controller) -> None:
        self.single, self.batches = single, 0

    def __call__(self, items: Sequence[AlterIsr]) -> list[PartitionInfo | SparkLogError]:
        self.batches += 1
        out: list[PartitionInfo | SparkLogError] = []
        for i in items:
            try:
                out.append(self.single(topic=i.topic, partition=i.partition, broker_id=i.broker_id,
                                       broker_epoch=i.broker_epoch, leader_epoch=i.leader_epoch,
                                       partition_epoch=i.partition_epoch, new_isr=i.new_isr))
            except SparkLogError as exc:
                out.append(exc)
        return out


class Updater:
    """``check(partition)`` one at a time, or (batched) through ``check_all``."""

    def __init__(self, partition: Partition, controller: Controller, batched: bool) -> None:
        self.batch = Batched(controller) if batched else None
        self.updater = IsrUpdater(broker_id=ME, broker_epoch=lambda: 1, partitions=lambda: [partition],
                                  alter_partition=controller, lag_time_max_ms=60_000, alter_partitions=self.batch)

    def check(self, partition: Partition) -> None:
        if self.batch is None:
            self.updater.check(partition)
        else:
            before = self.batch.batches
            self.updater.check_all([partition])
            assert self.batch.batches == before + 1


@pytest.fixture(params=[False, True], ids=["single", "batched"])
def batched(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _updater(partition: Partition, controller: Controller, batched: bool = False) -> Updater:
    return Updater(partition, controller, batched)


@pytest.mark.parametrize("answer", [FencedEpochError("stale partition epoch 7 for t-0; the current one is 8"),
                                    RequestTimeoutError("request timed out")], ids=["stale-epoch", "timeout"])
def test_an_accepted_expansion_keeps_counting_whatever_the_next_answer(leader: Partition, answer: SparkLogError,
                                                                       batched: bool) -> None:
    _append(leader, 10)
    _fetch(leader, IN_SYNC, 10)
    _fetch(leader, JOINER, 10)                      # caught up: may rejoin
    controller = Controller(then=[answer])
    updater = _updater(leader, controller, batched)
    updater.check(leader)                           # accepted (epoch 8), not in our image yet
    updater.check(leader)                           # asked again on epoch 7: the answer
    assert controller.calls == [(7, (ME, IN_SYNC, JOINER))] * 2
    _append(leader, 5)
    _fetch(leader, IN_SYNC, 15)
    assert leader.high_watermark == 10, (
        "after an accepted expansion the HW passed records the joiner does not hold")
    leader.become(LeaderAndIsr(leader_id=ME, leader_epoch=5, partition_epoch=8, replicas=(ME, IN_SYNC, JOINER),
                               isr=(ME, IN_SYNC, JOINER)), config=leader.config)
    _fetch(leader, JOINER, 15)
    assert leader.high_watermark == 15


def test_a_definite_refusal_stops_counting_the_joiner(leader: Partition, batched: bool) -> None:
    _append(leader, 10)
    _fetch(leader, IN_SYNC, 10)
    _fetch(leader, JOINER, 10)

    class Refusing(Controller):
        def __call__(self, **kwargs: object) -> PartitionInfo:
            raise InvalidRequestError("brokers [3] are fenced and cannot join the ISR of t-0")

    _updater(leader, Refusing([]), batched).check(leader)
    _append(leader, 5)
    _fetch(leader, IN_SYNC, 15)
    assert leader.high_watermark == 15              # the joiner was never in the ISR: no reason to wait
