"""``ReplicaFetcher``: one follower thread per leader broker (Kafka's ReplicaFetcherThread).

Each round sends one fetch (``replica_id`` = this broker) for every partition
this broker follows under that leader, each with its log end offset as ``fetch_offset``,
the epoch of its last record as ``last_fetched_epoch``, the leader epoch it knows as
``current_leader_epoch`` and its replica's topic id (KIP-516: a topic deleted and created
again under the same name starts at leader epoch 0 again, so only the id tells the leader
that it hosts the other incarnation; it then answers ``INCONSISTENT_TOPIC_ID``, an error
like the ones below).  Per partition answer:

- ``diverging_epoch``: the partition truncates (KIP-595's rule) and fetches again;
- ``records``: the partition appends them (frames below its LEO, if the answer starts
  inside a frame it already holds, are skipped); then takes the HW from the answer;
- an error (NOT_LEADER, FENCED_EPOCH, ...): the partition waits for the next metadata
  image, which re-assigns it (``ReplicaManager``); other partitions go on, and the refused
  one is not fetched again for ``retry_backoff_ms`` unless its leader epoch changes first
  (Kafka's delayed partitions: a refusal ends the leader's wait, so fetching it every round
  would spin the thread).

Both ends are the partition's typed methods (``Partition.fetch_position`` builds the
request, ``Partition.apply_fetched`` applies the answer); the partition checks, under its
lock, that it still follows this leader in the epoch the request was built with (a
leadership change between request and answer discards the answer), and the round applies an
answer only to a replica of the topic id its request named.  Transport failures back off
``retry_backoff_ms`` on the thread's condition (woken at once by ``stop``), never sleep.
Fault hook: ``FetchFaults`` may delay each round or block this leader entirely.

Idle rounds: after a round that brought no records (and no errors) the next one asks the
leader to wait up to ``idle_wait_max_ms`` instead of ``fetch_wait_max_ms``; new data ends
the wait at once, so only the cost of idle partitions changes (a follower's view of the HW
of a partition whose HW moved without new data may lag by that long).  An answer with no
frames and the same leader HW as the last one applied to the same replica in the same
leader epoch is not applied again: it would set the same HW (truncations, which could
lower ours, come with a diverging answer, an error or a new epoch, each of which clears it).

Latency: the next fetch goes out as soon as an answer is applied, since its ``fetch_offset``
is what advances the leader's high watermark (acks=all waits on it).  The fetch is a
*blocking* call on this thread: gRPC Python serves a ``.future()`` call from a spin thread
that it starts each time a channel goes from 0 to 1 calls in flight, which for a fetcher
(one call at a time) is a new thread and two thread handoffs per round.  ``stop`` cancels
the call in flight by closing the channel.

Transport (``transport``, the broker's ``replica_fetch_transport``): ``"auto"`` sends each
round as a ``REPLICA_FETCH`` to the leader's binary data listener (``data_fetch.py``; the
leader answers with the same ``LeaderFetchHandler`` as the gRPC ``Fetch``), falling back to
gRPC for a round when the leader has no listener or it cannot be used (refused connection,
TLS or authentication failure, an older leader): logged, and tried again after
``_DATA_RETRY_S``.  Rounds over the data listener run in the connection's fetch session
(``REPLICA_FETCH_SESSION_V2``, ``brokers/server/replica_session.py``): only the partitions whose
position changed travel, and the leader answers only those with something new, so a
partition missing from an answer has nothing new (an idle round of 1,000 partitions is a
few bytes each way).  A leader that refuses sessions is fetched with ``REPLICA_FETCH_V2`` (every
partition both ways) and asked again after ``_SESSION_RETRY_S``; an answer that could not be
applied is asked for again in full (``DataFetchClient.resend``).  A connection that fails during a fetch is dropped, and the round fails
like a gRPC call (backoff, then a new connection).  ``"grpc"``: gRPC only.

Copies: over the data listener the answer is read into one buffer and the frames handed on
as views of it; over gRPC the answer's bytes are read with
``spark_log.fetch_wire.parse_fetch_response``, so the frames are views of gRPC's buffer.
Either way they are checked (CRC included) and written, never copied in between.

Thread-safety: ``set_partitions``/``stop`` may be called from any thread.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Protocol

import grpc

from brokers.net.channels import PEER_CHANNEL_OPTIONS, PLAINTEXT, Channels
from brokers.net.faults import FetchFaults
from brokers.partition import FetchedData, Partition
from brokers.partition.messages import Diverging
from spark_log.errors import ErrorCode, InvalidRequestError, SparkLogError
from spark_log.fetch_wire import parse_fetch_response
from spark_log.proto import broker_pb2 as pb

from .data_fetch import DataFetchClient, ReplicaAnswer
from .replica_wire import ReplicaWanted

__all__ = ["ReplicaFetcher", "DataAddresses", "TRANSPORTS"]

log = logging.getLogger(__name__)

TRANSPORTS = ("auto", "grpc")
_DATA_RETRY_S = 5.0  # a leader whose data listener could not be used is asked again after this
_SESSION_RETRY_S = 60.0  # a leader that refused fetch sessions is asked again after this


class DataAddresses(Protocol):
    """Where each broker's data listener is (``brokers.server.data_listener.DataPeers``)."""

    def address(self, broker_id: int, grpc_address: str) -> tuple[str, int]: ...

    def forget(self, broker_id: int, grpc_address: str) -> None: ...


