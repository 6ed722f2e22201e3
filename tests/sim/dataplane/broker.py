"""``SimBroker``: one broker process of the data-plane simulation.

What the broker's threads do in the product, as simulated events on one thread:

- the ``PartitionManager`` (``brokers/server/partition_manager.py``): images fetched from
  the controller are served only once caught up with the *metadata floor* (the
  controller's offset in the first heartbeat answer of this process, KIP-631), then
  reconciled: a ``SimReplica`` per partition with a replica here, told its leadership
  (``become``); ``get`` refuses requests while catching up or when not the leader;
- Produce (``brokers/server/produce.py``): append as leader, a sequence gap waits (at
  most 10 s or the request timeout), acks=all waits for the high watermark (timeout:
  ``NotEnoughReplicasAfterAppendError``; a leadership change: ``NotLeaderError``), and the
  answer carries the offsets of an append even with an error;
- the leader's answer to follower fetches (``leader_fetch.py``): a long poll answered once
  there are records, a diverging hint or an error, or at ``fetch_wait_ms``; a grown HW
  wakes acks=all waiters; an expand candidate pokes the ISR updater;
- the follower fetchers (``brokers/replica/fetcher.py``): one fetch in flight per
  followed partition, the answer applied only if the replica still follows that leader in
  that epoch;
- the real ``IsrUpdater`` (``brokers/replica/isr.py``), its ``check`` called on the
  updater's schedule and when poked, against the controller's ``alter_partition``;
- heartbeats (``BrokerHeartbeater``): register with a new incarnation per process start,
  heartbeat every ``heartbeat_ms``, register again when fenced out.

A crash loses the process state (a ``kill``) and, for a power loss, what the disk had not
flushed (``SimLog.power_loss``); a restart is a new process.  A paused broker (SIGSTOP)
handles nothing until it resumes: its messages and timers wait.
"""
from __future__ import annotations

import functools

from typing import TYPE_CHECKING, Any, Callable

from brokers.metadata.image import EMPTY, MetadataImage
from brokers.partition.messages import FollowerFetch, LeaderAndIsr
from brokers.replica.isr import IsrUpdater
from spark_log.errors import (
    BrokerNotAvailableError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderError,
    SparkLogError,
    UnknownTopicOrPartitionError,
)

from .controller import TOPIC
from .messages import (
    CONTROLLER,
    ConsumerFetch,
    ConsumerFetchAnswer,
    ControllerAnswer,
    Heartbeat,
    ListOffsets,
    ListOffsetsAnswer,
    Metadata,
    MetadataAnswer,
    MetadataFetch,
    MetadataFetchAnswer,
    Produce,
    ProduceAnswer,
    Register,
    ReplicaFetch,
    ReplicaFetchAnswer,
)
from .replica import Appended, SimReplica
from .simlog import SimLog

if TYPE_CHECKING:
    from .world import World

__all__ = ["SimBroker"]

_MAX_GAP_WAIT_MS = 10_000


class _Waiter:
    """A produce request waiting: for a sequence gap (``appended`` None) or the HW."""

    __slots__ = ("message", "deadline", "appended")

    def __init__(self, message: Produce, deadline: int, appended: Appended | None) -> None:
        self.message, self.deadline, self.appended = message, deadline, appended


