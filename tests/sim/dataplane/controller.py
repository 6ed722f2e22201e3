"""``SimController``: the active controller of the data-plane simulation, on the real rules.

Every decision is the product's pure controller code over the real ``MetadataImage``:
``registration.register`` / ``heartbeat_records`` / ``fence_records`` (leases:
``leases.BrokerLeases`` on the simulated clock), ``alter_partition.alter_partition_records``,
``preferred_leader.preferred_leader_changes`` and ``topics.create_topic_records``; records are
folded with ``MetadataDelta``.  What is simulated is only what Raft would do: the
controller is one always-available node (the Raft quorum has its own simulation) whose
committed images brokers fetch over the simulated network (a long poll: answered when
there is a newer image), so each broker's image lags the controller's by its own, seeded,
amount.

``alter_partition`` is called synchronously by a broker's (real) ``IsrUpdater``: a cut link
fails it before it arrives (``BrokerNotAvailableError``); otherwise it is applied (or
refused) at once, and with ``lost_answer_rate`` its answer is lost after it was applied
(``RequestTimeoutError``: the outcome the updater cannot know).
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING, Sequence

from brokers.controller.alter_partition import alter_partition_records
from brokers.controller.leases import BrokerLeases
from brokers.controller.preferred_leader import preferred_leader_changes
from brokers.controller.registration import fence_records, heartbeat_records, register
from brokers.controller.topics import create_topic_records
from brokers.metadata.delta import MetadataDelta
from brokers.metadata.image import EMPTY, MetadataImage, PartitionInfo
from brokers.metadata.records import MetadataRecord
from spark_log.errors import BrokerNotAvailableError, RequestTimeoutError, SparkLogError

from .messages import CONTROLLER, ControllerAnswer, Heartbeat, MetadataFetch, MetadataFetchAnswer, Register

if TYPE_CHECKING:
    from .world import World

__all__ = ["SimController"]

TOPIC = "t"


class SimController:
    def __init__(self, world: World, *, rng: random.Random, session_timeout_ms: int,
                 lost_answer_rate: float) -> None:
        self.world = world
        self.rng = rng
        self.image: MetadataImage = EMPTY
        self.offset = 0
        self.leases = BrokerLeases(clock=world.clock, session_timeout_ms=session_timeout_ms)
        self.lost_answer_rate = lost_answer_rate
        self.log: list[str] = []
        self.waiting: dict[int, MetadataFetch] = {}   # brokers' metadata fetches waiting for news

    # -- the metadata log -------------------------------------------------------------------------

    def commit(self, records: Sequence[MetadataRecord], why: str) -> None:
        if not records:
            return
        delta = MetadataDelta(self.image)
        for record in records:
            delta.replay(record)
        self.offset += len(records)
        self.image = delta.apply(offset=self.offset, epoch=1)
        waiting, self.waiting = self.waiting, {}
        for fetch in waiting.values():
            self.world.send(MetadataFetchAnswer(CONTROLLER, fetch.src, self.image))
        self.log.append(f"{self.world.clock.now_ms}: {why}: {[type(r).__name__ for r in records]}")

    def bootstrap(self, brokers: Sequence[int], *, partitions: int, replication_factor: int, min_isr: int,
                  flush_messages: int) -> None:
        for broker in brokers:
            records, _ = register(self.image, broker_id=broker, incarnation=f"{broker}:0", address=f"b{broker}:1")
            self.commit(records, f"register {broker}")
        self.leases.reset(brokers)
        config = {"min.insync.replicas": str(min_isr)}
        if flush_messages:
            config["flush.messages"] = str(flush_messages)
        self.commit(create_topic_records(self.image, name=TOPIC, topic_id="t-id", partitions=partitions,
                                         replication_factor=replication_factor, config=config), "create topic")

    def partition(self, index: int) -> PartitionInfo:
        return self.image.topics[TOPIC].partitions[index]

    # -- requests ------------------------------------------------------------------------------

    def on_message(self, message: object) -> None:
        world = self.world
        if isinstance(message, MetadataFetch):   # a long poll, as KRaft's fetch: answered once there is news
            if self.image.offset > message.offset:
                world.send(MetadataFetchAnswer(CONTROLLER, message.src, self.image))
            else:
                self.waiting[message.src] = message
        elif isinstance(message, Register):
            try:
                records, epoch = register(self.image, broker_id=message.src, incarnation=message.incarnation,
                                          address=f"b{message.src}:1")
                self.commit(records, f"register {message.src} {message.incarnation}")
                self.leases.renew(message.src)
                answer = ControllerAnswer(CONTROLLER, message.src, message.incarnation, broker_epoch=epoch,
                                          metadata_offset=self.image.offset)
            except SparkLogError as exc:
                answer = ControllerAnswer(CONTROLLER, message.src, message.incarnation, error=exc)
            world.send(answer)
        elif isinstance(message, Heartbeat):
            try:
                records = heartbeat_records(self.image, message.src, message.broker_epoch)
                self.leases.renew(message.src)
                self.commit(records, f"unfence {message.src}")
                answer = ControllerAnswer(CONTROLLER, message.src, message.incarnation,
                                          broker_epoch=message.broker_epoch, metadata_offset=self.image.offset)
            except SparkLogError as exc:
                answer = ControllerAnswer(CONTROLLER, message.src, message.incarnation, error=exc)
            world.send(answer)

    def alter_partition(self, *, topic: str, partition: int, broker_id: int, broker_epoch: int, leader_epoch: int,
                        partition_epoch: int, new_isr: Sequence[int]) -> PartitionInfo:
        """``ControllerClient.alter_partition`` for the broker's real ``IsrUpdater`` (module docstring)."""
        world = self.world
        if not world.network_ok(broker_id, CONTROLLER):
            raise BrokerNotAvailableError(f"broker {broker_id} cannot reach the controller")
        records = alter_partition_records(self.image, broker_id=broker_id, broker_epoch=broker_epoch, topic=topic,
                                          partition=partition, leader_epoch=leader_epoch,
                                          partition_epoch=partition_epoch, new_isr=new_isr)
        self.commit(records, f"alter partition {partition} by {broker_id}: isr {list(new_isr)}")
        if not world.network_ok(CONTROLLER, broker_id) or self.rng.random() < self.lost_answer_rate:
            raise RequestTimeoutError("the AlterPartition answer was lost (it was applied)")
        return self.partition(partition)

    # -- the lease and preferred-leader loop ------------------------------------------------------

    def check_leases(self) -> None:
        for broker in self.leases.expired(b.broker_id for b in self.image.live_brokers()):
            self.commit(fence_records(self.image, broker), f"fence {broker} (lease)")

    def elect_preferred_leaders(self) -> None:
        self.commit(preferred_leader_changes(self.image), "preferred-leader election")