class ReplicaFetcher:
    def __init__(self, *, broker_id: int, leader_id: int, address: str, faults: FetchFaults,
                 fetch_wait_max_ms: int = 200, max_bytes: int = 16 << 20, retry_backoff_ms: int = 100,
                 channels: Channels = PLAINTEXT, idle_wait_max_ms: int | None = None,
                 transport: str = "grpc", data_peers: DataAddresses | None = None) -> None:
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.address = address
        self.faults = faults
        self.fetch_wait_max_ms = fetch_wait_max_ms
        # after a round that brought no records, the next one may wait this long at the leader
        # (new data still ends it at once): an idle follower costs its partitions less often
        self.idle_wait_max_ms = max(fetch_wait_max_ms, idle_wait_max_ms or fetch_wait_max_ms)
        self._idle = False
        # (topic, partition) -> (replica, leader epoch, leader HW) of its last answer applied
        # without frames: the same answer again changes nothing, so it is not applied (an idle
        # round of 1,000 partitions takes no partition lock for them)
        self._settled: dict[tuple[str, int], tuple[Partition, int, int]] = {}
        # (topic, partition) -> (leader epoch, monotonic time): refused by the leader in that epoch,
        # not fetched again before that time unless its leader epoch changed
        self._delayed: dict[tuple[str, int], tuple[int, float]] = {}
        self.max_bytes = max_bytes
        self.retry_backoff_ms = retry_backoff_ms
        self._cond = threading.Condition()
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._stopped = False
        self.transport = transport  # "auto": the leader's data listener when it has one; "grpc": gRPC only
        self._data_peers = data_peers
        self._channels = channels
        self._data: DataFetchClient | None = None
        self._data_retry_at = 0.0
        self._sessions_retry_at = 0.0  # fetch sessions (REPLICA_FETCH_SESSION_V2) unless refused since
        self.data_connections = 0  # data listener connections opened (tests, describe)
        self._channel = channels.open(address, PEER_CHANNEL_OPTIONS)  # the node's security (TLS or not)
        self._fetch: Callable[..., bytes] = self._channel.unary_unary(  # the answer's bytes: parse_fetch_response copies no records
            "/spark_log.broker.v1.Broker/Fetch", request_serializer=pb.FetchRequest.SerializeToString)
        self._thread = threading.Thread(target=self._run, name=f"replica-fetcher-{broker_id}-from-{leader_id}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, *, join: bool = True, timeout_s: float = 10.0) -> None:
        """Stop the thread; an in-flight fetch is cancelled (closing the channel cancels it:
        a leader that stopped answering must not hold up a leadership change).  ``join=False``
        returns at once; else the thread is joined for at most ``timeout_s``."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            data = self._data
        self._channel.close()
        if data is not None:
            data.close()  # ends a fetch in flight over the data listener
        if join:
            self.join(timeout_s)

    def join(self, timeout_s: float) -> None:
        """Wait at most ``timeout_s`` for the stopped thread to end."""
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(0.0, timeout_s))

    def set_partitions(self, partitions: dict[tuple[str, int], Partition]) -> None:
        with self._cond:
            self._partitions = dict(partitions)
            self._cond.notify_all()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` or until stopped; False once stopped."""
        with self._cond:
            if not self._stopped:
                self._cond.wait(seconds)
            return not self._stopped

    # -- the loop -----------------------------------------------------------------------------

    def _run(self) -> None:
        self._loop()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._partitions and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                partitions = dict(self._partitions)
            self.faults.refresh()
            if self.faults.blocked(self.leader_id):
                if not self._pause(self.fetch_wait_max_ms / 1000):
                    return
                continue
            if self.faults.delay_ms and not self._pause(self.faults.delay_ms / 1000):
                return
            try:
                self._round(partitions)
            except Exception as exc:  # noqa: BLE001 - keep following; the next round retries
                if self.stopped:
                    return  # stop() closed the channel: the call was cancelled (or refused)
                if isinstance(exc, grpc.RpcError):
                    log.debug("fetch from broker %d at %s failed: %s", self.leader_id, self.address, exc.code())
                elif isinstance(exc, (OSError, SparkLogError)):  # the data listener: transport or refusal
                    log.debug("fetch from broker %d's data listener failed: %r", self.leader_id, exc)
                else:
                    log.exception("replica fetch round from broker %d failed", self.leader_id)
                if not self._pause(self.retry_backoff_ms / 1000):
                    return

    def _round(self, partitions: dict[tuple[str, int], Partition]) -> None:
        wait_ms = self.idle_wait_max_ms if self._idle else self.fetch_wait_max_ms
        epochs: dict[tuple[str, int], int] = {}
        topic_ids: dict[tuple[str, int], str] = {}  # what each request named: an answer applies to that replica only
        wanted: list[ReplicaWanted] = []
        delayed = self._delayed
        now = time.monotonic() if delayed else 0.0
        for key, partition in partitions.items():
            position = partition.fetch_position(self.leader_id)
            if position is None:
                continue
            if delayed:
                until = delayed.get(key)
                if until is not None:
                    if until[0] == position.current_leader_epoch and now < until[1]:
                        continue  # it erred in this leader epoch: not asked again before its backoff
                    del delayed[key]
            epochs[key] = position.current_leader_epoch
            topic_ids[key] = topic_id = partition.topic_id
            wanted.append(ReplicaWanted(key[0], key[1], position.fetch_offset, position.current_leader_epoch,
                                        position.last_fetched_epoch, position.log_start_offset, 0, topic_id))
        if len(self._settled) > len(partitions):
            self._settled = {k: v for k, v in self._settled.items() if k in partitions}
        if delayed and any(key not in partitions for key in delayed):
            self._delayed = {k: v for k, v in delayed.items() if k in partitions}
        if not wanted:
            self._pause(self.retry_backoff_ms / 1000)
            return
        if self.stopped:
            return
        self._idle = False
        answers = self._fetch_over_data(wanted, wait_ms)
        if answers is None:
            answers = self._fetch_over_grpc(wanted, wait_ms)
        errors = 0
        fetched_bytes = 0
        for answer in answers:
            key = (answer.topic, answer.partition)
            answered = partitions.get(key)
            if answered is None or key not in epochs or answered.topic_id != topic_ids[key]:
                continue  # not asked for, or not the replica that asked (another topic id): nothing applied
            if answer.error_code:
                self._settled.pop(key, None)
                if answer.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and answer.log_start_offset > 0:
                    # below the leader's log start (retention, or local retention of a tiered topic):
                    # start over at it, as Kafka's truncateFullyAndStartAt
                    answered.start_at_leader_log_start(self.leader_id, epochs[key], answer.log_start_offset)
                    continue
                errors += 1
                # the leader refused it (not the leader, a fenced or unknown epoch, ...): until new
                # metadata moves it, it is not fetched for retry_backoff_ms, so one refused
                # partition does not turn every round into an immediate one (the refusal ends
                # the leader's wait) for the partitions beside it
                self._delayed[key] = (epochs[key], time.monotonic() + self.retry_backoff_ms / 1000)
                continue
            fetched_bytes += len(answer.records)
            quiet = not len(answer.records) and answer.diverging is None
            state = (answered, epochs[key], answer.high_watermark)
            settled = self._settled.get(key)
            if quiet and settled is not None and settled[0] is answered and settled[1:] == state[1:]:
                continue
            try:
                answered.apply_fetched(self.leader_id, epochs[key],
                                       FetchedData(answer.diverging, answer.records, answer.high_watermark))
            except SparkLogError as exc:
                errors += 1
                self._settled.pop(key, None)
                if self._data is not None:
                    self._data.resend(*key)  # its session answer is then sent in full again
                log.warning("follower %s-%d from broker %d: %s", key[0], key[1], self.leader_id, exc)
                continue
            if quiet:
                self._settled[key] = state
            else:
                self._settled.pop(key, None)
        self._idle = not fetched_bytes and not errors
        if errors and errors == len(wanted):
            self._pause(self.retry_backoff_ms / 1000)  # everything erred: wait for new metadata

    # -- transports ---------------------------------------------------------------------------

    def _fetch_over_grpc(self, wanted: list[ReplicaWanted], wait_ms: int) -> list[ReplicaAnswer]:
        request = pb.FetchRequest(replica_id=self.broker_id, max_wait_ms=wait_ms, min_bytes=1,
                                  max_bytes=self.max_bytes)
        for w in wanted:
            request.partitions.add(topic=w.topic, partition=w.partition, fetch_offset=w.fetch_offset,
                                   current_leader_epoch=w.current_leader_epoch,
                                   last_fetched_epoch=w.last_fetched_epoch, log_start_offset=w.log_start_offset,
                                   topic_id=w.topic_id)
        response = parse_fetch_response(self._fetch(request, timeout=wait_ms / 1000 + 5.0))
        answers: list[ReplicaAnswer] = []
        for result, records, _ in response.partitions:
            error = result.error if result.HasField("error") else None
            diverging = (Diverging(result.diverging_epoch.epoch, result.diverging_epoch.end_offset)
                         if result.HasField("diverging_epoch") else None)
            answers.append(ReplicaAnswer(result.topic, result.partition, error.code if error is not None else 0,
                                         error.message if error is not None else "", result.high_watermark,
                                         result.log_start_offset, diverging,
                                         records if records is not None else memoryview(b"")))
        return answers

    def _fetch_over_data(self, wanted: list[ReplicaWanted], wait_ms: int) -> list[ReplicaAnswer] | None:
        """The round over the leader's data listener; None: use gRPC for this round (no data
        transport configured, the leader has no listener, or it could not be reached or
        refused the connection: tried again after ``_DATA_RETRY_S``).  A connection that
        fails during a fetch raises (the loop backs off; the next round reconnects)."""
        if self.transport != "auto" or self._data_peers is None or time.monotonic() < self._data_retry_at:
            return None
        client = self._data
        if client is None or client.closed:
            client = self._connect_data()
            if client is None:
                return None
        sessions = time.monotonic() >= self._sessions_retry_at
        try:
            if sessions:
                return client.fetch_session(replica_id=self.broker_id, max_wait_ms=wait_ms,
                                            max_bytes=self.max_bytes, partitions=wanted)
            return client.fetch(replica_id=self.broker_id, max_wait_ms=wait_ms, max_bytes=self.max_bytes,
                                partitions=wanted)
        except InvalidRequestError as exc:
            if sessions:  # a leader that does not know REPLICA_FETCH_SESSION_V2 (it closed the connection)
                log.info("broker %d's data listener refused REPLICA_FETCH_SESSION_V2 (%s): fetching without a "
                         "session", self.leader_id, exc)
                self._sessions_retry_at = time.monotonic() + _SESSION_RETRY_S
                self._data = None
                return None  # this round over gRPC; the next over a new connection without a session
            # a leader that does not know REPLICA_FETCH_V2 (one that predates topic ids in follower fetches)
            log.info("broker %d's data listener refused REPLICA_FETCH_V2 (%s): fetching over gRPC", self.leader_id, exc)
            self._drop_data(retry=True)
            return None
        except BaseException:
            self._drop_data(retry=False)
            raise

    def _connect_data(self) -> DataFetchClient | None:
        assert self._data_peers is not None
        host, port = self._data_peers.address(self.leader_id, self.address)
        if not port:
            self._data_retry_at = time.monotonic() + _DATA_RETRY_S
            return None
        try:
            client = DataFetchClient(host, port, channels=self._channels)
        except (OSError, SparkLogError) as exc:
            log.info("replica fetcher %d: cannot use broker %d's data listener at %s:%d (%s): fetching over gRPC",
                     self.broker_id, self.leader_id, host, port, exc)
            self._data_peers.forget(self.leader_id, self.address)
            self._data_retry_at = time.monotonic() + _DATA_RETRY_S
            return None
        with self._cond:
            if self._stopped:
                client.close()
                return None
            self._data = client
        self.data_connections += 1
        log.info("replica fetcher %d: fetching from broker %d over its data listener at %s:%d", self.broker_id,
                 self.leader_id, host, port)
        return client

    def _drop_data(self, *, retry: bool) -> None:
        client, self._data = self._data, None
        if client is not None:
            client.close()
        if self._data_peers is not None:
            self._data_peers.forget(self.leader_id, self.address)
        if retry:
            self._data_retry_at = time.monotonic() + _DATA_RETRY_S
