"""The leader's answer to follower fetches (``FetchRequest.replica_id >= 0``).

Per partition, one call to ``Partition.answer_follower_fetch`` (one lock round trip), whose
core decides:

0. the replica hosted here must be of the topic id the follower names (KIP-516; empty: not
   checked): a topic deleted and created again under the same name starts at leader epoch 0
   again, often with the same leader, so the epoch cannot tell the two apart, and a follower
   whose broker applied the re-creation first would take the deleted topic's records into
   its new replica (never truncated: the new log's epoch 0 starts at offset 0 too).  Another
   id: ``InconsistentTopicIdError`` for that partition, nothing read;
1. the partition must be led here in the follower's ``current_leader_epoch`` (a lower
   epoch: ``FencedEpochError``; a higher one or no leadership: ``NotLeaderError``), and the
   fetching broker must be a replica;
2. divergence (``brokers.partition.divergence.leader_check``): a diverging follower gets
   ``diverging_epoch`` and no records; it truncates and fetches again;
3. otherwise ``fetch_offset`` is the follower's LEO: it is counted (and when the follower
   is caught up); a grown HW wakes acks=all producers (at once) and long polls (once the
   answer is built); a follower outside the ISR that caught up pokes the ISR updater;
4. frames from ``fetch_offset`` up to the LEO (not capped by the HW) are returned with the
   HW, LSO, log start and log end offsets.

Long poll as for consumers: the answer waits (at most ``max_wait_ms``, by the broker's
injected clock) until some partition has records, diverges or errs.  Its own HW
notifications do not end the wait (each bumps the broker's ``data_version`` by one and is
discounted); a wait that runs out with nothing new returns the answer already built (an
idle round costs one pass over the partitions, not two).  Fault hook: a leader that
``blocked`` the fetching broker refuses the whole request (``BrokerNotAvailableError``).

Fetch sessions (``answer_session``, the data listener's ``REPLICA_FETCH_SESSION``): the
connection's ``ReplicaSession`` holds the follower's requests; each pass fetches every
partition of it and answers only those with something new.  A partition whose follower was
caught up at its last full answer and whose ``settle_token`` is unchanged is counted with
``Partition.settled_follower_fetch`` instead (the follower's fetch times move; nothing else
can: the token holds every input of the decision besides the request).  Across the passes
of one long poll the latest answer of each partition is kept, so an answer built by the
first pass and superseded by nothing is still sent.

``answer`` takes and gives plain tuples (``ReplicaWanted``, ``ReplicaPart``): the data
listener's ``REPLICA_FETCH`` (``replica_listener.py``) encodes them by hand, so an idle
round of 1,000 partitions builds no protobuf message; ``handle`` (the gRPC ``Fetch``) turns
them into ``FetchPart`` (``wire.py``) that ``FetchHandler`` serialises with
``encode_fetch_response``.  Either way the frames read from the log are copied once, into
the answer.

Thread-safety: called from gRPC threads; all partition state is the ``Partition``'s.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

from brokers.net.faults import FetchFaults
from brokers.partition import FollowerFetch, FollowerFetchAnswer, Partition
from brokers.partition.messages import Diverging
from brokers.replica.replica_wire import ReplicaWanted
from spark_log.errors import (
    BrokerNotAvailableError,
    InconsistentTopicIdError,
    InvalidRequestError,
    OffsetOutOfRangeError,
    SparkLogError,
)
from spark_log.proto import broker_pb2 as pb

from .errors import to_pb
from .partition_manager import PartitionManager
from .replica_session import ReplicaSession
from .wire import RECORDS, FetchPart

__all__ = ["LeaderFetchHandler", "ReplicaPart"]

_DEFAULT_MAX_BYTES = 64 << 20
_MAX_WAIT_MS = 60_000


class ReplicaPart(NamedTuple):
    """One partition of the answer: an error (the offsets then -1, except the log start of
    an ``OffsetOutOfRangeError`` that names it), a diverging hint, or the offsets and the
    frames read (empty: nothing new)."""

    topic: str
    partition: int
    error: SparkLogError | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    next_fetch_offset: int
    diverging: Diverging | None
    records: bytes | memoryview


class LeaderFetchHandler:
    """Answers follower fetches for the partitions this broker leads (module docstring)."""

    def __init__(self, *, manager: PartitionManager, faults: FetchFaults,
                 on_expandable: Callable[[], None] = lambda: None) -> None:
        self.manager = manager
        self.faults = faults
        self._clock = manager.clock
        self._on_expandable = on_expandable

    def handle(self, request: pb.FetchRequest, *, is_active: Callable[[], bool] = lambda: True) -> list[FetchPart]:
        """The gRPC ``Fetch`` of a follower: ``answer`` in protobuf form."""
        wanted = [ReplicaWanted(p.topic, p.partition, p.fetch_offset, p.current_leader_epoch, p.last_fetched_epoch,
                                p.log_start_offset, p.partition_max_bytes, p.topic_id) for p in request.partitions]
        parts = self.answer(request.replica_id, request.max_wait_ms, request.max_bytes, wanted, is_active=is_active)
        return [_to_fetch_part(part) for part in parts]

    def answer(self, replica_id: int, max_wait_ms: int, max_bytes: int, wanted: Sequence[ReplicaWanted], *,
               is_active: Callable[[], bool] = lambda: True) -> list[ReplicaPart]:
        """A follower's fetch of ``wanted`` (module docstring); ``max_bytes`` 0: the default."""
        response: list[ReplicaPart] = []

        def one_pass() -> tuple[bool, int]:
            nonlocal response
            response, done, notified = self._answer(replica_id, max_bytes, wanted)
            return done, notified

        self._long_poll(replica_id, max_wait_ms, one_pass, is_active)
        return response

    def answer_session(self, session: ReplicaSession, max_wait_ms: int, max_bytes: int, *,
                       is_active: Callable[[], bool] = lambda: True) -> list[ReplicaPart]:
        """A fetch of every partition of ``session`` (``replica_session.py``), answering only
        those with something new for the follower: records, an error, a diverging hint or
        offsets it was not told yet.  A partition whose follower was caught up and whose
        state did not change since is counted with ``Partition.settled_follower_fetch``."""
        told: dict[tuple[str, int], ReplicaPart] = {}  # across the passes of one long poll: the latest per partition
        self._long_poll(session.replica_id, max_wait_ms,
                        lambda: self._answer_session(session, max_bytes, told), is_active)
        return list(told.values())

    def _long_poll(self, replica_id: int, max_wait_ms: int, one_pass: Callable[[], tuple[bool, int]],
                   is_active: Callable[[], bool]) -> None:
        """Run ``one_pass`` (whether to answer now, how many HW notifications it sent) until
        it has something to answer, ``max_wait_ms`` ran out or the broker stops."""
        if max_wait_ms < 0 or max_wait_ms > _MAX_WAIT_MS:
            raise InvalidRequestError(f"max_wait_ms must be within 0..{_MAX_WAIT_MS}, got {max_wait_ms}")
        self.faults.refresh()
        if self.faults.blocked(replica_id):
            raise BrokerNotAvailableError(f"replica fetches from broker {replica_id} are blocked (fault hook)")
        deadline_ms = self._clock.monotonic_ms() + max_wait_ms
        while True:
            seen = self.manager.data_version
            done, notified = one_pass()
            remaining_ms = deadline_ms - self._clock.monotonic_ms()
            if done or remaining_ms <= 0 or not is_active():
                return
            if self.manager.data_version == seen + notified:
                seen += notified  # only our own HW notifications moved it: nothing new to answer with
            if self.manager.wait_for_data(seen, remaining_ms / 1000) == seen and \
                    self._clock.monotonic_ms() >= deadline_ms:
                return  # an idle wait ran out with nothing new: the answer stands (no second pass)

    def _answer_session(self, session: ReplicaSession, max_bytes: int,
                        told: dict[tuple[str, int], ReplicaPart]) -> tuple[bool, int]:
        """One pass over ``session``: what is new goes into ``told``; (whether to answer now,
        HW notifications sent)."""
        replica_id = session.replica_id
        step = _Pass(self.manager, replica_id, max_bytes)
        for key, entry in session.entries.items():
            token = entry.token
            if token is not None and entry.partition is not None and \
                    entry.partition.settled_follower_fetch(replica_id, token):
                continue
            part, fetched = step.fetch(entry.wanted)
            if fetched is None:  # refused
                told[key] = part
                entry.token = entry.told = None
                continue
            entry.partition, entry.token = fetched[0], fetched[1].settle_token
            state = (part.high_watermark, part.last_stable_offset, part.log_start_offset, part.log_end_offset)
            if len(part.records) or part.diverging is not None or state != entry.told:
                told[key] = part
                entry.told = None if part.diverging is not None else state  # a diverging follower takes no HW
        return step.finish(self._on_expandable)

    def _answer(self, replica_id: int, max_bytes: int,
                wanted: Sequence[ReplicaWanted]) -> tuple[list[ReplicaPart], bool, int]:
        """(answer, whether to send it now, how many HW notifications it sent: each bumped the
        manager's ``data_version`` by one)."""
        step = _Pass(self.manager, replica_id, max_bytes)
        response = [step.fetch(w)[0] for w in wanted]
        done, notified = step.finish(self._on_expandable)
        return response, done, notified


