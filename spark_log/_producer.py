"""``Producer``: sends records to topics, pipelined, idempotent, retried.

Life of a record: ``send`` appends it to the open batch of its partition (plain Python
lists: value, timestamp, and key and headers only once some record has them) and returns a
future that reads its result from the batch's (``_futures``).  The batch is closed when

- its leader has nothing of this producer's queued or in flight: at once, alone if need be
  (at low rates every record goes as soon as it is sent: no linger timer on the latency).
  This is the default (``linger_ms=None``); a ``linger_ms`` given explicitly is Kafka's
  ``linger.ms``: a partly filled batch waits that long even on an idle connection, and
  only ``batch_size``, the linger and ``flush`` close it;
- it holds ``batch_size`` bytes;
- the last call in flight to its leader is answered (what waited behind it goes together);
- it is ``linger_ms`` old (Kafka 4.0's default of 5 ms since KIP-1030 bounds the wait
  behind calls in flight);
- or on ``flush``.

Closed batches queue in the order their sequences were reserved, and one thread at a time
ships every queued batch (``_drain``: the caller of ``send`` when the leader was idle, or the
sender thread, woken by the answer that left a leader idle): it builds each
batch's Arrow columns in bulk, encodes one frame per batch (compressed once, here), stamps
the producer id, epoch and base sequence into its header and issues one unary Produce call
per leader broker for all of them without waiting for it: many calls are in flight on one
channel per broker (at most ``max_in_flight``).  Under load the queue fills while a call is
out, so one call carries many frames (fewer gRPC calls and broker requests per record);
``send`` blocks when the queue holds more than 32 MiB.  Keyed records over 1,000
partitions cost a few calls per round, not one per partition.

Ordering and exactly-once.  Every producer is idempotent.  Without ``producer_id`` a random
63-bit id is drawn; with it (the Spark writer derives one from the query and Spark
partition, and uses the micro-batch id as ``producer_epoch``) a replay by a new Producer
with the same id, epoch and records appends nothing twice: sequences start at 0 per
partition for each Producer instance, frames are cut deterministically from the same
input, and the broker acknowledges duplicates with their original offsets (or, for a frame
appended so long ago that it no longer knows them, with DUPLICATE_SEQUENCE: the send
succeeds with offset -1, as in Kafka).  A Producer with
an older epoch than one the broker has seen is fenced (``FencedEpochError``).  Brokers
append a producer's frames in sequence order even when concurrent calls arrive out of
order, so order per partition holds with any number of calls in flight.

After a send fails for good a producer with a random id takes a fresh id (sequences from 0,
``_lost_sequences``).  Sends of the old id already on their way may still be appended (a
failure that may have written its records leaves no hole behind it), so the new id's
first sends to a partition wait until every send of an older id to that partition is
settled: acknowledged sends stay in send order across the change of id.  A leader that
forgot the id (retention deleted all its frames before a restart) refuses its next
sequences out of order; when every earlier sequence was acknowledged, the refused frame
and the id's later sequences on that partition are re-stamped under a fresh id from 0, in
order (Kafka's KIP-360; ``_sequence_reset``).

Retries: retriable errors (not leader, unknown partition while a topic is being created,
broker unavailable, timeouts) are retried with the same frames and sequences, after a
metadata refresh where the error asks for it (and after a timeout: the leader may be cut
off), until ``delivery_timeout_ms``; then the
futures fail with the last error.  A closed batch whose topic metadata cannot be read on
its way to the wire (a refresh failing with a retriable error) is queued again after the
backoff, its partition's later batches behind it, until the same deadline.  That error's ``maybe_written`` says whether any
attempt may have written the records: False only when every attempt was refused before
the append (``SparkLogError.refused_before_write``, e.g. ``NotEnoughReplicasError``);
True after a timeout, a lost connection, ``NotEnoughReplicasAfterAppendError`` or any
answer that carried the offsets of an append.  The backoff starts at 50 ms and doubles up to 200 ms, so
after a leader fails the client finds the new leader within ~200 ms of its election.

Security and quotas: ``security`` (a ``ClientSecurity``: TLS, client certificate, SCRAM)
and ``client_id`` (quotas per client id) are used on every connection (``_client.Cluster``).
A refusal (``AuthenticationError``, ``TopicAuthorizationError``) is not retriable: the
futures fail with it at once.  When a broker's answers report ``throttle_time_ms`` (a
byte-rate quota), the producer keeps one request in flight to that broker until an answer
comes back unthrottled (``_throttle.ThrottleGate``); ``throttled`` and
``throttle_time_ms`` count them.

Time: the ``clock`` given (default ``SystemClock``) stamps record timestamps (``wall_ms``)
and measures linger, retry backoff and the delivery and flush deadlines (``monotonic_ms``);
the waits between two looks at it are real time (at most ``linger_ms``, a backoff, or 1 s).

Thread-safety: ``send``, ``send_batch`` and ``flush`` may be called from many threads.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import random
import threading
import time
from concurrent.futures import Future
from typing import Any, Mapping, Sequence

import grpc
import pyarrow as pa

from . import errors
from ._client import Cluster, TopicInfo, error_from_pb
from ._client_metrics import ClientMetrics
from ._batching import OpenBatch, Shipment, check_headers, cut_frames, split_rows
from .fetch_wire import encode_produce_request
from ._futures import FutureGroup
from ._partitioner import StickyPartitioner, key_array, partition_for_key, partitions_for_keys
from ._records import bytes_ipc_message, conform
from ._sequence_reset import SequenceResets
from ._throttle import ThrottleGate
from .security import ClientSecurity
from .clock import Clock, SystemClock
from ._producer_txn import ProducerTransactions
from ._group_session import ConsumerGroupMetadata
from .errors import (
    DuplicateSequenceError,
    InvalidConfigError,
    OutOfOrderSequenceError,
    SparkLogError,
    UnknownTopicOrPartitionError,
)
from .frame import Codec, encode_batch, encode_message, with_producer
from .proto import broker_pb2 as pb

__all__ = ["Producer"]

log = logging.getLogger(__name__)

_ACKS = {"all": -1, "-1": -1, -1: -1, "1": 1, 1: 1, "0": 0, 0: 0}
_FRAME_TARGET_BYTES = 1 << 20  # frames cut from send_batch hold about this much
_REQUEST_TARGET_BYTES = 8 << 20
_BUFFER_BYTES = 32 << 20  # closed batches waiting for the wire beyond this block send() (Kafka's buffer.memory)
_RETRY_BACKOFF_S = 0.05
_RETRY_BACKOFF_MAX_S = 0.2  # bounds what the client adds to a leader failover
# A batch from send() below this many bytes of records (key + value + 24 each, as batch_size
# counts them) is sent uncompressed whatever ``compression`` says: LZ4 and zstd frame every
# Arrow buffer (23 bytes and more each, eight buffers), so a frame of a few records comes out
# larger, and compressing and decompressing it costs the record's latency at both ends
# (bench.latency_bench at 2,000 records/s: p50 7-14% lower uncompressed).
COMPRESS_MIN_BYTES = 512
_DEFAULT_LINGER_MS = 5  # linger_ms=None: the most a batch waits behind a call in flight (Kafka 4.0's default, KIP-1030)


class _TopicLookup:
    """``dict.get``-like access to a cluster's topics for a cluster object without a cache."""

    def __init__(self, cluster: Any) -> None:
        self._cluster = cluster

    def get(self, name: str) -> TopicInfo:
        return self._cluster.topic(name)  # type: ignore[no-any-return]


