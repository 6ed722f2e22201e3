"""``Consumer``: reads assigned partitions from their leaders, as Arrow or as records.

Fetching.  The consumer keeps at most one Fetch call outstanding per (leader, topic), a
long poll that the broker answers once data is there (or after ``fetch_max_wait_ms``).  As
soon as a response is taken, the next fetch to that broker is issued, so the broker reads
while this process decodes (prefetch).  A response is used only if its fetch offsets still
equal the positions (a ``seek`` discards it), so positions advance exactly once per record.
``poll(timeout)`` returns as soon as records are there, else after ``timeout``: an answer
without records (a prefetch that waited out ``fetch_max_wait_ms`` before the records came,
or a retriable error) does not end it, as in Kafka's ``poll``.

Pushdown.  With ``columns`` and/or ``row_filter`` the brokers decode, filter and project
and send only the selected rows and columns (``row_filter`` is a
``pyarrow.compute.Expression`` or pyarrow's DNF list, over the topic's columns plus
``offset``, ``timestamp``, ``partition``).  Without them the stored frames travel undecoded
and are decoded here (zero-copy when uncompressed).

Output.  ``poll_arrow`` returns record batches with the topic's columns (or the projected
ones) plus ``timestamp`` (timestamp[ms]), ``topic``, ``partition`` (int32) and ``offset``
(int64); batches written with an older compatible schema are widened with null columns.

Bounds.  ``seek(topic, partition, start, end=E)`` makes the partition a bounded range
``[start, E)``: fetches carry ``max_offset=E`` so the broker sends no frame at or past ``E``
(only a frame straddling ``E`` comes whole), nothing is fetched or prefetched once the
position reaches ``E``, and ``poll`` returns no record at or past ``E`` (the position then
stays at ``E``).  A ``seek`` without ``end`` removes the bound.

Gaps.  Offsets need not be dense: compaction removes records but never renumbers the
others, and control frames take offsets too.  The broker's ``next_fetch_offset`` moves
the position past a gap; records come with their own offsets (``spark_log.frame``'s
version-2 frames carry them), and a gap is never reported as lost data.

Security and quotas.  ``security`` (``ClientSecurity``) and ``client_id`` apply to every
connection; refusals (``AuthenticationError``, ``TopicAuthorizationError`` without READ)
are raised by ``poll``/``poll_arrow``.  A broker that reports ``throttle_time_ms`` (a
consumer byte-rate quota) gets one fetch in flight from this consumer until it answers
unthrottled; ``throttled`` and ``throttle_time_ms`` count the throttled answers.

Union read (tiering, ``spark_log/tier.py``).  A tiered topic's records below the brokers'
log start live in its Delta table.  A position there (the brokers answer
``OffsetOutOfRangeError``) that the tier holds (``[tier_start, tiered_end)``, as the
partition's leader reports it) is read from the Delta table, up to ``_TIER_WINDOW`` offsets
per poll, until the position reaches the tier's end, where the brokers' log takes over:
the tier ends at or past the log start, so nothing is skipped or read twice.  Only a
position below both (gone from the tier too) is out of range.  The tier holds committed
records only, so a ``read_uncommitted`` reader sees no aborted record there.  ``columns``
and ``row_filter`` are applied here to tier rows.  "earliest" is the tier's start.

Positions.  ``assign`` starts each partition at ``auto_offset_reset`` ("latest", as Kafka,
or "earliest"); the same policy answers an out-of-range position ("none": raise
``OffsetOutOfRangeError``).  With ``group_id``, an assigned partition starts at the group's
committed offset, looked up (one OffsetFetch for all of them) when its position is first
needed; ``auto_offset_reset`` applies only where the group has none, as Kafka's
``assign`` + ``group.id`` consumer.

Groups.  With ``group_id`` the consumer commits offsets to the group (``commit``,
``commit_async``, auto-commit) and reads them (``committed``); ``subscribe`` makes it a
member: the group's coordinator assigns partitions (``_group_session.py`` reconciles on
the poll thread, calling ``on_revoked`` / ``on_assigned``), and a newly assigned
partition starts at the group's committed offset (none: ``auto_offset_reset``).
``close`` commits (auto-commit), and leaves the group.  ``pause``/``resume`` stop and
restart fetching partitions without giving them up; ``max_poll_records`` caps what one
poll returns (the rest waits in a buffer; ``position`` counts only what was returned).

Thread-safety: one thread at a time (the group's heartbeat and commit threads are the
consumer's own).
"""
from __future__ import annotations

import logging
import queue
import re
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence, cast

import grpc
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from . import errors
from .arrays import int64_array, timestamp_ms_array
from ._client_metrics import ClientMetrics
from ._client import Cluster, error_from_pb
from .fetch_wire import parse_fetch_response
from ._group_client import GroupRpc
from ._group_member import GroupSubscription
from ._group_session import Callback, ConsumerGroupMetadata, GroupSession, OffsetAndMetadata, OffsetsArg
from ._poll_buffer import PollBuffer
from ._pushdown import RowFilter, projection, to_expression
from ._records import add_reserved_columns, widen, with_append_time
from ._throttle import ThrottleGate
from ._tiering import TierInfo
from ._tiering import describe as describe_tier
from .security import ClientSecurity
from .errors import InvalidConfigError, OffsetOutOfRangeError, SparkLogError
from .filters import serialize_filter
from .frame import ATTR_CONTROL, ATTR_LOG_APPEND_TIME, FrameHeader, decode_batch, iter_frames, record_offsets
from .proto import broker_pb2 as pb
from .tier import TierTable, from_tier_table