class _Pass:
    """One pass over a fetch's partitions: the byte budget left, whether to answer now
    (records, an error or a diverging hint), the partitions whose HW grew and whether a
    follower may rejoin an ISR."""

    __slots__ = ("get", "replica_id", "budget", "done", "grown", "expandable")

    def __init__(self, manager: PartitionManager, replica_id: int, max_bytes: int) -> None:
        self.get = manager.get
        self.replica_id = replica_id
        self.budget = max_bytes or _DEFAULT_MAX_BYTES
        self.done = False
        self.grown: list[Partition] = []
        self.expandable = False

    def fetch(self, wanted: ReplicaWanted) -> tuple[ReplicaPart, tuple[Partition, FollowerFetchAnswer] | None]:
        """One partition's answer, and the replica with its ``answer_follower_fetch`` (None
        when refused: the answer carries the error)."""
        topic, index, fetch_offset, leader_epoch, last_epoch, _log_start, partition_max, topic_id = wanted
        budget = self.budget
        try:
            partition = self.get(topic, index)
            if topic_id and partition.topic_id != topic_id:
                raise InconsistentTopicIdError(f"{topic}-{index}: this broker's replica is of topic id "
                                               f"{partition.topic_id}, the fetch names {topic_id} (the topic was "
                                               "deleted and created again)")
            limit = budget if partition_max <= 0 else min(budget, partition_max)
            answer = partition.answer_follower_fetch(
                FollowerFetch(self.replica_id, fetch_offset, leader_epoch, last_epoch),
                max_bytes=max(1, limit) if budget > 0 else 0)
        except SparkLogError as exc:
            self.done = True
            return _error_part(topic, index, fetch_offset, exc), None
        offsets = answer.offsets
        records = answer.records
        if answer.diverging is not None:
            self.done = True
        else:
            if answer.hw_grew:
                self.grown.append(partition)
            self.expandable = self.expandable or answer.expand_candidate
            if records:
                self.budget -= len(records)
                self.done = True
        part = ReplicaPart(topic, index, None, offsets.high_watermark, offsets.last_stable_offset,
                           offsets.log_start_offset, offsets.log_end_offset,
                           answer.next_fetch_offset if records else fetch_offset, answer.diverging,
                           records)  # a diverging answer reads no frames
        return part, (partition, answer)

    def finish(self, on_expandable: Callable[[], None]) -> tuple[bool, int]:
        """Poke the ISR updater and wake the long polls once for the pass; (whether to answer
        now, how many HW notifications were sent: each bumped the manager's
        ``data_version`` by one)."""
        if self.expandable:
            on_expandable()
        for partition in self.grown:
            partition.wake_long_polls()
        return self.done, len(self.grown)


