"""The fetch path: a long poll over the requested partitions.

``handle(request)`` reads every requested partition from its fetch offset and answers when
at least ``min_bytes`` of stored data were read (for pushdown: scanned), when a partition
errs, or when ``max_wait_ms`` has passed.  In between it waits on the partition manager's
data condition (every append anywhere on this broker notifies it), never sleeps.

Budget: ``max_bytes`` (default 64 MiB) over the whole answer and ``partition_max_bytes``
per partition; the first partition with data gets at least one whole frame even when that
frame is larger (so a consumer always makes progress).

Consumers (``replica_id`` < 0) read below the high watermark (``READ_COMMITTED``: the last
stable offset, with the aborted transactions among the frames read, so the client drops
their records), and below a partition's
``max_offset`` when it is > 0 (a bounded reader of ``[start, end)``: no frame whose base
offset is >= ``max_offset``, the frame straddling it comes whole; a request whose every
partition is already at its bound is answered at once).  Without pushdown the answer
holds the stored frames as they are (the first may start before ``fetch_offset``).  Every
partition answer carries ``next_fetch_offset``: where the next fetch should start.
A consumer partition's ``current_leader_epoch`` >= 0 must equal this replica's leader epoch
(KIP-320, ``check_client_leader_epoch``: older ``FencedLeaderEpochError``, newer
``UnknownLeaderEpochError``; -1 is not checked), so a client that has seen a newer leader
never reads from a deposed one.
Follower fetches (``replica_id`` >= 0) go to ``LeaderFetchHandler`` (``leader_fetch.py``).
Deadlines come from the broker's injected clock.
"""
from __future__ import annotations

from typing import Callable

from brokers.metadata.image import TopicImage
from brokers.metrics.counters import BrokerCounters
from brokers.partition import Isolation, PartitionOffsets
from brokers.partition.core import check_client_leader_epoch
from spark_log.errors import InvalidRequestError, SparkLogError, StorageError, UnknownTopicOrPartitionError
from spark_log.proto import broker_pb2 as pb

from .errors import to_pb
from .leader_fetch import LeaderFetchHandler
from .partition_manager import PartitionManager
from .pushdown import Pushdown
from .wire import ARROW_STREAM, RECORDS, FetchPart, Payload, encode_fetch_response

__all__ = ["FetchHandler"]

_DEFAULT_MAX_BYTES = 64 << 20
_MAX_WAIT_MS = 60_000