class SimBroker:
    def __init__(self, world: World, node_id: int) -> None:
        self.world = world
        self.node_id = node_id
        s = world.settings
        self.disks = {p: SimLog(flush_every=s.flush_messages) for p in range(s.partitions)}
        self.rng = world.rng(f"broker{node_id}")
        self.up = False
        self.paused_until = 0
        self.incarnations = 0
        self.incarnation = ""
        # fetch call ids never repeat across this broker's processes: a new process has new
        # connections, so an answer to a call of a killed one never reaches it (a leader that
        # was paused may still answer one after the restart; it must find no call to match)
        self.calls = 0
        self.first_call = 1  # of this process: lower ones were a killed process's
        self.answers_to_dead_process = 0  # such answers that arrived (and were dropped)
        self._reset()

    def _reset(self) -> None:
        self.broker_epoch = -1
        self.floor: int | None = None
        self.caught_up = False
        self.latest: MetadataImage = EMPTY
        self.image: MetadataImage = EMPTY
        self.replicas: dict[int, SimReplica] = {}
        self.waiters: dict[int, list[_Waiter]] = {}
        self.parked: dict[int, dict[tuple[int, int], ReplicaFetch]] = {}   # partition -> (src, call) -> fetch
        self.fetching: dict[int, tuple[int, int, int]] = {}   # partition -> (call, leader, epoch)
        self.isr_poked = False

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self.up = True
        self.incarnations += 1
        self.incarnation = f"{self.node_id}:{self.incarnations}"
        self.first_call = self.calls + 1
        self._reset()
        s = self.world.settings
        self.isr = IsrUpdater(broker_id=self.node_id, broker_epoch=lambda: self.broker_epoch,
                              # SimReplica stands in for Partition with the methods IsrUpdater calls (duck-typed)
                              partitions=lambda: [r for r in self.replicas.values() if r.is_leader],  # type: ignore[misc]
                              alter_partition=self.world.controller.alter_partition, lag_time_max_ms=s.lag_ms)
        self.world.send(Register(self.node_id, CONTROLLER, self.incarnation))
        incarnation = self.incarnation
        self._every(s.metadata_ms, "meta", self._fetch_metadata, incarnation)
        self._every(s.heartbeat_ms, "heartbeat", self._heartbeat, incarnation)
        self._every(self.isr.check_interval_ms, "isr", self._check_isr, incarnation)
        self._every(s.fetch_poll_ms, "fetchers", self._fetchers, incarnation)

    def crash(self, *, power: bool) -> None:
        self.up = False
        for replica in self.replicas.values():
            replica.close()
        if power:
            for disk in self.disks.values():
                disk.power_loss(self.rng, self.world.settings.tear_rate)
        self._reset()

    def _every(self, period_ms: int, label: str, action: Callable[[], None], incarnation: str) -> None:
        def run() -> None:
            if not self.up or self.incarnation != incarnation:
                return
            if self.paused_until > self.world.clock.now_ms:
                self.world.scheduler.schedule(self.paused_until - self.world.clock.now_ms, label, run)
                return
            self.world.scheduler.schedule(period_ms, label, run)
            action()
        self.world.scheduler.schedule(self.rng.randint(0, period_ms), label, run)

    def _later(self, delay_ms: int, label: str, action: Callable[[], None]) -> None:
        incarnation = self.incarnation

        def run() -> None:
            if not self.up or self.incarnation != incarnation:
                return
            if self.paused_until > self.world.clock.now_ms:
                self.world.scheduler.schedule(self.paused_until - self.world.clock.now_ms, label, run)
                return
            action()
        self.world.scheduler.schedule(delay_ms, label, run)

    def _next_call(self) -> int:
        self.calls += 1
        return self.calls

    # -- metadata, registration, heartbeats --------------------------------------------------------

    def _fetch_metadata(self) -> None:
        """Every ``metadata_ms`` (a lost fetch is asked again): a long poll at the controller;
        each answer is followed by the next fetch after a seeded lag."""
        self.world.send(MetadataFetch(self.node_id, CONTROLLER, self.latest.offset))

    def _heartbeat(self) -> None:
        if self.broker_epoch < 0:
            self.world.send(Register(self.node_id, CONTROLLER, self.incarnation))
        else:
            self.world.send(Heartbeat(self.node_id, CONTROLLER, self.incarnation, self.broker_epoch))

    def _on_controller(self, answer: ControllerAnswer) -> None:
        if answer.incarnation != self.incarnation:
            return
        if answer.error is not None:
            self.broker_epoch = -1      # fenced out (a stale epoch): register again
            return
        self.broker_epoch = answer.broker_epoch
        if self.floor is None:
            self.floor = answer.metadata_offset
        self._serve_latest()

    def _on_metadata(self, answer: MetadataFetchAnswer) -> None:
        if answer.image is not None and answer.image.offset > self.latest.offset:
            self.latest = answer.image
            self._serve_latest()
        self._later(self.rng.randint(*self.world.settings.metadata_lag_ms), "meta", self._fetch_metadata)

    def _serve_latest(self) -> None:
        if not self.caught_up:
            if self.floor is None or self.latest.offset < self.floor:
                return
            self.caught_up = True
        if self.latest.offset > self.image.offset:
            self.image = self.latest
            self._reconcile(self.image)

    def _reconcile(self, image: MetadataImage) -> None:
        topic = image.topics[TOPIC]
        for index, info in topic.partitions.items():
            if self.node_id not in info.replicas:
                continue
            replica = self.replicas.get(index)
            if replica is None:
                key = (self.node_id, index)
                replica = self.replicas[index] = SimReplica(broker_id=self.node_id, topic=TOPIC, partition=index,
                                                            log=self.disks[index], now=self.world.now,
                                                            touched=functools.partial(self.world.dirty.add, key))
            replica.become(LeaderAndIsr(leader_id=info.leader, leader_epoch=info.leader_epoch,
                                        partition_epoch=info.partition_epoch, replicas=tuple(info.replicas),
                                        isr=tuple(info.isr)))
            self._wake(index)

    def get(self, partition: int, *, leader: bool = True) -> SimReplica:
        """``PartitionManager.get``."""
        if not self.caught_up:
            raise NotLeaderError(f"broker {self.node_id} is catching up with the metadata log")
        info = self.image.topics[TOPIC].partitions.get(partition)
        if info is None:
            raise UnknownTopicOrPartitionError(f"no partition {partition}")
        if leader and info.leader != self.node_id:
            raise NotLeaderError(f"broker {self.node_id} does not lead {TOPIC}-{partition}")
        replica = self.replicas.get(partition)
        if replica is None:
            raise NotLeaderError(f"broker {self.node_id} holds no replica of {TOPIC}-{partition}")
        return replica

    # -- requests ---------------------------------------------------------------------------

    def on_message(self, message: Any) -> None:
        if isinstance(message, Produce):
            self._on_produce(message)
        elif isinstance(message, ReplicaFetch):
            self._on_replica_fetch(message, first=True)
        elif isinstance(message, ReplicaFetchAnswer):
            self._on_fetched(message)
        elif isinstance(message, MetadataFetchAnswer):
            self._on_metadata(message)
        elif isinstance(message, ControllerAnswer):
            self._on_controller(message)
        elif isinstance(message, ConsumerFetch):
            self._on_consumer_fetch(message)
        elif isinstance(message, ListOffsets):
            self._on_list_offsets(message)
        elif isinstance(message, Metadata):
            self._on_client_metadata(message)

    def _on_produce(self, message: Produce) -> None:
        try:
            replica = self.get(message.partition)
            appended = replica.append_as_leader(list(message.frames), acks_all=message.acks_all,
                                                min_isr=self.image.topics[TOPIC].config.min_insync_replicas)
        except SparkLogError as exc:
            self.world.send(ProduceAnswer(self.node_id, message.src, message.call, exc, -1))
            return
        now = self.world.clock.now_ms
        if appended is None:
            self._park(message, now + min(message.timeout_ms, _MAX_GAP_WAIT_MS), None)
            return
        self._on_append(message.partition)
        if not message.acks_all:
            self.world.send(ProduceAnswer(self.node_id, message.src, message.call, None, appended.first))
            return
        self._park(message, now + message.timeout_ms, appended)
        self._wake(message.partition)

    def _park(self, message: Produce, deadline: int, appended: Appended | None) -> None:
        waiter = _Waiter(message, deadline, appended)
        self.waiters.setdefault(message.partition, []).append(waiter)
        self._later(deadline - self.world.clock.now_ms, "produce-deadline", lambda: self._wake(message.partition))

    def _wake(self, partition: int, *, data: bool = False) -> None:
        """Re-evaluate the produce waiters of ``partition`` (after any change to it); those
        waiting for a sequence gap only after an append there (or at their deadline)."""
        waiting = self.waiters.get(partition)
        if not waiting:
            return
        now = self.world.clock.now_ms
        replica = self.replicas.get(partition)
        keep: list[_Waiter] = []
        appended_any = False
        for waiter in waiting:
            m = waiter.message
            error: Exception | None = None
            done = False
            base = -1
            if waiter.appended is None and not data and now < waiter.deadline:
                keep.append(waiter)
                continue
            if waiter.appended is None:                      # a sequence gap
                try:
                    if replica is None:
                        raise NotLeaderError("replica gone")
                    appended = replica.append_as_leader(list(m.frames), acks_all=m.acks_all,
                                                        min_isr=self.image.topics[TOPIC].config.min_insync_replicas)
                    if appended is None:
                        if now >= waiter.deadline:
                            error, done = replica.sequence_gap_error(list(m.frames)), True
                    else:
                        appended_any = True
                        if m.acks_all:
                            waiter = _Waiter(m, now + m.timeout_ms, appended)
                            self._later(m.timeout_ms, "produce-deadline", functools.partial(self._wake, partition))
                        else:
                            base, done = appended.first, True
                except SparkLogError as exc:
                    error, done = exc, True
            if not done and waiter.appended is not None:      # acks=all: the HW
                base = waiter.appended.first
                try:
                    if replica is None:
                        raise NotLeaderError("replica gone")
                    if replica.replicated(waiter.appended.last, waiter.appended.epoch,
                                          self.image.topics[TOPIC].config.min_insync_replicas):
                        done = True
                    elif now >= waiter.deadline:
                        error, done = NotEnoughReplicasAfterAppendError(
                            f"offsets {waiter.appended.first}..{waiter.appended.last} appended, not replicated"), True
                except SparkLogError as exc:
                    error, done = exc, True
            if done:
                self.world.send(ProduceAnswer(self.node_id, m.src, m.call, error, base))
            else:
                keep.append(waiter)
        self.waiters[partition] = keep
        if appended_any:
            self._on_append(partition)

    def _on_append(self, partition: int) -> None:
        """Data arrived: parked follower fetches answer (the long polls wake), and produce
        requests waiting for a sequence gap look again."""
        self._wake(partition, data=True)
        parked = self.parked.pop(partition, {})
        for fetch in parked.values():
            self._on_replica_fetch(fetch, first=False)

    def _on_replica_fetch(self, message: ReplicaFetch, *, first: bool) -> None:
        s = self.world.settings
        p = message.partition
        try:
            replica = self.get(p)
            decision, frames, offsets = replica.answer_follower_fetch(
                FollowerFetch(message.src, message.fetch_offset, message.current_leader_epoch,
                              message.last_fetched_epoch), max_frames=s.fetch_max_frames)
        except SparkLogError as exc:
            self.world.send(ReplicaFetchAnswer(self.node_id, message.src, message.call, p, error=exc))
            return
        if decision.expand_candidate:
            self._poke_isr()
        if decision.hw_grew:
            self._wake(p)
        if decision.diverging is not None or frames or not first:
            diverging = tuple(decision.diverging) if decision.diverging is not None else None
            self.world.send(ReplicaFetchAnswer(self.node_id, message.src, message.call, p, diverging=diverging,  # type: ignore[arg-type]
                                               frames=tuple(frames), high_watermark=offsets.high_watermark))
            return
        key = (message.src, message.call)
        self.parked.setdefault(p, {})[key] = message

        def expire() -> None:
            if self.parked.get(p, {}).pop(key, None) is not None:
                self._on_replica_fetch(message, first=False)
        self._later(s.fetch_wait_ms, "long-poll", expire)

    def _on_consumer_fetch(self, message: ConsumerFetch) -> None:
        try:
            frames, _offsets = self.get(message.partition).read(message.offset, max_frames=4)
        except SparkLogError as exc:
            self.world.send(ConsumerFetchAnswer(self.node_id, message.src, message.call, message.partition, error=exc))
            return
        records = tuple((f.base_offset + i, v) for f in frames for i, v in enumerate(f.values)
                        if f.base_offset + i >= message.offset)
        following = frames[-1].next_offset if frames else message.offset
        self.world.send(ConsumerFetchAnswer(self.node_id, message.src, message.call, message.partition,
                                            records=records, next_offset=following))

    def _on_list_offsets(self, message: ListOffsets) -> None:
        try:
            replica = self.get(message.partition)
            offset = replica.listable_offsets().high_watermark
        except SparkLogError as exc:
            self.world.send(ListOffsetsAnswer(self.node_id, message.src, message.call, message.partition, error=exc))
            return
        self.world.invariants.on_latest(message.partition, offset, self.node_id, replica.core.leader_epoch)
        self.world.send(ListOffsetsAnswer(self.node_id, message.src, message.call, message.partition, offset=offset))

    def _on_client_metadata(self, message: Metadata) -> None:
        if not self.caught_up:
            self.world.send(MetadataAnswer(self.node_id, message.src, message.call,
                                           error=BrokerNotAvailableError("catching up")))
            return
        leaders = {p: info.leader for p, info in self.image.topics[TOPIC].partitions.items()}
        self.world.send(MetadataAnswer(self.node_id, message.src, message.call, leaders=leaders))

    # -- following ------------------------------------------------------------------------------

    def _fetchers(self) -> None:
        for index, replica in self.replicas.items():
            if index in self.fetching or replica.is_leader or replica.core.removed:
                continue
            leader = replica.core.leadership.leader_id
            if leader is None or leader == self.node_id:
                continue
            position = replica.fetch_position(leader)
            if position is None:
                continue
            call = self._next_call()
            self.fetching[index] = (call, leader, position.current_leader_epoch)
            self.world.send(ReplicaFetch(self.node_id, leader, call, index, position.fetch_offset,
                                         position.current_leader_epoch, position.last_fetched_epoch))
            timeout = self.world.settings.fetch_wait_ms + self.world.settings.request_timeout_ms

            def give_up(index: int = index, call: int = call) -> None:
                if self.fetching.get(index, (None,))[0] == call:
                    del self.fetching[index]
            self._later(timeout, "fetch-timeout", give_up)

    def _on_fetched(self, answer: ReplicaFetchAnswer) -> None:
        if answer.call < self.first_call:
            self.answers_to_dead_process += 1
        inflight = self.fetching.get(answer.partition)
        if inflight is None or inflight[0] != answer.call or inflight[1] != answer.src:
            return  # not the answer to this process's fetch in flight (a connection carries its own answers)
        del self.fetching[answer.partition]
        _, leader, epoch = inflight
        replica = self.replicas.get(answer.partition)
        if replica is None or answer.error is not None:
            return
        try:
            replica.apply_fetched(leader, epoch, answer.diverging, list(answer.frames), answer.high_watermark)
        except SparkLogError:
            return
        self._later(0, "fetchers", self._fetchers)   # the next fetch goes out at once

    # -- ISR ----------------------------------------------------------------------------------

    def _poke_isr(self) -> None:
        if not self.isr_poked:
            self.isr_poked = True
            self._later(0, "isr-poke", self._check_isr)

    def _check_isr(self) -> None:
        self.isr_poked = False
        for replica in [r for r in self.replicas.values() if r.is_leader]:
            self.isr.check(replica)  # type: ignore[arg-type]  # the real updater, on the sim's shell
            self._wake(replica.partition)