def _error_part(topic: str, index: int, fetch_offset: int, exc: SparkLogError) -> ReplicaPart:
    """A partition refused: the offsets -1, except the log start an ``OffsetOutOfRangeError``
    names (the follower starts there)."""
    start = -1
    if isinstance(exc, OffsetOutOfRangeError) and "log_start_offset" in exc.details:
        start = int(exc.details["log_start_offset"])
    return ReplicaPart(topic, index, exc, -1, -1, start, -1, fetch_offset, None, b"")


def _to_fetch_part(part: ReplicaPart) -> FetchPart:
    """``part`` as the gRPC ``Fetch`` answer carries it."""
    result = pb.FetchPartitionResult(topic=part.topic, partition=part.partition, high_watermark=part.high_watermark,
                                     last_stable_offset=part.last_stable_offset,
                                     log_start_offset=part.log_start_offset, log_end_offset=part.log_end_offset,
                                     next_fetch_offset=part.next_fetch_offset, preferred_read_replica=-1)
    if part.error is not None:
        result.error.CopyFrom(to_pb(part.error))
    if part.diverging is not None:
        result.diverging_epoch.epoch = part.diverging.epoch
        result.diverging_epoch.end_offset = part.diverging.end_offset
    return result, RECORDS, part.records if len(part.records) else None