class FetchHandler:
    """Answers Fetch requests (see the module docstring)."""

    def __init__(self, manager: PartitionManager, *, follower_fetches: LeaderFetchHandler | None = None,
                 counters: BrokerCounters | None = None) -> None:
        self.manager = manager
        self.counters = counters if counters is not None else BrokerCounters(manager.broker_id)
        self._clock = manager.clock
        self.follower_fetches = follower_fetches  # None: this broker serves no follower fetches

    def handle(self, request: pb.FetchRequest, *, is_active: Callable[[], bool] = lambda: True) -> bytes:
        """Answer ``request`` (module docstring) as a serialised ``FetchResponse`` (see
        ``wire.py``); ``is_active`` false ends the wait early (the client went away)."""
        if request.replica_id >= 0:
            if self.follower_fetches is None:
                raise InvalidRequestError("this broker does not serve follower fetches")
            return encode_fetch_response(self.follower_fetches.handle(request, is_active=is_active))
        return encode_fetch_response(self.collect(request, is_active=is_active))

    def collect(self, request: pb.FetchRequest, *, is_active: Callable[[], bool] = lambda: True) -> list[FetchPart]:
        """A consumer fetch's answer as ``(result, payload field, payload)`` per partition:
        what ``handle`` serialises, and what the data listener (``data_listener.py``)
        encodes in its own framing."""
        if request.replica_id >= 0:
            raise InvalidRequestError("follower fetches are answered by handle(), not collect()")
        if request.max_wait_ms < 0 or request.max_wait_ms > _MAX_WAIT_MS:
            raise InvalidRequestError(f"max_wait_ms must be within 0..{_MAX_WAIT_MS}, got {request.max_wait_ms}")
        if request.max_bytes < 0 or request.min_bytes < 0:
            raise InvalidRequestError("min_bytes and max_bytes must be >= 0")
        isolation = (Isolation.READ_COMMITTED if request.isolation_level == pb.READ_COMMITTED
                     else Isolation.READ_UNCOMMITTED)
        pushdowns: dict[str, Pushdown] = {}
        if request.project or request.row_filter:
            for name in {p.topic for p in request.partitions}:
                topic = self.manager.image.topics.get(name)
                if topic is not None:
                    pushdowns[name] = self._pushdown(request, topic)
        deadline_ms = self._clock.monotonic_ms() + request.max_wait_ms
        if request.partitions and all(0 < p.max_offset <= p.fetch_offset for p in request.partitions):
            deadline_ms = 0  # every partition is at its bound: nothing to wait for
        while True:
            seen = self.manager.data_version
            parts, scanned, failed = self._read_all(request, pushdowns, isolation)
            remaining_ms = deadline_ms - self._clock.monotonic_ms()
            if scanned >= max(1, request.min_bytes) or failed or remaining_ms <= 0 or not is_active():
                self._count(request, parts)
                return parts
            self.manager.wait_for_data(seen, remaining_ms / 1000)

    def _count(self, request: pb.FetchRequest, parts: list[FetchPart]) -> None:
        """Records (offsets handed out: ``next_fetch_offset - fetch_offset``) and stored
        bytes of the answer, per partition that returned data."""
        for wanted, (result, _, payload) in zip(request.partitions, parts):
            if payload is not None and result.next_fetch_offset > wanted.fetch_offset:
                self.counters.fetched(wanted.topic, result.next_fetch_offset - wanted.fetch_offset, len(payload))

    @staticmethod
    def _pushdown(request: pb.FetchRequest, topic: TopicImage) -> Pushdown:
        return Pushdown(project=request.project, columns=list(request.columns), row_filter=request.row_filter,
                        topic=topic)

    def _read_all(self, request: pb.FetchRequest, pushdowns: dict[str, Pushdown],
                  isolation: Isolation) -> tuple[list[FetchPart], int, bool]:
        parts: list[FetchPart] = []
        budget = request.max_bytes or _DEFAULT_MAX_BYTES
        scanned = 0
        failed = False
        for wanted in request.partitions:
            result = pb.FetchPartitionResult(topic=wanted.topic, partition=wanted.partition, high_watermark=-1,
                                             last_stable_offset=-1, log_start_offset=-1, log_end_offset=-1,
                                             next_fetch_offset=wanted.fetch_offset, preferred_read_replica=-1)
            field, payload = RECORDS, None
            try:
                read, field, payload = self._read_one(wanted, result, budget - scanned, first=scanned == 0,
                                                      pushdown=pushdowns.get(wanted.topic),
                                                      needs_pushdown=bool(request.project or request.row_filter),
                                                      isolation=isolation)
                scanned += read
            except SparkLogError as exc:
                if isinstance(exc, StorageError):
                    self.counters.storage_error("fetch", wanted.topic, wanted.partition, exc)
                result.error.CopyFrom(to_pb(exc))
                failed = True
            parts.append((result, field, payload))
        return parts, scanned, failed

    def _read_one(self, wanted: pb.FetchPartition, result: pb.FetchPartitionResult, budget: int, *, first: bool,
                  pushdown: Pushdown | None, needs_pushdown: bool,
                  isolation: Isolation) -> tuple[int, int, Payload]:
        """Read one partition into ``result``: ``(stored bytes scanned, wire field, payload)``
        (the stored frames, or an Arrow stream after pushdown)."""
        partition = self.manager.get(wanted.topic, wanted.partition)
        check_client_leader_epoch(f"{wanted.topic}-{wanted.partition}", wanted.current_leader_epoch,
                                  partition.leader_epoch)
        if needs_pushdown and pushdown is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {wanted.topic!r}")
        last_epoch = wanted.last_fetched_epoch if wanted.HasField("last_fetched_epoch") else -1
        diverging = partition.consumer_divergence(wanted.fetch_offset, last_epoch)
        if diverging is not None:  # KIP-320: the consumer read records this log no longer has
            _set_offsets(result, partition.offsets())
            result.diverging_epoch.epoch, result.diverging_epoch.end_offset = diverging
            return 0, RECORDS, None
        limit = budget if wanted.partition_max_bytes <= 0 else min(budget, wanted.partition_max_bytes)
        if limit <= 0 and not first:
            _set_offsets(result, partition.offsets())
            return 0, RECORDS, None
        fetched = partition.read(wanted.fetch_offset, max_bytes=max(1, limit), isolation=isolation,
                                 max_offset=wanted.max_offset if wanted.max_offset > 0 else None)
        _set_offsets(result, fetched.offsets)
        for producer_id, first_offset, last_offset in fetched.aborted:
            result.aborted_transactions.add(producer_id=producer_id, first_offset=first_offset,
                                            last_offset=last_offset)
        read = fetched.result
        if not read.data:
            return 0, RECORDS, None
        result.next_fetch_offset = read.next_offset
        if pushdown is None:
            return len(read.data), RECORDS, read.data  # stored bytes, copied once into the answer
        stream, _ = pushdown.apply(read.data, fetch_offset=wanted.fetch_offset, partition=wanted.partition,
                                   aborted=fetched.aborted)
        return len(read.data), ARROW_STREAM, stream


def _set_offsets(result: pb.FetchPartitionResult, offsets: PartitionOffsets) -> None:
    result.high_watermark, result.last_stable_offset = offsets.high_watermark, offsets.last_stable_offset
    result.log_start_offset, result.log_end_offset = offsets.log_start_offset, offsets.log_end_offset