class Producer:
    """Sends records to topics (see the module docstring for ordering and exactly-once).

    ``acks``: "all" (default), 1 or 0.  ``linger_ms``: None (default) ships a batch at once
    when nothing of ours is queued or in flight to its leader and lets it wait at most 5 ms
    behind a call that is; a positive integer is Kafka's ``linger.ms``: a partly filled batch
    waits that long, whatever is in flight; 0 ships at once (what waited behind a call goes
    when the sender thread runs).
    ``batch_size``: bytes per batch from ``send``.  ``compression``: "lz4", "zstd" or "none";
    a batch from ``send`` of fewer than ``COMPRESS_MIN_BYTES`` (512) bytes of records goes
    uncompressed (compressed it would be larger, and slower to write and read).
    ``transport``: "auto" (default) sends Produce calls over each broker's binary data
    listener when the client is plaintext (the same protobuf messages, without gRPC's
    per-call cost; ``spark_log/_data_transport.py``), else over gRPC; "grpc": always gRPC.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str] | None = None,
        *,
        acks: str | int = "all",
        linger_ms: int | None = None,
        batch_size: int = 16384,
        compression: str | None = "lz4",
        producer_id: int | None = None,
        producer_epoch: int = 0,
        max_in_flight: int = 16,
        request_timeout_ms: int = 30_000,
        delivery_timeout_ms: int = 120_000,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        security: ClientSecurity | None = None,
        client_id: str = "",
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        transport: str = "auto",
    ) -> None:
        if acks not in _ACKS:
            raise InvalidConfigError(f"invalid value for 'acks': {acks!r}; use 'all', 1 or 0", key="acks")
        # ship when the leader is idle (see the module docstring); linger 0 too: with nothing to
        # wait for, a record goes at once from send() rather than through the sender thread
        self._eager = linger_ms is None or linger_ms == 0
        if linger_ms is None:
            linger_ms = _DEFAULT_LINGER_MS
        for name, value, low in (("linger_ms", linger_ms, 0), ("batch_size", batch_size, 1),
                                 ("max_in_flight", max_in_flight, 1), ("request_timeout_ms", request_timeout_ms, 1),
                                 ("delivery_timeout_ms", delivery_timeout_ms, 1)):
            if not isinstance(value, int) or value < low:
                raise InvalidConfigError(f"invalid value for '{name}': {value!r}; must be an integer >= {low}", key=name)
        if producer_id is not None and not 0 <= producer_id < 2**63:
            raise InvalidConfigError("invalid value for 'producer_id': must be within 0..2**63-1", key="producer_id")
        if not 0 <= producer_epoch < 2**15:
            raise InvalidConfigError("invalid value for 'producer_epoch': must be within 0..32767", key="producer_epoch")
        self._codec = Codec.parse(compression)
        self._acks = _ACKS[acks]
        self._linger_s = linger_ms / 1000
        self._batch_size = batch_size
        self._request_timeout_s = request_timeout_ms / 1000
        self._delivery_timeout_s = delivery_timeout_ms / 1000
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self.producer_id = producer_id if producer_id is not None else self._rng.getrandbits(63)
        self._explicit_id = producer_id is not None  # a transactional producer's id is explicit too
        self.producer_epoch = producer_epoch
        self._cluster = Cluster(bootstrap, request_timeout_s=self._request_timeout_s, security=security,
                                client_id=client_id, transport=transport)
        self._txn: ProducerTransactions | None = None
        if transactional_id is not None:
            if producer_id is not None:
                raise InvalidConfigError("a transactional producer gets its producer id from its coordinator: "
                                         "do not pass 'producer_id'", key="producer_id")
            if self._acks != -1:
                raise InvalidConfigError("a transactional producer needs acks='all'", key="acks")
            self._txn = ProducerTransactions(self._cluster, transactional_id, transaction_timeout_ms,
                                             request_timeout_s=self._request_timeout_s)
            producer_id = -1
        self._gate = ThrottleGate()
        self._sticky = StickyPartitioner(self._rng)
        # send_batch's choice for rows without key or partition: with an explicit producer id it
        # is seeded by (id, epoch), so a replay of the same calls picks the same partitions
        self._batch_sticky = StickyPartitioner(
            random.Random(f"{producer_id}:{producer_epoch}") if producer_id is not None else self._rng)
        self._lock = threading.Condition()
        self._open: dict[tuple[str, int], OpenBatch] = {}
        # closed batches in the order their sequences were reserved, waiting for the wire;
        # one thread at a time ships them (_shipping), whichever thread gets there first
        self._ready: list[tuple[tuple[str, int], OpenBatch]] = []
        self._buffered = 0  # bytes of records in _ready
        self._shipping = False
        self._busy: dict[str | None, int] = {}  # leader address -> our Produce calls in flight to it
        # the metadata cache, read once per send without a call (a stand-in cluster without
        # one is asked through its topic())
        cache = getattr(self._cluster, "_topics", None)
        self._topics: Any = cache if isinstance(cache, dict) else _TopicLookup(self._cluster)
        self._wall_ns = time.time_ns if type(self._clock) is SystemClock else None
        self._next_seq: dict[tuple[str, int], int] = {}
        self._in_flight = threading.BoundedSemaphore(max_in_flight)
        self._pending = 0  # shipments not yet resolved (len(_live))
        self._live: dict[int, Shipment] = {}  # those shipments, by issue order
        self._force_error: SparkLogError | None = None  # set by a close() whose timeout passed
        self._closing = 0  # batches closed but not yet shipped
        self._retries: list[tuple[float, int, Shipment]] = []
        # closed batches put back after a retriable error before they were encoded (a metadata
        # lookup failed): (due, order, slot, batch), back to _ready when due
        self._reship: list[tuple[float, int, tuple[str, int], OpenBatch]] = []
        self._parked: dict[tuple[str, int], tuple[int, float]] = {}  # slot -> (batches in _reship, latest due)
        self._issue_seq = itertools.count()
        # per partition: producer id -> its shipments not yet settled; shipments of a newer
        # id wait in _held until every older id's are (see the module docstring)
        self._unsettled: dict[tuple[str, int], dict[int, int]] = {}
        self._held: dict[tuple[str, int], list[list[Shipment]]] = {}
        self._id_order = itertools.count()
        self._generation: dict[int, int] = {self.producer_id: next(self._id_order)}
        self._resets = SequenceResets(self._rng)  # KIP-360: ids a partition's leader forgot
        self._closed = False
        self._metrics = ClientMetrics("producer", ("records_sent", "records_failed", "requests", "retries", "errors"),
                                      client_id=client_id, extra=lambda: {"throttled": self._gate.throttled,
                                                                          "throttle_time_ms": self._gate.throttle_time_ms})
        self._sender = threading.Thread(target=self._run_sender, name="spark-log-producer", daemon=True)
        self._sender.start()

    # -- public API ---------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | str | Mapping[str, Any] | None,
        key: bytes | str | None = None,
        headers: Mapping[str, bytes | str] | Sequence[tuple[str, bytes | str]] | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> "Future[tuple[int, int]]":
        """Queue one record; the future gives ``(partition, offset)`` once acknowledged.

        Bytes topics take ``value`` (and ``key``) as bytes or str; typed topics take
        ``value`` as a row mapping column -> value (``key`` unused: the topic's key columns
        choose the partition; ``headers`` refused with ``InvalidRequestError``: a typed
        record has none; a typed frame has one timestamp for all its rows, so a row whose
        timestamp differs from its open batch's starts a new batch).  ``timestamp`` is ms since the epoch (default: now).  Raises
        at once for an unknown topic or partition (a broker with ``auto_create_topics`` on
        creates a missing topic first, with its default partitions and replication factor,
        and ``send`` waits for that, at most the request timeout); delivery errors go to the
        future.

        The record joins its partition's open batch (plain lists; Arrow columns are built
        once per batch when it ships).  The batch ships when it is full, when it is
        ``linger_ms`` old, or at once when the partition's leader has no request of this
        producer in flight (see the class docstring): nothing else happens per record.
        """
        info = self._topics.get(topic)  # the cluster's cache; a dict read is atomic
        if info is None or info.schema_id < 0:
            info = self._topic(topic)  # asks the cluster; raises for an unknown topic
        if info.kind != "bytes":
            if headers:
                raise errors.InvalidRequestError(
                    f"topic {topic!r} is typed: its records have no headers (a typed frame holds only the "
                    f"schema's columns), so send() refuses headers rather than drop them; put them in a column")
            return self._send_typed(info, topic, value, key, partition, timestamp)
        if type(value) is not bytes:
            if isinstance(value, str):
                value = value.encode()
            elif not (value is None or isinstance(value, (bytes, bytearray, memoryview))):
                raise errors.SchemaMismatchError(f"a bytes topic takes bytes or str values, got {type(value).__name__}")
        if key is not None:
            if isinstance(key, str):
                key = key.encode()
            size = 24 + len(key) + (len(value) if value is not None else 0)
        else:
            size = 24 + (len(value) if value is not None else 0)
        if headers is not None:
            headers = check_headers(headers)
        sticky = False
        if partition is None:
            n = len(info.partitions)
            if key is not None:
                partition = partition_for_key(key, n)
            else:
                partition = self._sticky.partition(topic, n)
                sticky = True
        elif not 0 <= partition < len(info.partitions):
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has no partition {partition} (it has {len(info.partitions)})")
        if self._txn is not None:
            self._txn.add(topic, partition)
        ts = (self._wall_ns() // 1_000_000 if self._wall_ns is not None else self._clock.wall_ms()) \
            if timestamp is None else int(timestamp)
        return self._append((topic, partition), value, key, headers, ts, size, sticky)

    def _send_typed(self, info: TopicInfo, topic: str, value: Any, key: Any, partition: int | None,
                    timestamp: int | None) -> "Future[tuple[int, int]]":
        """``send`` to a typed topic: the row is converted now (one-row Arrow batch), and its
        key columns hashed from it by ``key_array``, as ``send_batch`` and the Spark sink do."""
        if not isinstance(value, Mapping):
            raise errors.SchemaMismatchError(f"topic {topic!r} is typed: send a row as a dict of column -> value")
        try:  # converted now, so a bad row fails here and never leaves a hole in the sequences
            payload = pa.RecordBatch.from_pylist([dict(value)], schema=info.schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise errors.SchemaMismatchError(f"row does not fit topic {topic!r}: {exc}") from None
        size = 16 + payload.nbytes
        n = info.num_partitions
        sticky = False
        if partition is None:
            keyed = False
            if info.key_columns:  # the key bytes as send_batch and the Spark sink make them (Arrow's cast)
                keys, has_key = key_array(payload, info.key_columns)
                keyed = bool(has_key[0])
            if keyed:
                partition = int(partitions_for_keys(keys, n)[0])
            else:
                partition = self._sticky.partition(topic, n)
                sticky = True
        elif not 0 <= partition < n:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition} (it has {n})")
        if self._txn is not None:
            self._txn.add(topic, partition)
        ts = self._clock.wall_ms() if timestamp is None else int(timestamp)
        return self._append((topic, partition), payload, None, None, ts, size, sticky, one_timestamp=True)

    def _append(self, slot: tuple[str, int], payload: Any, key: bytes | None, headers: Any, ts: int,
                size: int, sticky: bool, *, one_timestamp: bool = False) -> "Future[tuple[int, int]]":
        """Add one record to its partition's open batch; close the batch when it is full or
        when its leader has nothing of ours in flight, and hand it on.  ``one_timestamp``
        (typed topics: a frame has one timestamp for all its rows): a record whose timestamp
        differs from the open batch's closes that batch and starts the next, as does a record
        that would take the batch past ``batch_size``."""
        lock = self._lock
        lock.acquire()  # the condition's lock, taken without Condition.__enter__'s Python frame
        try:
            if self._closed:
                raise errors.InvalidRequestError("producer is closed")
            while self._buffered > _BUFFER_BYTES:  # closed batches waiting for the wire: back-pressure
                lock.notify_all()  # the sender ships them if no other thread is
                lock.wait(1.0)
            batch = self._open.get(slot)
            # a record that does not fit goes in the next batch (as Kafka's accumulator does), so a
            # record too large for the topic is refused alone, never with the records before it
            if batch is not None and (batch.size + size > self._batch_size
                                      or (one_timestamp and batch.timestamps[0] != ts)):
                del self._open[slot]
                self._close(slot, batch)
                lock.notify_all()  # the sender ships it (or this thread does, below)
                batch = None
            if batch is None:
                batch = self._open[slot] = OpenBatch(created=self._now_s(), address=self._leader_or_none(slot))
                lock.notify()  # the sender's linger timer (with linger 0 it closes the batch when it runs)
            values = batch.values
            if key is not None or batch.keys is not None:
                if batch.keys is None:
                    batch.keys = [None] * len(values)
                batch.keys.append(key)
            if headers is not None or batch.headers is not None:
                if batch.headers is None:
                    batch.headers = [None] * len(values)
                batch.headers.append(headers)
            values.append(payload)
            batch.timestamps.append(ts)
            batch.size += size
            if sticky:
                batch.sticky = True
            future = batch.group.new()
            idle = self._eager and not self._busy.get(batch.address)
            if batch.size >= self._batch_size or (idle and batch.address is not None):
                del self._open[slot]
                self._close(slot, batch)
            else:
                return future
        finally:
            lock.release()
        if idle:
            self._drain()  # nothing of ours in flight to its leader: on the wire now, from this thread
        else:
            with lock:
                lock.notify()  # the sender thread ships it, with whatever else is ready
        return future

    def send_batch(self, topic: str, data: pa.Table | pa.RecordBatch, partition: int | None = None) -> "list[Future[tuple[int, int]]]":
        """Send Arrow rows without a per-row Python loop; one future per frame shipped.

        Rows go to ``partition`` if given, else to the partition in a ``partition`` column
        if present (bytes topics, as Spark's Kafka sink), else by key hash (bytes topics:
        ``key``; typed topics: the key columns), rows without a key to the sticky partition.
        The data must fit the topic's current schema (``SchemaMismatchError`` otherwise).
        Each future gives ``(partition, offset of the frame's first row)``.  Frames are cut
        deterministically from the input, so an idempotent replay produces the same frames.
        """
        info = self._topic(topic)
        now = self._clock.wall_ms()
        routing = data.column("partition") if "partition" in data.schema.names and info.kind == "bytes" else None
        table = conform(data, info.schema, kind=info.kind, now_ms=now)
        if table.num_rows == 0:
            return []
        n = info.num_partitions
        if partition is not None:
            if not 0 <= partition < n:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition} (it has {n})")
            groups = [(partition, table)]
        else:
            groups = split_rows(topic, info, table, routing, lambda: self._batch_sticky.next(topic, n))
        futures: list[Future[tuple[int, int]]] = []
        for part, rows in groups:
            if self._txn is not None:
                self._txn.add(topic, part)
            frames = cut_frames(rows, info.schema_id, max(self._batch_size, _FRAME_TARGET_BYTES))
            futures.extend(self._ship_frames(topic, part, frames, sticky=False))
        return futures

    # -- transactions (``transactional_id``; ``_producer_txn.py``) ---------------------------

    def _transactions(self) -> ProducerTransactions:
        if self._txn is None:
            raise errors.InvalidTxnStateError("this producer has no transactional_id")
        return self._txn

    def init_transactions(self) -> None:
        """Register the transactional id with its coordinator: fences every older producer
        of the same id (their open transaction is aborted) and gets the id and epoch to
        write with."""
        txn = self._transactions()
        pid, epoch = txn.init()
        with self._lock:
            self.producer_id, self.producer_epoch = pid, epoch
            self._generation[pid] = next(self._id_order)
            self._next_seq.clear()

    def begin_transaction(self) -> None:
        self._transactions().begin()

    def join_transaction(self, label: int, run: str) -> bool:
        """For the Spark sink's write tasks: join micro-batch ``label``'s transaction (of
        this producer's transactional id, opened by writer ``run``) as a participant with a
        fresh producer id.  False when that batch already committed: write nothing.  The
        driver commits or aborts it (``connectors/transactions.py``)."""
        txn = self._transactions()
        if not txn.join(label, run):
            return False
        with self._lock:
            self.producer_id, self.producer_epoch = txn.producer_id, txn.epoch
            self._generation[txn.producer_id] = next(self._id_order)
            self._next_seq.clear()
        return True

    def send_offsets_to_transaction(self, offsets: Mapping[tuple[str, int], int],
                                    group: "str | ConsumerGroupMetadata") -> None:
        """Commit ``offsets`` ((topic, partition) -> next offset to read) to a consumer group
        if and only if this transaction commits (consume-transform-produce).  ``group`` is
        the consumer's ``group_metadata()`` (the group's coordinator checks the member's
        epoch now, as for the member's own commit: a fenced member gets
        ``FencedMemberEpochError``) or, for a group without members, its id."""
        if isinstance(group, str):
            self._transactions().add_offsets(offsets, group)
        else:
            self._transactions().add_offsets(offsets, group.group_id, group.member_id, group.member_epoch)

    def commit_transaction(self) -> None:
        """Flush, then commit: every record of the transaction becomes visible to
        ``read_committed`` consumers, on every partition, or (on an error) none does until
        it is aborted.  ``ProducerFencedError`` / ``TransactionTimedOutError`` when the
        transaction was taken over or timed out."""
        self._end_transaction(True)

    def abort_transaction(self) -> None:
        """Abort: no record of the transaction is ever visible to ``read_committed`` consumers."""
        self._end_transaction(False)

    def _end_transaction(self, commit: bool) -> None:
        txn = self._transactions()

        def drain() -> None:
            self.flush()

        pid, epoch = txn.end(commit, drain)
        with self._lock:
            if pid != self.producer_id:  # the old id's epochs ran out: sequences start afresh under the new one
                self._generation[pid] = next(self._id_order)
            self.producer_id, self.producer_epoch = pid, epoch
            self._next_seq.clear()

    def flush(self, timeout: float | None = None) -> None:
        """Ship every open batch and wait until every record sent so far is acknowledged
        or failed.  Raises ``RequestTimeoutError`` if ``timeout`` (seconds) passes first."""
        self._ship_open()
        deadline = None if timeout is None else self._now_s() + timeout
        with self._lock:
            while self._pending or self._closing:
                remaining = None if deadline is None else deadline - self._now_s()
                if remaining is not None and remaining <= 0:
                    raise errors.RequestTimeoutError(f"flush: {self._pending} batches still unacknowledged")
                self._lock.wait(remaining)

    def _ship_open(self) -> None:
        """Ship every open batch now, without waiting for acknowledgements (``flush``'s
        first half: the console producer ships a chunk of lines, then waits for the chunk
        before it while it reads the next)."""
        with self._lock:
            batches, self._open = self._open, {}
            for slot, batch in batches.items():
                self._close(slot, batch)
        self._drain()

    def close(self, timeout: float | None = None) -> None:
        """Flush, then release connections.  Idempotent.

        With ``timeout`` (seconds), as Kafka's ``close(Duration)``: what is not acknowledged
        when it passes is abandoned: every unfinished send fails with
        ``RequestTimeoutError`` (``maybe_written`` True for sends that went to a broker,
        False for those that never did), nothing is retried, and ``close`` returns."""
        if self._closed:
            return
        forced = False
        try:
            try:
                self.flush(timeout)
            except errors.RequestTimeoutError:
                forced = True
        finally:
            with self._lock:
                self._closed = True
                self._lock.notify_all()
            if forced:
                self._abandon(errors.RequestTimeoutError(
                    f"the producer was closed with sends unacknowledged after close(timeout={timeout})"))
            self._sender.join(timeout=5)
            self._cluster.close()

    def _abandon(self, error: SparkLogError) -> None:
        """``close`` timed out: fail every send not yet acknowledged with ``error``."""
        with self._lock:
            self._force_error = error
            batches = [batch for batch in self._open.values()] + [batch for _, batch in self._ready]
            batches += [batch for _, _, _, batch in self._reship]
            self._closing -= len(self._ready) + len(self._reship)  # a drain under way settles its own
            self._open, self._ready, self._reship, self._retries, self._held = {}, [], [], [], {}
            self._parked.clear()
            self._buffered = 0
            live = list(self._live.values())
            self._lock.notify_all()
        for batch in batches:  # never encoded: on no broker
            self._metrics.add("records_failed", len(batch.values))
            batch.group.fail(type(error)(error.message, **dict(error.details, maybe_written=False)))
        for shipment in live:
            self._failed(shipment, error, appended=None)

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def metrics(self) -> dict[str, float]:
        """This producer's counters: ``records_sent`` (acknowledged; with acks=0, sent),
        ``records_failed``, ``requests``, ``retries`` (attempts sent again), ``errors``
        (failed attempts, retried or not), ``batches`` and the batch sizes
        (``batch_records_*``/``batch_bytes_*``: total, avg, max), ``throttled`` and
        ``throttle_time_ms``."""
        return self._metrics.snapshot()

    def register_metrics(self, registry: Any) -> Any:
        """Export ``metrics()`` to a ``prometheus_client`` registry as ``spark_log_producer_*``
        (labelled with the client id); returns the collector."""
        return self._metrics.register(registry)

    @property
    def throttled(self) -> int:
        """How many answers reported a quota throttle (``throttle_time_ms`` > 0)."""
        return self._gate.throttled

    @property
    def throttle_time_ms(self) -> int:
        """The total throttle time those answers reported."""
        return self._gate.throttle_time_ms

    def _now_s(self) -> float:
        """The injected clock's monotonic time in seconds: linger, retry backoff, delivery
        and flush deadlines are all measured on it."""
        return self._clock.monotonic_ms() / 1000

    # -- partitioning and framing ---------------------------------------------------------

    def _topic(self, topic: str) -> TopicInfo:
        """The topic's metadata; ``NoSchemaError`` for a typed topic without a schema yet."""
        # a broker with auto_create_topics on creates a topic a producer names (as Kafka's)
        info = self._cluster.topic(topic, auto_create=True)
        if info.schema_id < 0:
            info = self._cluster.topic(topic, refresh=True)
        if info.schema_id < 0:
            raise errors.NoSchemaError(
                f"topic {topic!r} has no schema yet; register one (Admin.register_schema) or write with the Spark sink")
        return info

    def _reserve(self, slot: tuple[str, int], count: int, *, closing: bool = False) -> tuple[int, int]:
        """Reserve ``count`` sequences of a partition (caller holds ``self._lock``); returns
        ``(producer_id, first sequence)``.  Batches get their sequences in the order they are
        closed; the broker appends them in that order whatever order their calls arrive in.
        ``closing``: an open batch left ``_open`` and is on its way to ``_pending`` (``flush``
        waits for both)."""
        if closing:
            self._closing += 1
        seq = self._next_seq.get(slot, 0)
        self._next_seq[slot] = seq + count
        if self._resets:
            return self._resets.mapped(slot, self.producer_id, seq)
        return self.producer_id, seq

    def _lost_sequences(self, producer_id: int, slot: tuple[str, int] | None = None, first_seq: int = -1,
                        count: int = 0) -> None:
        """A batch reserved under ``producer_id`` failed for good, leaving a hole in its
        partition's sequences that would refuse every later batch (OUT_OF_ORDER_SEQUENCE).
        With ``slot`` (the batch's partition; it was certainly not written, sequences
        ``first_seq`` on, ``count`` records) the id's later sequences there move to a fresh
        id (``_sequence_reset``).  Otherwise a producer with a random id starts afresh under
        a new id, sequences from 0 (the idea of Kafka's KIP-360); batches already encoded
        under the old id fail as they would have.  An explicit ``producer_id`` (the Spark
        writer's idempotence key) is kept: its owner retries with a new Producer, which
        replays the same sequences."""
        if self._explicit_id:
            return
        with self._lock:
            current = self._resets.origin(producer_id) == self.producer_id
            if slot is not None and current:
                fresh = self._resets.skipped(slot, producer_id, first_seq, count)
                if fresh is not None:  # newest: its frames wait for the old id's earlier ones
                    self._generation[fresh] = next(self._id_order)
                    return
            if current:
                self.producer_id = self._rng.getrandbits(63)
                self._generation[self.producer_id] = next(self._id_order)
                self._next_seq.clear()

    def _encode(self, batch: pa.RecordBatch, schema_id: int, base_sequence: int, producer_id: int,
                timestamp_ms: int | None = None) -> bytes:
        return encode_batch(
            batch, schema_id=schema_id, compression=self._codec,
            timestamp_ms=self._clock.wall_ms() if timestamp_ms is None else timestamp_ms,
            producer_id=producer_id, producer_epoch=self.producer_epoch, base_sequence=base_sequence,
            transactional=self._txn is not None,
        )

    def _leader_or_none(self, slot: tuple[str, int]) -> str | None:
        """The partition's leader as the metadata cache knows it, without asking the
        cluster (None when unknown: the batch then ships by linger or when full)."""
        info = self._topics.get(slot[0])
        meta = info.partitions.get(slot[1]) if info is not None else None
        lookup = getattr(self._cluster, "broker_address", None)
        if meta is None or meta.leader_id < 0 or lookup is None:
            return None
        return lookup(meta.leader_id)  # type: ignore[no-any-return]

    def _close(self, slot: tuple[str, int], batch: OpenBatch) -> None:
        """``batch`` left ``_open``: reserve its sequences and queue it for the wire (caller
        holds ``self._lock``; sequences are reserved in queue order)."""
        batch.pid, batch.seq = self._reserve(slot, len(batch.values), closing=True)
        self._ready.append((slot, batch))
        self._buffered += batch.size
        if batch.address is not None:  # its leader counts as busy until the batch is on the wire
            self._busy[batch.address] = self._busy.get(batch.address, 0) + 1

    def _drain(self) -> None:
        """Ship every queued batch, from this thread, unless another thread is shipping
        (it ships what was queued meanwhile before it stops).  Batches of one partition go
        out in the order they were queued (their sequence order)."""
        lock = self._lock
        with lock:
            if self._shipping or not self._ready:
                return
            self._shipping = True
        try:
            while True:
                with lock:
                    batches, self._ready = self._ready, []
                    if not batches:
                        self._shipping = False
                        lock.notify_all()
                        return
                    self._buffered = 0
                    lock.notify_all()  # senders blocked on the buffer bound
                ready: list[Shipment] = []
                addresses = [batch.address for _, batch in batches]
                for (topic, partition), batch in batches:
                    try:
                        if (topic, partition) in self._parked:  # without the lock: a race only reorders (the broker waits for gaps)
                            self._put_back((topic, partition), batch)  # behind its partition's earlier batches
                        else:
                            self._ship_open_now(topic, partition, batch, ready)
                    finally:
                        with lock:
                            self._closing -= 1
                            if not self._closing:
                                lock.notify_all()  # flush waits for it
                try:
                    if ready:
                        self._issue_many(ready)
                finally:
                    for address in addresses:
                        if address is not None:
                            self._call_done(address)  # on the wire (or failed, or put back): no longer queued
        except BaseException:
            with lock:
                self._shipping = False
                lock.notify_all()
            raise

    def _put_back(self, slot: tuple[str, int], batch: OpenBatch) -> None:
        """Queue ``batch`` again after a backoff (a retriable error before it was encoded);
        ``flush`` waits for it as for any closed batch."""
        batch.attempts += 1
        batch.address = None  # no longer counted as queued for its leader (_drain released it)
        delay = min(_RETRY_BACKOFF_S * 2 ** min(batch.attempts - 1, 5), _RETRY_BACKOFF_MAX_S)
        with self._lock:
            self._closing += 1
            count, due = self._parked.get(slot, (0, 0.0))
            due = max(due, self._now_s() + delay)  # never before an earlier batch of its partition
            self._parked[slot] = (count + 1, due)
            heapq.heappush(self._reship, (due, next(self._issue_seq), slot, batch))
            self._lock.notify_all()

    def _ship_open_now(self, topic: str, partition: int, batch: OpenBatch,
                       collect: list[Shipment]) -> bool:
        """Encode ``batch`` into a shipment on ``collect``; False when a retriable error (a
        metadata lookup failed) put it back to be shipped again after a backoff, until its
        delivery deadline (then, or for any other error, its futures fail)."""
        if self._resets:  # reserved before its id was re-stamped on this partition
            with self._lock:
                batch.pid, batch.seq = self._resets.mapped((topic, partition), batch.pid, batch.seq)
        try:
            info = self._topic(topic)
            if info.kind == "typed":
                record_batch = pa.Table.from_batches(batch.values).combine_chunks().to_batches()[0]
            else:
                codec = self._codec if batch.size >= COMPRESS_MIN_BYTES else Codec.NONE
                message = bytes_ipc_message(batch.keys, batch.values, batch.headers, batch.timestamps, info.schema,
                                            codec)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            batch.group.fail(errors.SchemaMismatchError(f"records do not fit topic {topic!r}: {exc}"))
            self._lost_sequences(batch.pid, (topic, partition), batch.seq, len(batch.values))
            return True
        except SparkLogError as exc:
            self._metrics.add("errors")
            if exc.retriable and not self._closed and self._now_s() < batch.created + self._delivery_timeout_s:
                self._metrics.add("retries")
                self._put_back((topic, partition), batch)
                return False
            self._metrics.add("records_failed", len(batch.values))
            batch.group.fail(exc)
            self._lost_sequences(batch.pid, (topic, partition), batch.seq, len(batch.values))
            return True
        if batch.sticky:
            self._sticky.next(topic, info.num_partitions, previous=partition)
        if info.kind == "typed":  # every row of the batch has the one timestamp (see _append)
            self._ship_frames(topic, partition, [(record_batch, info.schema_id)], sticky=True, group=batch.group,
                              first_seq=batch.seq, producer_id=batch.pid, collect=collect,
                              timestamp_ms=batch.timestamps[0])
            return True
        timestamps = batch.timestamps  # known as ints: the frame header without reading the column back
        frame = encode_message(message, codec=codec, record_count=len(timestamps),
                               first_timestamp=timestamps[0], max_timestamp=max(timestamps),
                               schema_id=info.schema_id, producer_id=batch.pid, producer_epoch=self.producer_epoch,
                               base_sequence=batch.seq, transactional=self._txn is not None)
        self._metrics.batch(len(timestamps), len(frame))
        shipment = Shipment(topic, partition, frame, len(timestamps), self._now_s() + self._delivery_timeout_s,
                            batch.group, next(self._issue_seq), pid=batch.pid, first_seq=batch.seq)
        with self._lock:
            self._pending += 1
            self._live[shipment.seq] = shipment
            counts = self._unsettled.setdefault((topic, partition), {})
            counts[batch.pid] = counts.get(batch.pid, 0) + 1
        collect.append(shipment)
        return True

    def _ship_frames(self, topic: str, partition: int, frames: list[tuple[pa.RecordBatch, int]],
                     *, sticky: bool, group: FutureGroup | None = None,
                     first_seq: int | None = None, producer_id: int = -1,
                     collect: list[Shipment] | None = None,
                     timestamp_ms: int | None = None) -> "list[Future[tuple[int, int]]]":
        """Encode ``frames`` for one partition and issue them (with ``collect``: append the
        shipments to it instead, for ``_issue_many`` to send with other partitions).
        ``timestamp_ms``: the rows' timestamp in a frame without a timestamp column (typed;
        default: now)."""
        futures: list[Future[tuple[int, int]]] = []
        deadline = self._now_s() + self._delivery_timeout_s
        request: list[Shipment] = []
        size = 0
        if first_seq is None:
            with self._lock:
                producer_id, first_seq = self._reserve((topic, partition), sum(b.num_rows for b, _ in frames))
        seq = first_seq
        # frames of one call go out in sequence order; other calls may interleave (the broker reorders)
        for batch, schema_id in frames:
            frame = self._encode(batch, schema_id, seq, producer_id, timestamp_ms)
            seq += batch.num_rows
            done: FutureGroup | Future[Any] = group if group is not None else Future()
            if isinstance(done, Future):
                done.set_running_or_notify_cancel()
                futures.append(done)
            shipment = Shipment(topic, partition, frame, batch.num_rows, deadline, done, next(self._issue_seq),
                                pid=producer_id, first_seq=seq - batch.num_rows)
            request.append(shipment)
            self._metrics.batch(batch.num_rows, len(frame))
            with self._lock:
                self._pending += 1
                self._live[shipment.seq] = shipment
                counts = self._unsettled.setdefault((topic, partition), {})
                counts[producer_id] = counts.get(producer_id, 0) + 1
            size += len(frame)
            if size >= _REQUEST_TARGET_BYTES and collect is None:
                self._issue(request)
                request, size = [], 0
        if collect is not None:
            collect.extend(request)
        elif request:
            self._issue(request)
        return futures

    # -- the wire -------------------------------------------------------------------------

    def _issue(self, shipments: list[Shipment]) -> None:
        """Send one Produce call for shipments of one partition (of one producer id), or hold
        it while an older producer id has sends to that partition not yet settled."""
        self._restamp(shipments)
        if self._hold(shipments):
            return
        first = shipments[0]
        try:
            address, epoch = self._cluster.leader(first.topic, first.partition)
        except SparkLogError as exc:
            for shipment in shipments:
                self._failed(shipment, exc)
            return
        self._send(address, shipments)

    def _restamp(self, shipments: list[Shipment]) -> None:
        """Re-stamp the frames of ``shipments`` whose producer id the partition's leader
        forgot (``_sequence_reset``): the fresh id and sequences, counted as the fresh id's."""
        if not self._resets:
            return
        release: list[list[Shipment]] = []
        with self._lock:
            for shipment in shipments:
                slot = (shipment.topic, shipment.partition)
                pid, seq = self._resets.mapped(slot, shipment.pid, shipment.first_seq)
                if pid == shipment.pid:
                    continue
                if self._uncount(slot, shipment.pid):
                    release += self._held.pop(slot, [])  # they may have waited for that id only
                counts = self._unsettled.setdefault(slot, {})
                counts[pid] = counts.get(pid, 0) + 1
                shipment.frame = with_producer(shipment.frame, pid, seq)
                shipment.pid, shipment.first_seq = pid, seq
        for held in release:
            self._issue(held)  # held again if another older id is still unsettled

    def _hold(self, shipments: list[Shipment]) -> bool:
        """Hold ``shipments`` (of one partition and producer id) while an older producer id
        has sends to that partition not yet settled; True when held."""
        first = shipments[0]
        slot = (first.topic, first.partition)
        with self._lock:
            mine = self._generation.get(first.pid, 0)
            counts = self._unsettled.get(slot, {})
            if any(n and self._generation.get(pid, 0) < mine for pid, n in counts.items() if pid != first.pid):
                self._held.setdefault(slot, []).append(shipments)
                return True
        return False

    def _issue_many(self, shipments: list[Shipment]) -> None:
        """Send shipments of many partitions: one Produce call per leader broker (split at
        ``_REQUEST_TARGET_BYTES``), so a linger round over 1,000 partitions costs a few
        calls, not 1,000.  Per partition as ``_issue``."""
        self._restamp(shipments)
        slots: dict[tuple[str, int, int], list[Shipment]] = {}
        for shipment in shipments:
            slots.setdefault((shipment.topic, shipment.partition, shipment.pid), []).append(shipment)
        by_address: dict[str, list[Shipment]] = {}
        for (topic, partition, _), group in slots.items():
            if self._hold(group):
                continue
            try:
                address, _epoch = self._cluster.leader(topic, partition)
            except SparkLogError as exc:
                for shipment in group:
                    self._failed(shipment, exc)
                continue
            by_address.setdefault(address, []).extend(group)
        for address, group in by_address.items():
            request: list[Shipment] = []
            size = 0
            for shipment in group:
                request.append(shipment)
                size += len(shipment.frame)
                if size >= _REQUEST_TARGET_BYTES:
                    self._send(address, request)
                    request, size = [], 0
            if request:
                self._send(address, request)

    def _send(self, address: str, shipments: list[Shipment]) -> None:
        """One Produce call to ``address`` for ``shipments`` (any partitions it leads)."""
        if self._force_error is not None:  # a close() whose timeout passed: nothing more goes out
            for shipment in shipments:
                self._failed(shipment, self._force_error)
            return
        request = encode_produce_request(  # the frames copied once, not into a message and out again
            acks=self._acks, timeout_ms=int(self._request_timeout_s * 1000),
            transactional_id=self._txn.transactional_id if self._txn is not None else "",
            entries=[(s.topic, s.partition, s.frame) for s in shipments])
        self._in_flight.acquire()
        self._gate.acquire(address, timeout_s=self._request_timeout_s)
        with self._lock:
            self._busy[address] = self._busy.get(address, 0) + 1
        try:
            call = self._cluster.produce_raw(address).future(request, timeout=self._request_timeout_s)
        except Exception as exc:  # noqa: BLE001 - e.g. a closed channel, a refused authentication
            self._in_flight.release()
            self._gate.release(address, None)
            self._call_done(address)
            error = (errors.from_rpc_error(exc, address=address) if isinstance(exc, (grpc.RpcError, SparkLogError))
                     else errors.BrokerNotAvailableError(f"cannot send to {address}: {exc}"))
            for shipment in shipments:
                self._failed(shipment, error)
            return
        self._metrics.add("requests")
        if self._acks == 0:
            self._metrics.add("records_sent", sum(s.count for s in shipments))
            for shipment in shipments:
                shipment.resolve(-1)
                self._unsettle(shipment)
                self._settled(shipment)
            def settled(_: Any) -> None:
                self._in_flight.release()
                self._gate.release(address, None)
                self._call_done(address, answered=True)

            call.add_done_callback(settled)
            return
        call.add_done_callback(lambda f: self._on_response(f, shipments, address))

    def _call_done(self, address: str, *, answered: bool = False) -> None:
        """A Produce call to ``address`` is over (or a queued batch for it left the queue):
        when nothing of ours is queued or in flight there any more, that leader's open
        batches go now (they were lingering only behind a call: see the module docstring).

        ``answered``: called from a call's done-callback, i.e. on gRPC's thread for that
        channel, which must never block (it is the thread that would deliver the answers
        that free ``max_in_flight``): the sender thread ships them instead."""
        with self._lock:
            left = self._busy.get(address, 1) - 1
            if left > 0:
                self._busy[address] = left
                return
            self._busy.pop(address, None)
            if not self._eager:
                return  # an explicit linger_ms: open batches wait for it (or batch_size, or flush)
            due = [(slot, batch) for slot, batch in self._open.items() if batch.address == address]
            for slot, batch in due:
                del self._open[slot]
                self._close(slot, batch)
            if due and answered:
                self._lock.notify_all()  # the sender thread drains
        if due and not answered:
            self._drain()

    def _on_response(self, call: Any, shipments: list[Shipment], address: str) -> None:
        try:
            self._handle_response(call, shipments, address)
        finally:
            self._call_done(address, answered=True)

    def _handle_response(self, call: Any, shipments: list[Shipment], address: str) -> None:
        self._in_flight.release()
        try:
            response: pb.ProduceResponse = call.result()
        except (grpc.RpcError, SparkLogError) as exc:  # SparkLogError: the data listener's (_data_transport.py)
            self._gate.release(address, None)
            error = errors.from_rpc_error(exc, address=address)
            for shipment in shipments:
                self._failed(shipment, error, appended=None)
            return
        except Exception as exc:  # noqa: BLE001 - cancelled on close
            self._gate.release(address, None)
            for shipment in shipments:
                self._failed(shipment, errors.BrokerNotAvailableError(str(exc)), appended=None)
            return
        self._gate.release(address, response.throttle_time_ms)
        for shipment, result in zip(shipments, response.partitions):
            failure = error_from_pb(result.error)
            if shipment.seq not in self._live:
                continue  # failed already, by a close() whose timeout passed
            if failure is None or isinstance(failure, DuplicateSequenceError):
                # DUPLICATE_SEQUENCE: a replay of a frame appended so long ago that the broker
                # no longer knows its offsets: the records are in the log, the send succeeded
                # with offset -1 (Kafka's Sender does the same)
                self._metrics.add("records_sent", shipment.count)
                shipment.resolve(result.base_offset if failure is None else -1)
                self._unsettle(shipment, last_offset=result.last_offset if failure is None else -1)
                self._settled(shipment)
            else:  # an answer with the offsets of an append failed after appending (e.g. the acks=all wait)
                self._failed(shipment, failure, appended=result.base_offset >= 0, log_start=result.log_start_offset)

    def _settled(self, shipment: Shipment) -> None:
        """``shipment`` is resolved or failed for good (once: a close that timed out may have
        failed it before its answer came)."""
        with self._lock:
            if self._live.pop(shipment.seq, None) is not None:
                self._pending -= 1
            self._lock.notify_all()

    def _uncount(self, slot: tuple[str, int], producer_id: int) -> bool:
        """One unsettled shipment of ``producer_id`` on ``slot`` fewer (caller holds the lock);
        True when the id has none left there (the newer ids' held shipments may go)."""
        counts = self._unsettled.get(slot, {})
        left = counts.get(producer_id, 0) - 1
        if left > 0:
            counts[producer_id] = left
            return False
        counts.pop(producer_id, None)
        if not counts:
            self._unsettled.pop(slot, None)
        return True

    def _unsettle(self, shipment: Shipment, *, last_offset: int | None = None) -> None:
        """``shipment`` is settled (acknowledged, with ``last_offset`` the offset of its last
        record or -1 when unknown, or failed for good): once its producer id has nothing
        unsettled on the partition, the newer ids' held shipments go."""
        slot = (shipment.topic, shipment.partition)
        release: list[list[Shipment]] = []
        with self._lock:
            if last_offset is not None and not self._explicit_id:
                self._resets.acknowledged(slot, shipment.pid, shipment.first_seq, shipment.count, last_offset)
            if slot not in self._unsettled or not self._uncount(slot, shipment.pid):
                return
            release = self._held.pop(slot, [])
        for shipments in release:
            self._issue(shipments)  # held again if another older id is still unsettled

    def _failed(self, shipment: Shipment, error: SparkLogError, *, appended: bool | None = False,
                log_start: int = -1) -> None:
        """One attempt of ``shipment`` failed with ``error``: retry it, or fail its futures.
        ``appended``: the broker's answer says it appended the records (True) or not
        (False, also when nothing was sent); None when the call failed without a
        per-partition answer: then the error's class says (``refused_before_write``).
        ``log_start``: the partition's log start offset the answer gave (-1: none)."""
        if shipment.seq not in self._live:  # failed already, by a close() whose timeout passed
            return
        if isinstance(error, OutOfOrderSequenceError) and not self._explicit_id:
            with self._lock:  # the leader may have forgotten the id: re-stamp (KIP-360)
                fresh = self._resets.refused((shipment.topic, shipment.partition), shipment.pid, shipment.first_seq,
                                             maybe_written=shipment.maybe_written, log_start=log_start)
                if fresh is not None:
                    self._generation[fresh] = self._generation.get(shipment.pid, 0)
                    shipment.attempts = 0
        if appended or (appended is None and not error.refused_before_write):
            shipment.maybe_written = True
        retriable = error.retriable or (isinstance(error, OutOfOrderSequenceError) and shipment.attempts < 20)
        self._metrics.add("errors")
        if self._force_error is not None:  # closed: no retry
            retriable, error = False, self._force_error
        if retriable and self._now_s() < shipment.deadline:
            self._metrics.add("retries")
            # a leader that timed out may be on the wrong side of a partition, still believing
            # it leads: ask for metadata again (Kafka's producer does after a request timeout)
            if error.refresh_metadata or isinstance(error, (OutOfOrderSequenceError, errors.RequestTimeoutError)):
                self._cluster.forget(shipment.topic)
            shipment.attempts += 1
            delay = min(_RETRY_BACKOFF_S * 2 ** min(shipment.attempts - 1, 5), _RETRY_BACKOFF_MAX_S)
            with self._lock:
                heapq.heappush(self._retries, (self._now_s() + delay, shipment.seq, shipment))
                self._lock.notify_all()
            return
        self._metrics.add("records_failed", shipment.count)
        if isinstance(error, errors.RecordTooLargeError):
            # the broker checks a frame's size before its sequences (a written frame's retry
            # would be a duplicate otherwise): an earlier attempt that timed out wrote nothing
            # either, unless the topic's max.message.bytes was lowered in between
            shipment.maybe_written = False
        outcome = dict(error.details, maybe_written=shipment.maybe_written)
        shipment.fail(type(error)(error.message, **outcome))  # a copy: one error may serve several shipments
        if self._txn is not None:
            self._txn.note_failure(error)
        if shipment.maybe_written:
            self._lost_sequences(shipment.pid)
        else:
            self._lost_sequences(shipment.pid, (shipment.topic, shipment.partition), shipment.first_seq,
                                 shipment.count)
        self._unsettle(shipment)
        self._settled(shipment)

    # -- the sender thread: linger expiry and retries ----------------------------------------

    def _run_sender(self) -> None:
        while True:
            retry: list[Shipment] = []
            with self._lock:
                if self._closed and not self._open and not self._retries and not self._ready and not self._reship:
                    return
                now = self._now_s()
                wake = now + 1.0
                for slot, batch in list(self._open.items()):
                    if now - batch.created >= self._linger_s:
                        del self._open[slot]
                        self._close(slot, batch)
                    else:
                        wake = min(wake, batch.created + self._linger_s)
                while self._retries and self._retries[0][0] <= now:
                    retry.append(heapq.heappop(self._retries)[2])
                if self._retries:
                    wake = min(wake, self._retries[0][0])
                while self._reship and self._reship[0][0] <= now:
                    _, _, slot, batch = heapq.heappop(self._reship)
                    count, due = self._parked[slot]
                    if count > 1:
                        self._parked[slot] = (count - 1, due)
                    else:
                        del self._parked[slot]
                    self._ready.append((slot, batch))
                    self._buffered += batch.size
                if self._reship:
                    wake = min(wake, self._reship[0][0])
                if not retry and (self._shipping or not self._ready):
                    self._lock.wait(max(0.0, wake - now))
                    continue
            self._drain()
            for shipment in retry:
                self._issue([shipment])