__all__ = ["Consumer", "ConsumerRecord", "OffsetAndMetadata"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
EARLIEST, LATEST = -2, -1
_TIER_WINDOW = 1 << 16   # offsets read from the Delta tier per partition and poll
_RETRY_PAUSE_S = 0.05  # within one poll, the pause after a round of fetches that met a retriable error
_ANSWER_GRACE_S = 0.05  # a poll waits this much past its timeout for an answer already due
_ASSIGNORS = ("uniform", "range")  # the group coordinator's assignors (brokers/groups/assignors.py)


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """One record from ``Consumer.poll``.  Typed topics give ``value`` as a dict of columns
    and ``key`` None; ``timestamp`` is ms since the epoch."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: Any
    headers: list[tuple[str, bytes]]


class Consumer:
    """Reads records from assigned partitions (see the module docstring)."""

    def __init__(
        self,
        bootstrap: str | Sequence[str] | None = None,
        *,
        columns: Sequence[str] | None = None,
        row_filter: RowFilter | None = None,
        isolation_level: str = "read_uncommitted",
        auto_offset_reset: str = "latest",
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 64 << 20,
        max_partition_fetch_bytes: int = 16 << 20,
        request_timeout_ms: int = 30_000,
        security: ClientSecurity | None = None,
        client_id: str = "",
        group_id: str | None = None,
        enable_auto_commit: bool | None = None,
        auto_commit_interval_ms: int = 5_000,
        max_poll_records: int | None = None,
        session_timeout_ms: int = 45_000,
        max_poll_interval_ms: int = 300_000,
        group_instance_id: str | None = None,
        group_remote_assignor: str | None = None,
        transport: str = "auto",
    ) -> None:
        """``group_id``: the consumer group to commit to (and, with ``subscribe``, to be a
        member of); ``enable_auto_commit`` (default: true with a ``group_id``) commits the
        positions every ``auto_commit_interval_ms``, on revocation and on close;
        ``session_timeout_ms``: the coordinator removes the member this long after its last
        heartbeat; ``max_poll_interval_ms``: a member that does not poll for this long leaves
        the group (its partitions go to others; it rejoins at its next poll), and the
        coordinator removes a member that takes longer to give up revoked partitions; ``group_instance_id``: static membership (a restart
        within the session timeout gets the same partitions back); ``group_remote_assignor``:
        "uniform" or "range" (default: the brokers'); ``max_poll_records``: at most this many
        records per poll (default: no limit); ``transport``: "auto" (default) fetches over
        each broker's binary data listener when the client is plaintext, else over gRPC
        (``spark_log/_data_transport.py``), "grpc": always gRPC.  Invalid values:
        ``InvalidConfigError``."""
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigError("isolation_level must be 'read_uncommitted' or 'read_committed'", key="isolation_level")
        if auto_offset_reset not in ("latest", "earliest", "none"):
            raise InvalidConfigError("auto_offset_reset must be 'latest', 'earliest' or 'none'", key="auto_offset_reset")
        _non_negative(fetch_max_wait_ms, "fetch_max_wait_ms")
        _non_negative(fetch_min_bytes, "fetch_min_bytes")
        for name, value in (("fetch_max_bytes", fetch_max_bytes), ("max_partition_fetch_bytes", max_partition_fetch_bytes),
                            ("request_timeout_ms", request_timeout_ms)):
            _positive_or_none(value, name)
        if group_remote_assignor is not None and group_remote_assignor not in _ASSIGNORS:
            raise InvalidConfigError(f"group_remote_assignor must be one of {', '.join(map(repr, _ASSIGNORS))}, "
                                     f"got {group_remote_assignor!r}", key="group_remote_assignor")
        if enable_auto_commit is not None and not isinstance(enable_auto_commit, bool):
            raise InvalidConfigError(f"enable_auto_commit must be a bool, got {enable_auto_commit!r}",
                                     key="enable_auto_commit")
        self._isolation = pb.READ_COMMITTED if isolation_level == "read_committed" else pb.READ_UNCOMMITTED
        self._reset = auto_offset_reset
        self._columns = list(columns) if columns is not None else None
        self._filter = to_expression(row_filter) if row_filter is not None else None
        self._max_wait_ms = fetch_max_wait_ms
        self._min_bytes = fetch_min_bytes
        self._max_bytes = fetch_max_bytes
        self._partition_max = max_partition_fetch_bytes
        self._timeout_s = request_timeout_ms / 1000
        self._cluster = Cluster(bootstrap, request_timeout_s=self._timeout_s, security=security, client_id=client_id,
                                transport=transport)
        self._gate = ThrottleGate()
        self._metrics = ClientMetrics("consumer", ("records_consumed", "bytes_consumed", "polls", "fetch_requests",
                                                   "fetch_errors", "commits"),
                                      client_id=client_id, extra=lambda: {"throttled": self._gate.throttled,
                                                                          "throttle_time_ms": self._gate.throttle_time_ms})
        self._positions: dict[TopicPartition, int | None] = {}
        self._outstanding: dict[tuple[str, str], tuple[Any, dict[TopicPartition, int]]] = {}
        # completions: (key, call); a call no longer in _outstanding (forgotten) is ignored
        self._done: "queue.SimpleQueue[tuple[tuple[str, str], Any]]" = queue.SimpleQueue()
        self._filters: dict[tuple[str, int], bytes] = {}
        self._ends: dict[TopicPartition, int] = {}  # bounded partitions: read nothing at or past
        self._closed = False
        self._retriable_errors = 0  # fetch errors met so far that a retry may fix (poll pauses after one)
        self._deferred_error: SparkLogError | None = None  # a partition's error, raised once its answer's records are out
        # KIP-320: per partition, (position after the last frame read, that frame's leader epoch)
        self._read_epochs: dict[TopicPartition, tuple[int, int]] = {}
        self._paused: set[TopicPartition] = set()
        # assigned partitions (group_id) whose committed offset is still to be looked up
        self._uncommitted: set[TopicPartition] = set()
        self._buffer = PollBuffer(_positive_or_none(max_poll_records, "max_poll_records"))  # fetched, not returned
        self._tier_mode: dict[TopicPartition, TierInfo] = {}   # positions the Delta tier serves
        self._tier_tables: dict[str, TierTable] = {}
        for name, value in (("auto_commit_interval_ms", auto_commit_interval_ms),
                            ("session_timeout_ms", session_timeout_ms), ("max_poll_interval_ms", max_poll_interval_ms)):
            _positive_or_none(value, name)
        if group_id is None and (enable_auto_commit or group_instance_id is not None):
            raise InvalidConfigError("enable_auto_commit and group_instance_id need a group_id", key="group_id")
        self._group: GroupSession | None = None
        if group_id is not None:
            self._group = GroupSession(
                self, GroupRpc(self._cluster, timeout_s=self._timeout_s), group_id=group_id,
                enable_auto_commit=True if enable_auto_commit is None else enable_auto_commit,
                auto_commit_interval_ms=auto_commit_interval_ms, session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=max_poll_interval_ms, instance_id=group_instance_id,
                assignor=group_remote_assignor, client_id=client_id or "spark-log",
                require_stable=self._isolation == pb.READ_COMMITTED)

    # -- assignment and positions ----------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these ``(topic, partition)`` pairs (replaces any previous assignment)."""
        self._ensure_open()
        wanted = [(str(t), int(p)) for t, p in partitions]
        for topic, partition in wanted:
            info = self._cluster.topic(topic)
            if partition not in info.partitions:
                raise errors.UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
        if self._group is not None:
            self._group.manual(frozenset(wanted))
        previous = self._positions
        self._positions = {tp: previous.get(tp) for tp in wanted}
        if self._group is not None:
            # a partition without a position starts at the group's committed offset, fetched
            # (in one OffsetFetch) when the position is first needed: ``_resolve_unset``
            self._uncommitted |= {tp for tp in wanted if tp not in previous}
        self._forget_outside(set(self._positions))
        self._forget_fetches()

    @property
    def throttled(self) -> int:
        """How many fetch answers reported a quota throttle."""
        return self._gate.throttled

    @property
    def throttle_time_ms(self) -> int:
        """The total throttle time those answers reported."""
        return self._gate.throttle_time_ms

    def assignment(self) -> list[TopicPartition]:
        """The partitions this consumer reads: assigned, or given by its group."""
        self._ensure_open()
        return list(self._positions)

    def subscribe(self, topics: str | Sequence[str] | re.Pattern[str], *, on_assigned: Callback | None = None,
                  on_revoked: Callback | None = None) -> None:
        """Join the group (``group_id``) for ``topics`` (names, or a compiled regular
        expression matched in full against topic names; new matching topics are picked up).
        The group's coordinator assigns the partitions; ``on_revoked(partitions)`` runs on
        the poll thread before partitions are given up (after their positions were
        committed with auto-commit, before with ``commit`` in the callback), and also when
        they were lost (fenced); ``on_assigned(partitions)`` after new ones start at their
        committed offsets.  Calling it again changes the subscription.  Raises
        ``InvalidConfigError`` without ``group_id``, ``InvalidRequestError`` after ``assign``."""
        self._ensure_open()
        group = self._require_group("subscribe")
        if isinstance(topics, re.Pattern):
            subscription = GroupSubscription(pattern=topics.pattern)
        else:
            names = [topics] if isinstance(topics, str) else list(topics)
            if not names or any(not isinstance(t, str) or not t for t in names):
                raise errors.InvalidRequestError(f"subscribe takes topic names or a re.Pattern, got {topics!r}")
            subscription = GroupSubscription(topics=tuple(sorted(set(names))))
        if self._positions and not group.subscribed:
            raise errors.InvalidRequestError("this consumer assign()-ed partitions; a consumer either assigns or subscribes")
        group.subscribe(subscription, on_assigned, on_revoked)

    # -- committed offsets (groups) ----------------------------------------------------------

    def _require_group(self, what: str) -> GroupSession:
        self._ensure_open()
        if self._group is None:
            raise InvalidConfigError(f"{what} needs a consumer created with group_id=...", key="group_id")
        return self._group

    def _ensure_open(self) -> None:
        """Every public method but ``close``, ``metrics``, ``register_metrics`` and the
        throttle counters refuses a closed consumer (as Kafka's IllegalStateException)."""
        if self._closed:
            raise errors.InvalidRequestError("consumer is closed")

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This consumer in its group (group id, member id, member epoch), for
        ``Producer.send_offsets_to_transaction``."""
        return self._require_group("group_metadata").metadata()

    def commit(self, offsets: OffsetsArg | None = None, *, metadata: str = "") -> None:
        """Commit ``offsets`` (``{(topic, partition): offset | (offset, metadata) |
        OffsetAndMetadata}``; default: the position of every assigned partition) to the
        group and wait until the group's replicas hold them.  ``offset`` is the next record
        to read.  A member the group fenced (its partitions moved on) gets
        ``FencedMemberEpochError`` (``UnknownMemberIdError`` once removed) and drops its
        partitions at the next poll; a consumer that assigned its partitions commits only
        while the group has no members (else ``NonEmptyGroupError``)."""
        self._require_group("commit").commit(offsets, metadata=metadata)
        self._metrics.add("commits")

    def commit_async(self, offsets: OffsetsArg | None = None, *, metadata: str = "",
                     callback: Callable[[dict[TopicPartition, int], SparkLogError | None], None] | None = None
                     ) -> "Future[None]":
        """``commit`` in the background (commits stay in order); the future (and
        ``callback(offsets, error)``) reports the outcome."""
        return self._require_group("commit_async").commit_async(offsets, metadata=metadata, callback=callback)

    def committed(self, partitions: Iterable[TopicPartition] | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions`` (default: the assignment); None
        where the group has none."""
        return self._require_group("committed").committed(partitions)

    # -- pausing ------------------------------------------------------------------------------

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching and returning records of ``partitions`` (they stay assigned)."""
        self._ensure_open()
        wanted = {(str(t), int(p)) for t, p in partitions}
        missing = sorted(wanted - set(self._positions))
        if missing:
            raise errors.InvalidRequestError(f"cannot pause partitions that are not assigned: {missing}")
        self._paused |= wanted

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch and return records of paused ``partitions`` again (as Kafka's, refused for a
        partition that is not assigned, as ``pause`` refuses it)."""
        self._ensure_open()
        wanted = {(str(t), int(p)) for t, p in partitions}
        missing = sorted(wanted - set(self._positions))
        if missing:
            raise errors.InvalidRequestError(f"cannot resume partitions that are not assigned: {missing}")
        self._paused -= wanted

    def paused(self) -> list[TopicPartition]:
        self._ensure_open()
        return sorted(self._paused & set(self._positions))

    # -- the group session's hooks (_group_session.ConsumerHooks) ------------------------------

    def _take_partitions(self, positions: Mapping[TopicPartition, int | None]) -> None:
        for tp, offset in positions.items():
            self._positions[tp] = offset

    def _drop_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._positions.pop(tp, None)
        self._forget_outside(set(self._positions))

    def _consumed_positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for tp in partitions:
            if tp in self._positions:
                position = self._next_returned(tp)
                if position is not None:
                    out[tp] = position
        return out

    def _next_returned(self, tp: TopicPartition) -> int | None:
        """The offset of the next record ``poll`` returns for ``tp`` (buffered first)."""
        waiting = self._buffer.first_offset(tp)
        return waiting if waiting is not None else self._positions.get(tp)

    def _forget_outside(self, keep: set[TopicPartition]) -> None:
        self._ends = {tp: end for tp, end in self._ends.items() if tp in keep}
        self._tier_mode = {tp: info for tp, info in self._tier_mode.items() if tp in keep}
        self._paused &= keep
        self._uncommitted &= keep
        self._buffer.keep_only(keep)

    def seek(self, topic: str, partition: int, offset: int, *, end: int | None = None) -> None:
        """Read ``(topic, partition)`` from ``offset`` next; with ``end``, only the records
        below ``end`` (see "Bounds" in the module docstring).  ``offset`` not an int (a bool
        is not): ``InvalidRequestError``; negative: ``OffsetOutOfRangeError``."""
        self._ensure_open()
        tp = (topic, partition)
        if tp not in self._positions:
            raise errors.InvalidRequestError(f"{topic}-{partition} is not assigned")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise errors.InvalidRequestError(f"offset must be an int, got {offset!r}")
        if offset < 0:
            raise OffsetOutOfRangeError(f"offset must be >= 0, got {offset}")
        if end is not None and (isinstance(end, bool) or not isinstance(end, int) or end < offset):
            raise errors.InvalidRequestError(f"end must be an offset >= {offset} (the start), got {end!r}")
        self._positions[tp] = offset
        self._uncommitted.discard(tp)
        self._buffer.drop([tp])
        self._tier_mode.pop(tp, None)
        if end is None:
            self._ends.pop(tp, None)
        else:
            self._ends[tp] = end

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._ensure_open()
        self._seek_to(partitions, EARLIEST)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._ensure_open()
        self._seek_to(partitions, LATEST)

    def position(self, topic: str, partition: int) -> int:
        """The offset of the next record ``poll`` will return for this partition."""
        self._ensure_open()
        tp = (topic, partition)
        if tp not in self._positions:
            raise errors.InvalidRequestError(f"{topic}-{partition} is not assigned")
        if self._positions[tp] is None:
            self._resolve_unset(wait_stable=True)
        position = self._next_returned(tp)
        assert position is not None
        return position

    def _seek_to(self, partitions: Iterable[TopicPartition] | None, spec: int) -> None:
        tps = list(self._positions) if partitions is None else [(t, p) for t, p in partitions]
        offsets = self._list_offsets(tps, spec)
        for tp in tps:
            if tp not in self._positions:
                raise errors.InvalidRequestError(f"{tp[0]}-{tp[1]} is not assigned")
            self._positions[tp] = offsets[tp]
            self._tier_mode.pop(tp, None)
            self._uncommitted.discard(tp)
        self._buffer.drop(tps)

    def _resolve_unset(self, *, wait_stable: bool = False) -> None:
        """Give every partition without a position one: an assigned partition of a group
        consumer its committed offset first (looked up once, all together, as Kafka's
        ``updateFetchPositions``), the rest ``auto_offset_reset``.  A ``read_committed``
        consumer whose partitions' offsets an open transaction holds leaves them unset for
        the next poll; ``wait_stable`` raises ``UnstableOffsetCommitError`` instead."""
        unset = [tp for tp, pos in self._positions.items() if pos is None]
        if not unset:
            return
        lookup = [tp for tp in unset if tp in self._uncommitted]
        if lookup and self._group is not None:
            try:
                committed = self._group.committed(lookup, require_stable=self._isolation == pb.READ_COMMITTED)
            except errors.UnstableOffsetCommitError:
                if wait_stable:
                    raise
                unset = [tp for tp in unset if tp not in self._uncommitted]
                committed = {}
            for tp, found in committed.items():
                self._uncommitted.discard(tp)
                if found is not None and found.offset >= 0:
                    self._positions[tp] = found.offset
            unset = [tp for tp in unset if self._positions[tp] is None]
            if not unset:
                return
        if self._reset == "none":
            raise OffsetOutOfRangeError(f"no position for {unset[0][0]}-{unset[0][1]} and auto_offset_reset='none'")
        offsets = self._list_offsets(unset, EARLIEST if self._reset == "earliest" else LATEST)
        for tp in unset:
            self._positions[tp] = offsets[tp]

    def _list_offsets(self, tps: list[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        from ._admin import list_offsets_for

        return list_offsets_for(self._cluster, tps, spec, self._isolation)

    # -- polling ---------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """This consumer's counters: ``records_consumed`` and ``bytes_consumed`` (Arrow
        bytes handed to the caller), ``polls``, ``fetch_requests``, ``fetch_errors``
        (retried), ``commits``, ``batches`` and batch sizes (``batch_records_*``,
        ``batch_bytes_*``: total, avg, max), ``throttled`` and ``throttle_time_ms``."""
        return self._metrics.snapshot()

    def register_metrics(self, registry: Any) -> Any:
        """Export ``metrics()`` to a ``prometheus_client`` registry as ``spark_log_consumer_*``
        (labelled with the client id); returns the collector."""
        return self._metrics.register(registry)

    def poll_arrow(self, timeout: float = 1.0) -> list[pa.RecordBatch]:
        """Record batches that arrived within ``timeout`` seconds (possibly none).

        Raises typed errors that retrying cannot fix (e.g. ``OffsetOutOfRangeError`` with
        ``auto_offset_reset='none'``); leader moves and metadata changes are handled here.
        """
        batches = self._poll_arrow(timeout)
        metrics = self._metrics
        metrics.add("polls")
        for batch in batches:
            metrics.batch(batch.num_rows, batch.nbytes)
            metrics.add("records_consumed", batch.num_rows)
            metrics.add("bytes_consumed", batch.nbytes)
        return batches

    def _poll_arrow(self, timeout: float) -> list[pa.RecordBatch]:
        self._ensure_open()
        if self._group is not None:
            started = time.monotonic()
            self._group.before_poll(max(0.0, timeout))
            timeout = max(0.0, timeout - (time.monotonic() - started))
        if not self._positions:
            return []
        ready = self._buffer.take(self._paused)
        if ready:
            self._issue_fetches(self._max_wait_ms)
            return ready
        self._raise_deferred()
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            self._resolve_unset()
            if self._tier_mode:
                self._buffer.add(self._read_tiers())
                ready = self._buffer.take(self._paused)
                if ready:
                    self._issue_fetches(self._max_wait_ms)
                    return ready
            errors_before = self._retriable_errors
            remaining = max(0.0, deadline - time.monotonic())
            self._issue_fetches(int(remaining * 1000))
            # wait for an answer until the poll's timeout, and a moment more for a fetch this
            # poll issued with that timeout as its wait (its answer is on its way then); a
            # fetch still out (a prefetch's long poll) stays out for the next poll, so a poll
            # returns within its timeout however long the fetches in flight may wait
            wait = remaining + (_ANSWER_GRACE_S if self._outstanding else 0.0)
            try:
                done = self._done.get(timeout=wait)
            except queue.Empty:
                return []
            self._collect(done)
            ready = self._buffer.take(self._paused)
            if not ready:
                self._raise_deferred()
            now = time.monotonic()
            if ready or now >= deadline:
                self._issue_fetches(self._max_wait_ms)  # prefetch while the caller works
                return ready
            # No records yet and time is left: an answer without records (a prefetch that
            # waited out its own wait before the records came, an error) does not end the
            # poll; it fetches again for the rest of the timeout, after a short pause when
            # the round met a retriable error (the leader moved), so it never spins.
            if self._retriable_errors != errors_before:
                time.sleep(min(_RETRY_PAUSE_S, deadline - now))

    def _collect(self, first: tuple[tuple[str, str], Any]) -> None:
        """Take the answer of the fetch ``first`` and of every other fetch already done into
        the buffer.  A completion is the fetch's key and its call: one of a fetch forgotten
        since (``assign``) is ignored, never taken for the newer fetch under its key (whose
        ``result()`` would block the poll until that long poll ends)."""
        done = [first]
        while True:
            try:
                done.append(self._done.get_nowait())
            except queue.Empty:
                break
        results = []
        for key, call in done:
            entry = self._outstanding.get(key)
            if entry is not None and entry[0] is call:
                del self._outstanding[key]
                results.append((key, entry))
        for key, (call, offsets) in results:
            self._buffer.add(self._take(key, call, offsets))

    def poll(self, timeout: float = 1.0) -> list[ConsumerRecord]:
        """Records that arrived within ``timeout`` seconds, in offset order per partition."""
        records: list[ConsumerRecord] = []
        for batch in self.poll_arrow(timeout):
            records.extend(_to_records(batch))
        return records

    def close(self) -> None:
        """With a group: commit (auto-commit) and leave it (a static member leaves for a
        restart).  Then stop fetching.  Calling it again does nothing; any other method but
        ``metrics``, ``register_metrics`` and the throttle counters then raises
        ``InvalidRequestError`` ("consumer is closed")."""
        if self._closed:
            return
        try:
            if self._group is not None:
                self._group.close()
        finally:
            self._close_fetching()

    def _close_fetching(self) -> None:
        self._closed = True
        self._forget_fetches()
        self._cluster.close()

    def _forget_fetches(self) -> None:
        """Cancel the fetches in flight and forget them (their completions are ignored)."""
        for call, _ in self._outstanding.values():
            call.cancel()
        self._outstanding.clear()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------

    def _issue_fetches(self, max_wait_ms: int) -> None:
        groups: dict[tuple[str, str], dict[TopicPartition, int]] = {}
        epochs: dict[TopicPartition, int] = {}
        busy = {tp for _, offsets in self._outstanding.values() for tp in offsets}
        for tp, position in self._positions.items():
            if (tp in busy or position is None or position >= self._ends.get(tp, position + 1) or tp in self._paused
                    or tp in self._tier_mode):
                continue
            try:
                address, epochs[tp] = self._cluster.leader(*tp)
            except SparkLogError as exc:
                if not exc.retriable:
                    raise
                self._cluster.forget(tp[0])
                continue
            groups.setdefault((address, tp[0]), {})[tp] = position
        throttled_busy = {a for a, _ in self._outstanding if self._gate.is_throttled(a)}
        for (address, topic), offsets in groups.items():
            if address in throttled_busy:
                continue  # the broker throttles us: one fetch in flight to it at a time
            if self._gate.is_throttled(address):
                throttled_busy.add(address)
            key = (address, topic)
            request = self._fetch_request(topic, offsets, max_wait_ms, epochs)
            if request is None:
                continue
            try:
                call = self._cluster.fetch_raw(address).future(request, timeout=self._timeout_s + max_wait_ms / 1000)
            except (grpc.RpcError, SparkLogError) as exc:  # refused before it was sent (e.g. a SCRAM session)
                error = errors.from_rpc_error(exc, address=address)
                if not error.retriable:
                    raise error from None
                self._cluster.forget(topic)
                continue
            self._metrics.add("fetch_requests")
            self._outstanding[key] = (call, offsets)
            call.add_done_callback(lambda _f, k=key, c=call: self._done.put((k, c)))

    def _fetch_request(self, topic: str, offsets: dict[TopicPartition, int], max_wait_ms: int,
                       epochs: Mapping[TopicPartition, int]) -> pb.FetchRequest | None:
        """The Fetch for ``offsets``, each partition with the leader epoch of the client's
        metadata (``epochs``; KIP-320: a broker in another epoch refuses it, retried after a
        refresh); None (fetch nothing) for a projected read of a typed topic without a
        schema yet, whose partitions are empty."""
        request = pb.FetchRequest(
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=self._min_bytes, max_bytes=self._max_bytes,
            isolation_level=self._isolation,
            partitions=[pb.FetchPartition(topic=t, partition=p, fetch_offset=o, partition_max_bytes=self._partition_max,
                                          current_leader_epoch=epochs.get((t, p), -1),
                                          last_fetched_epoch=self._last_read_epoch((t, p), o),
                                          log_start_offset=-1,
                                          max_offset=self._ends.get((t, p), 0))
                        for (t, p), o in offsets.items()],
        )
        if self._columns is not None or self._filter is not None:
            info = self._cluster.topic(topic)
            if info.schema_id < 0:  # a typed topic without a schema yet holds nothing: nothing to project
                info = self._cluster.topic(topic, refresh=True)
                if info.schema_id < 0:
                    return None
            request.project = True
            request.columns.extend(projection(self._columns, info.schema))
            if self._filter is not None:
                cache_key = (topic, info.schema_id)
                if cache_key not in self._filters:
                    self._filters[cache_key] = serialize_filter(self._filter, info.schema)
                request.row_filter = self._filters[cache_key]
        return request

    def _last_read_epoch(self, tp: TopicPartition, position: int) -> int:
        """The leader epoch of the last frame read, when the position is where that read left
        it (-1 after a seek, a reset or a projected read: nothing to check against)."""
        found = self._read_epochs.get(tp)
        return found[1] if found is not None and found[0] == position else -1

    def _diverged(self, tp: TopicPartition, result: pb.FetchPartitionResult) -> None:
        """KIP-320: the leader's log diverges from what this consumer read: the epoch of its
        last record ends at ``end`` there, below the position (an unclean election replaced
        those records).  With a reset policy the position moves back to ``end``, where the
        leader's records differ, so nothing written there since is skipped; without one,
        ``OffsetOutOfRangeError``."""
        end = result.diverging_epoch.end_offset
        position = self._positions.get(tp)
        self._read_epochs.pop(tp, None)
        if position is None or end >= position:
            return
        if self._reset == "none":
            raise OffsetOutOfRangeError(f"{tp[0]}-{tp[1]}: the log was truncated at offset {end} below the position "
                                        f"{position} (records this consumer read are gone: an unclean leader "
                                        "election); seek to go on")
        log.warning("%s-%d: the log was truncated at offset %d below the position %d (an unclean leader election): "
                    "reading again from %d", tp[0], tp[1], end, position, end)
        self._positions[tp] = end

    def _take(self, key: tuple[str, str], call: Any,
              offsets: dict[TopicPartition, int]) -> list[tuple[TopicPartition, pa.RecordBatch]]:
        address, topic = key
        try:
            response = parse_fetch_response(call.result())
        except (grpc.RpcError, SparkLogError) as exc:  # SparkLogError: the data listener's (_data_transport.py)
            error = errors.from_rpc_error(exc, address=address)
            if error.retriable:
                self._metrics.add("fetch_errors")
                self._retriable_errors += 1
                self._cluster.forget(topic)
                return []
            raise error from None
        except Exception:  # noqa: BLE001 - cancelled
            return []
        self._gate.note(address, response.throttle_time_ms)
        out: list[tuple[TopicPartition, pa.RecordBatch]] = []
        for result, records, arrow_stream in response.partitions:
            tp = (result.topic, result.partition)
            if tp not in self._positions or self._positions[tp] != offsets.get(tp):
                continue  # unassigned or sought since the fetch left
            try:
                if result.HasField("diverging_epoch"):
                    self._diverged(tp, result)
                    continue
                failure = error_from_pb(result.error)
                if failure is not None:
                    if not (isinstance(failure, OffsetOutOfRangeError) and self._enter_tier(tp)):
                        self._partition_error(tp, failure)
                    continue
                out.extend((tp, batch) for batch in self._decode(tp, result, records, arrow_stream))
            except SparkLogError as exc:
                # one partition's error never costs another's records: the positions of those
                # decoded already moved past them, so they are returned first and the error
                # is raised by the poll that finds nothing left to return (as Kafka's fetcher)
                if self._deferred_error is None:
                    self._deferred_error = exc
        return out

    def _raise_deferred(self) -> None:
        """Raise the partition error ``_take`` kept back while records were still to return."""
        error, self._deferred_error = self._deferred_error, None
        if error is not None:
            raise error

    # -- union read: the Delta tier below the brokers' log start --------------------------------

    def _enter_tier(self, tp: TopicPartition) -> bool:
        """The brokers no longer hold ``tp``'s position: serve it from the Delta tier if the
        tier holds it (True), else False (truly out of range)."""
        position = self._positions.get(tp)
        if position is None:
            return False
        try:
            found = describe_tier(self._cluster, [tp[0]], timeout_s=self._timeout_s).partitions.get(tp)
        except SparkLogError as exc:
            if exc.retriable:
                self._retriable_errors += 1
                return True   # ask again at the next poll (the position stays)
            raise
        if found is None or not found.tiered or not found.tier_start <= position < found.tiered_end:
            return False
        if position >= found.log_start_offset:
            return False   # the brokers hold it: out of range for another reason (a truncated log)
        self._tier_mode[tp] = found
        return True

    def _tier_location(self, topic: str, info: TierInfo) -> TierTable:
        table = self._tier_tables.get(topic)
        if table is None:
            described = describe_tier(self._cluster, [topic], timeout_s=self._timeout_s)
            table = self._tier_tables[topic] = TierTable(described.location, topic, info.topic_id,
                                                         described.storage_options)
        return table

    def _read_tiers(self) -> list[tuple[TopicPartition, pa.RecordBatch]]:
        out: list[tuple[TopicPartition, pa.RecordBatch]] = []
        for tp, info in list(self._tier_mode.items()):
            if tp not in self._positions or tp in self._paused:
                if tp not in self._positions:
                    del self._tier_mode[tp]
                continue
            position = self._positions[tp]
            if position is None:
                del self._tier_mode[tp]
                continue
            stop = min(info.tiered_end, self._ends.get(tp, info.tiered_end))
            if position >= stop:
                del self._tier_mode[tp]   # the brokers take over (or the bound is reached)
                continue
            window_end = min(stop, position + _TIER_WINDOW)
            topic, partition = tp
            try:
                rows = self._tier_location(topic, info).read(partition, position, window_end)
            except errors.TierUnavailableError:
                del self._tier_mode[tp]
                fresh = describe_tier(self._cluster, [topic], timeout_s=self._timeout_s).partitions.get(tp)
                if fresh is not None and fresh.tier_start <= position < fresh.tiered_end:
                    raise   # the brokers say the tier holds it and the table does not: a broken tier, never skipped
                continue   # the tier moved on (retention): the next fetch decides again
            topic_info = self._cluster.topic(topic)
            table = from_tier_table(rows, topic=topic, partition=partition, data_schema=topic_info.schema,
                                    columns=self._columns)
            if self._filter is not None and table.num_rows:
                table = table.filter(self._filter)
            for batch in table.to_batches():
                if batch.num_rows:
                    out.append((tp, batch))
            self._positions[tp] = window_end
            if window_end >= info.tiered_end:
                del self._tier_mode[tp]
        return out

    def _partition_error(self, tp: TopicPartition, error: SparkLogError) -> None:
        if isinstance(error, OffsetOutOfRangeError) and self._reset != "none":
            self._positions[tp] = None
            return
        if error.retriable:
            self._retriable_errors += 1
            self._cluster.forget(tp[0])
            return
        raise error

    def _decode(self, tp: TopicPartition, result: pb.FetchPartitionResult, records: memoryview | None,
                arrow_stream: memoryview | None) -> list[pa.RecordBatch]:
        """The record batches of one partition's answer; ``records`` / ``arrow_stream`` are
        views of the response bytes (``fetch_wire``), decoded without a copy."""
        topic, partition = tp
        position = self._positions[tp]
        assert position is not None
        batches: list[pa.RecordBatch] = []
        last_epoch = -1  # the leader epoch of the last frame read past the position
        if arrow_stream:
            reader = ipc.open_stream(pa.py_buffer(arrow_stream))
            for batch in reader:
                if batch.num_rows:
                    batches.append(_finish_projected(batch, topic, partition))
        elif records:
            info = self._cluster.topic(topic)
            buffer = pa.py_buffer(records)
            aborted = aborted_ranges(result)
            for pos, header in iter_frames(memoryview(buffer), verify=True):
                if header.next_offset > position:
                    last_epoch = header.partition_leader_epoch
                if header.attributes & ATTR_CONTROL or header.next_offset <= position or not header.record_count:
                    continue  # control frames, frames already read, frames compaction emptied
                if aborted and is_aborted(header, aborted):
                    continue  # read_committed: a frame of an aborted transaction
                schema = info.schemas.get(header.schema_id)
                if schema is None:
                    info = self._cluster.topic(topic, refresh=True)
                    schema = info.schemas.get(header.schema_id)
                    if schema is None:
                        raise errors.SchemaMismatchError(f"{topic}-{partition}: unknown schema id {header.schema_id}")
                batch = decode_batch(buffer.slice(pos, header.frame_length), schema)
                batch = widen(batch, info.schema)
                if header.attributes & ATTR_LOG_APPEND_TIME and info.kind == "bytes":
                    batch = with_append_time(batch, header.max_timestamp)
                numbers = record_offsets(memoryview(buffer), header, pos)  # compacted frames: gaps inside
                offsets = int64_array(numbers)
                timestamps = None
                if "timestamp" not in batch.schema.names:
                    timestamps = timestamp_ms_array(np.full(batch.num_rows, header.first_timestamp, dtype=np.int64))
                full = add_reserved_columns(batch, topic=topic, partition=partition, offsets=offsets, timestamps=timestamps)
                skip = int(np.searchsorted(numbers, position)) if header.base_offset < position else 0
                if skip < full.num_rows:
                    batches.append(full.slice(skip) if skip > 0 else full)
        if result.next_fetch_offset > position:
            self._positions[tp] = result.next_fetch_offset
        elif batches:
            self._positions[tp] = int(batches[-1].column("offset")[-1].as_py()) + 1
        if last_epoch >= 0 and self._positions[tp] is not None:
            self._read_epochs[tp] = (int(self._positions[tp] or 0), last_epoch)
        end = self._ends.get(tp)
        if end is not None:
            batches = _below(batches, end)
            self._positions[tp] = min(self._positions[tp] or 0, end)
        return batches


def aborted_ranges(result: pb.FetchPartitionResult) -> dict[int, list[tuple[int, int]]]:
    """The aborted transactions a read_committed fetch answer lists: producer id ->
    ``[(first offset, abort marker offset), ...]``."""
    out: dict[int, list[tuple[int, int]]] = {}
    for txn in result.aborted_transactions:
        out.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return out


def is_aborted(header: FrameHeader, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    """Whether a transactional data frame belongs to one of the ``aborted`` transactions."""
    if not header.is_transactional:
        return False
    return any(first <= header.base_offset <= last for first, last in aborted.get(header.producer_id, ()))


def _below(batches: list[pa.RecordBatch], end: int) -> list[pa.RecordBatch]:
    """``batches`` without the rows at or past offset ``end`` (the tail of a straddling frame)."""
    out = []
    for batch in batches:
        offsets = batch.column("offset")
        if batch.num_rows and offsets[batch.num_rows - 1].as_py() >= end:
            batch = batch.filter(pc.less(offsets, pa.scalar(end, pa.int64())))
        if batch.num_rows:
            out.append(batch)
    return out


def _finish_projected(batch: pa.RecordBatch, topic: str, partition: int) -> pa.RecordBatch:
    """A broker-filtered batch (data columns, offset, timestamp) in the consumer's layout."""
    names = [n for n in batch.schema.names if n not in ("offset", "timestamp")]
    data = pa.RecordBatch.from_arrays([batch.column(n) for n in names], names=names)
    stamps = batch.column("timestamp")
    timestamps: pa.Array[Any] | None = stamps
    if "timestamp" in names:
        timestamps = None
    elif data.num_columns == 0:
        data = pa.RecordBatch.from_arrays([stamps], names=["timestamp"])
        timestamps = None
    return add_reserved_columns(data, topic=topic, partition=partition,
                                offsets=batch.column("offset"), timestamps=timestamps)


def _to_records(batch: pa.RecordBatch) -> list[ConsumerRecord]:
    reserved = {"topic", "partition", "offset", "timestamp"}
    names = batch.schema.names
    data_names = [n for n in names if n not in reserved]
    is_bytes = "value" in data_names and set(data_names) <= {"key", "value", "headers"}
    # the reserved columns hold no nulls
    timestamps = cast("list[int]", batch.column("timestamp").cast(pa.int64()).to_pylist())
    offsets = cast("list[int]", batch.column("offset").to_pylist())
    topic = batch.column("topic")[0].as_py() if batch.num_rows else ""
    partition = batch.column("partition")[0].as_py() if batch.num_rows else 0
    out = []
    if is_bytes:
        n = batch.num_rows
        keys = batch.column("key").to_pylist() if "key" in names else [None] * n
        values = batch.column("value").to_pylist()
        headers = batch.column("headers").to_pylist() if "headers" in names else [None] * n
        for i in range(batch.num_rows):
            row_headers = headers[i]
            hs = [(h["key"], h["value"]) for h in row_headers] if row_headers else []
            out.append(ConsumerRecord(topic, partition, offsets[i], timestamps[i], keys[i], values[i], hs))
        return out
    rows = batch.select(data_names).to_pylist() if data_names else [{}] * batch.num_rows
    for i in range(batch.num_rows):
        out.append(ConsumerRecord(topic, partition, offsets[i], timestamps[i], None, rows[i], []))
    return out



def _non_negative(value: int, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidConfigError(f"{name} must be an integer >= 0, got {value!r}", key=name)


def _positive_or_none(value: int | None, name: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidConfigError(f"{name} must be a positive integer, got {value!r}", key=name)
    return value
