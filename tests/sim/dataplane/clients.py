"""Clients of the data-plane simulation: idempotent acks=all producers, a consumer, a final reader.

``SimProducer`` follows ``spark_log/_producer.py``: one frame per request (``max_in_flight``
requests in flight, so the broker's sequence-gap wait is exercised), sequences reserved
per partition in send order, every retriable error retried with the same frame and
sequence until ``delivery_timeout_ms`` (``OutOfOrderSequenceError`` 20 times), metadata
forgotten on errors that ask for it, a backoff of 50 ms doubling to 200 ms, and on a
final failure a fresh producer id (``Producer._lost_sequences``) whose sends to a
partition wait until the older id's sends there are settled (``Producer._issue``).  A failed send records
``maybe_written`` as the real one does (an answer with the offsets of an append, or a
call that failed without an answer and an error that is not ``refused_before_write``).

``SimConsumer`` polls every partition from its leader (``Consumer``: positions advance by
the answers, an out-of-range position resets to the start as a seek, metadata forgotten on
leader errors).  ``FinalReader`` asks "latest" (ListOffsets, retried) and reads every
partition from 0 up to it: the final read of the history.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_log.errors import (
    BrokerNotAvailableError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RequestTimeoutError,
    SparkLogError,
)
from tests.checkers.log_history import FinalRead, Poll, Send

from .messages import (
    ConsumerFetch,
    ConsumerFetchAnswer,
    ListOffsets,
    ListOffsetsAnswer,
    Metadata,
    MetadataAnswer,
    Produce,
    ProduceAnswer,
)
from .simlog import SimFrame

if TYPE_CHECKING:
    from .world import World

__all__ = ["SimProducer", "SimConsumer", "FinalReader"]

_BACKOFF_MS, _BACKOFF_MAX_MS = 50, 200


class _Client:
    """Metadata (which broker leads each partition) and calls with deadlines."""

    def __init__(self, world: World, node_id: int) -> None:
        self.world = world
        self.node_id = node_id
        self.rng = world.rng(f"client{node_id}")
        self.leaders: dict[int, int | None] = {}
        self.calls = 0
        self.pending: dict[int, Any] = {}
        self._asking = False

    def call(self, context: Any, timeout_ms: int) -> int:
        self.calls += 1
        call = self.calls
        self.pending[call] = context
        self.world.scheduler.schedule(timeout_ms, "client-timeout", lambda: self._expire(call))
        return call

    def _expire(self, call: int) -> None:
        context = self.pending.pop(call, None)
        if context is not None:
            self.timed_out(context)

    def timed_out(self, context: Any) -> None:  # pragma: no cover - overridden
        pass

    def refresh(self) -> None:
        """Forget the leaders and ask a broker (a random one: clients may reach a stale one)."""
        self.leaders = {}
        if self._asking:
            return
        self._asking = True
        broker = self.rng.choice(self.world.broker_ids)
        self.world.send(Metadata(self.node_id, broker, self.call(("metadata",), self.world.settings.request_timeout_ms)))

    def on_metadata(self, answer: MetadataAnswer) -> None:
        if self.pending.pop(answer.call, None) is None:
            return
        self._asking = False
        if answer.error is None:
            self.leaders = dict(answer.leaders)

    def timed_out_metadata(self) -> None:
        self._asking = False


@dataclass(slots=True)
class _Shipment:
    partition: int
    pid: int
    seq: int
    values: tuple[bytes, ...]
    indexes: tuple[int, ...]
    deadline: int
    attempts: int = 0
    maybe_written: bool = False


@dataclass(order=True)
class _Retry:
    at: int
    order: int
    shipment: _Shipment = field(compare=False)


class SimProducer(_Client):
    def __init__(self, world: World, node_id: int, name: str) -> None:
        super().__init__(world, node_id)
        self.name = name
        self.pid = self.rng.getrandbits(40)
        self.generation = {self.pid: 0}
        self.unsettled: dict[int, dict[int, int]] = {}     # partition -> pid -> shipments not settled
        self.held: dict[int, list[_Shipment]] = {}
        self.next_seq: dict[int, int] = {}
        self.sent = 0
        self.in_flight = 0
        self.retries: list[_Retry] = []
        self._order = 0
        self.running = True

    def start(self) -> None:
        self.world.scheduler.schedule(self.rng.randint(1, 10), "produce", self._tick)

    def _tick(self) -> None:
        s = self.world.settings
        if self.running:
            self.world.scheduler.schedule(s.send_every_ms, "produce", self._tick)
        now = self.world.clock.now_ms
        if self.running and self.in_flight < s.max_in_flight:
            partition = self.rng.randrange(s.partitions)
            count = self.rng.randint(1, 3)
            indexes = tuple(range(self.sent, self.sent + count))
            self.sent += count
            seq = self.next_seq.get(partition, 0)
            self.next_seq[partition] = seq + count
            values = tuple(f"{self.name}-{i}".encode() for i in indexes)
            counts = self.unsettled.setdefault(partition, {})
            counts[self.pid] = counts.get(self.pid, 0) + 1
            self._issue(_Shipment(partition, self.pid, seq, values, indexes, now + s.delivery_timeout_ms))

    @property
    def settled(self) -> bool:
        return not self.pending and not self.retries and self.in_flight == 0 and not any(self.held.values())

    def _issue(self, shipment: _Shipment) -> None:
        mine = self.generation[shipment.pid]
        if any(n and self.generation[pid] < mine for pid, n in self.unsettled.get(shipment.partition, {}).items()
               if pid != shipment.pid):
            self.held.setdefault(shipment.partition, []).append(shipment)
            return
        self.in_flight += 1
        leader = self.leaders.get(shipment.partition)
        if leader is None:
            self.refresh()
            self._failed(shipment, BrokerNotAvailableError("no leader known"), appended=False)
            return
        s = self.world.settings
        frame = SimFrame(-1, -1, shipment.pid, 0, shipment.seq, shipment.values)
        call = self.call(shipment, s.request_timeout_ms)
        self.world.send(Produce(self.node_id, leader, call, shipment.partition, (frame,), True, s.request_timeout_ms))

    def timed_out(self, context: Any) -> None:
        if isinstance(context, _Shipment):
            self._failed(context, RequestTimeoutError("request timed out"), appended=None)
        else:
            self.timed_out_metadata()

    def on_message(self, message: Any) -> None:
        if isinstance(message, MetadataAnswer):
            self.on_metadata(message)
            return
        if not isinstance(message, ProduceAnswer):
            return
        shipment = self.pending.pop(message.call, None)
        if shipment is None:
            return  # the call had timed out: its answer is dropped, as gRPC does
        if message.error is None:
            self.in_flight -= 1
            for i, (value, index) in enumerate(zip(shipment.values, shipment.indexes)):
                op = Send(shipment.partition, value, True, message.base_offset + i, producer=self.name, index=index)
                self.world.record(op)
                self.world.invariants.on_ack(op)
            self._settle(shipment)
        else:
            self._failed(shipment, message.error, appended=message.base_offset >= 0)

    def _failed(self, shipment: _Shipment, error: Exception, *, appended: bool | None) -> None:
        """``Producer._failed``."""
        self.in_flight -= 1
        assert isinstance(error, SparkLogError), error
        if appended or (appended is None and not error.refused_before_write):
            shipment.maybe_written = True
        now = self.world.clock.now_ms
        retriable = error.retriable or (isinstance(error, OutOfOrderSequenceError) and shipment.attempts < 20)
        if retriable and now < shipment.deadline:
            if error.refresh_metadata or isinstance(error, OutOfOrderSequenceError):
                self.refresh()
            shipment.attempts += 1
            delay = min(_BACKOFF_MS * 2 ** min(shipment.attempts - 1, 5), _BACKOFF_MAX_MS)
            self._order += 1
            heapq.heappush(self.retries, _Retry(now + delay, self._order, shipment))
            self.in_flight += 1   # still counts against max_in_flight while it waits for its retry
            self.world.scheduler.schedule(delay, "retry", self._retry_due)
            return
        for value, index in zip(shipment.values, shipment.indexes):
            self.world.record(Send(shipment.partition, value, False, definite=not shipment.maybe_written,
                                   producer=self.name, index=index))
        if shipment.pid == self.pid:   # Producer._lost_sequences: a fresh id, sequences from 0
            self.pid = self.rng.getrandbits(40)
            self.generation[self.pid] = len(self.generation)
            self.next_seq.clear()
        self._settle(shipment)

    def _settle(self, shipment: _Shipment) -> None:
        """``Producer._unsettle``: the held shipments of newer ids go once older ids are settled."""
        counts = self.unsettled[shipment.partition]
        counts[shipment.pid] -= 1
        if counts[shipment.pid]:
            return
        del counts[shipment.pid]
        for held in self.held.pop(shipment.partition, []):
            self._issue(held)

    def _retry_due(self) -> None:
        now = self.world.clock.now_ms
        while self.retries and self.retries[0].at <= now:
            self.in_flight -= 1
            self._issue(heapq.heappop(self.retries).shipment)


class SimConsumer(_Client):
    def __init__(self, world: World, node_id: int, name: str) -> None:
        super().__init__(world, node_id)
        self.name = name
        self.positions = {p: 0 for p in range(world.settings.partitions)}
        self.seeked = {p: True for p in self.positions}
        self.busy: set[int] = set()
        self.running = True

    def start(self) -> None:
        self.world.scheduler.schedule(self.rng.randint(1, 10), "poll", self._tick)

    def _tick(self) -> None:
        if not self.running:
            return
        self.world.scheduler.schedule(self.world.settings.poll_every_ms, "poll", self._tick)
        for partition, position in self.positions.items():
            if partition in self.busy:
                continue
            leader = self.leaders.get(partition)
            if leader is None:
                self.refresh()
                continue
            self.busy.add(partition)
            call = self.call(("fetch", partition, position), self.world.settings.request_timeout_ms)
            self.world.send(ConsumerFetch(self.node_id, leader, call, partition, position))
            # "latest", as a Spark reader plans each micro-batch (the invariants check every answer)
            call = self.call(("list", partition), self.world.settings.request_timeout_ms)
            self.world.send(ListOffsets(self.node_id, leader, call, partition))

    def timed_out(self, context: Any) -> None:
        if context[0] == "fetch":
            self.busy.discard(context[1])
        elif context[0] == "metadata":
            self.timed_out_metadata()

    def on_message(self, message: Any) -> None:
        if isinstance(message, MetadataAnswer):
            self.on_metadata(message)
            return
        if isinstance(message, ListOffsetsAnswer):
            self.pending.pop(message.call, None)
            return
        if not isinstance(message, ConsumerFetchAnswer):
            return
        context = self.pending.pop(message.call, None)
        if context is None:
            return
        _, partition, position = context
        self.busy.discard(partition)
        if position != self.positions[partition]:
            return
        if message.error is not None:
            if isinstance(message.error, OffsetOutOfRangeError):
                self.positions[partition], self.seeked[partition] = 0, True
            elif getattr(message.error, "retriable", False):
                self.refresh()
            return
        if message.records:
            self.world.record(Poll(self.name, partition, message.records, after_seek=self.seeked[partition]))
            self.seeked[partition] = False
        if message.next_offset > position:
            self.positions[partition] = message.next_offset


class FinalReader(_Client):
    """Reads every partition from 0 to its "latest" (asked first, retried until answered)."""

    def __init__(self, world: World, node_id: int) -> None:
        super().__init__(world, node_id)
        self.ends: dict[int, int] = {}
        self.records: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(world.settings.partitions)}
        self.positions = {p: 0 for p in range(world.settings.partitions)}
        self.busy: set[int] = set()

    @property
    def done(self) -> bool:
        return len(self.ends) == len(self.positions) and all(self.positions[p] >= e for p, e in self.ends.items())

    def finals(self) -> list[FinalRead]:
        return [FinalRead(p, tuple(records)) for p, records in self.records.items()]

    def start(self) -> None:
        self.world.scheduler.schedule(1, "final-read", self._tick)

    def _tick(self) -> None:
        if self.done:
            return
        self.world.scheduler.schedule(10, "final-read", self._tick)
        timeout = self.world.settings.request_timeout_ms
        for partition in self.positions:
            if partition in self.busy:
                continue
            leader = self.leaders.get(partition)
            if leader is None:
                self.refresh()
                continue
            if partition not in self.ends:
                self.busy.add(partition)
                self.world.send(ListOffsets(self.node_id, leader, self.call(("list", partition), timeout), partition))
            elif self.positions[partition] < self.ends[partition]:
                self.busy.add(partition)
                position = self.positions[partition]
                call = self.call(("fetch", partition, position), timeout)
                self.world.send(ConsumerFetch(self.node_id, leader, call, partition, position))

    def timed_out(self, context: Any) -> None:
        if context[0] in ("list", "fetch"):
            self.busy.discard(context[1])
        else:
            self.timed_out_metadata()

    def on_message(self, message: Any) -> None:
        if isinstance(message, MetadataAnswer):
            self.on_metadata(message)
            return
        context = self.pending.pop(getattr(message, "call", -1), None)
        if context is None:
            return
        partition = context[1]
        self.busy.discard(partition)
        if message.error is not None:
            self.refresh()
            return
        if isinstance(message, ListOffsetsAnswer):
            self.ends[partition] = message.offset
        elif isinstance(message, ConsumerFetchAnswer) and context[2] == self.positions[partition]:
            self.records[partition].extend((o, v) for o, v in message.records if o < self.ends[partition])
            if message.next_offset > self.positions[partition]:
                self.positions[partition] = message.next_offset
