"""``ReplicaFetcher``: one follower thread per leader broker (Kafka's ReplicaFetcherThread).

Each round sends one ``FetchRequest`` (``replica_id`` = this broker) for every partition
this broker follows under that leader, each with its log end offset as ``fetch_offset``,
the epoch of its last record as ``last_fetched_epoch`` and the leader epoch it knows as
``current_leader_epoch``.  Per partition answer:

- ``diverging_epoch``: truncate to ``divergence.follower_truncation_offset`` (KIP-595's
  rule) and fetch again;
- ``records``: ``Partition.append_as_follower`` (frames below our LEO, if the answer starts
  inside a frame we already hold, are skipped); then the HW from the answer;
- an error (NOT_LEADER, FENCED_EPOCH, ...): the partition waits for the next metadata
  image, which re-assigns it (``ReplicaManager``); other partitions go on.

Every partition operation checks, under the partition's lock, that the partition still
follows this leader in the epoch the request was built with (a leadership change between
request and answer discards the answer).  Transport failures back off
``retry_backoff_ms`` on the thread's condition (woken at once by ``stop``), never sleep.
Fault hook: ``FetchFaults`` may delay each round or block this leader entirely.

Latency: the next fetch goes out as soon as an answer is applied, since its ``fetch_offset``
is what advances the leader's high watermark (acks=all waits on it).  The fetch is a
*blocking* call on this thread: gRPC Python serves a ``.future()`` call from a spin thread
that it starts each time a channel goes from 0 to 1 calls in flight, which for a fetcher
(one call at a time) is a new thread and two thread handoffs per round.  ``stop`` cancels
the call in flight by closing the channel.

Thread-safety: ``set_partitions``/``stop`` may be called from any thread.
"""
from __future__ import annotations

import logging
import threading

import grpc

from brokers.net.channels import PEER_CHANNEL_OPTIONS
from brokers.net.faults import FetchFaults
from spark_log.errors import SparkLogError
from spark_log.frame import iter_frames
from spark_log.proto import broker_pb2 as pb
from spark_log.proto import broker_pb2_grpc as rpc

from .divergence import epoch_of_last_record, follower_truncation_offset

__all__ = ["ReplicaFetcher"]

log = logging.getLogger(__name__)


class ReplicaFetcher:
    def __init__(self, *, broker_id: int, leader_id: int, address: str, faults: FetchFaults,
                 fetch_wait_max_ms: int = 200, max_bytes: int = 16 << 20, retry_backoff_ms: int = 100) -> None:
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.address = address
        self.faults = faults
        self.fetch_wait_max_ms = fetch_wait_max_ms
        self.max_bytes = max_bytes
        self.retry_backoff_ms = retry_backoff_ms
        self._cond = threading.Condition()
        self._partitions: dict[tuple[str, int], object] = {}
        self._stopped = False
        self._channel = grpc.insecure_channel(address, options=PEER_CHANNEL_OPTIONS)
        self._stub = rpc.BrokerStub(self._channel)
        self._thread = threading.Thread(target=self._run, name=f"replica-fetcher-{broker_id}-from-{leader_id}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, *, join: bool = True) -> None:
        """Stop the thread; an in-flight fetch is cancelled (closing the channel cancels it:
        a leader that stopped answering must not hold up a leadership change).  ``join=False``
        returns at once."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._channel.close()
        if join:
            self._thread.join(timeout=10)

    def set_partitions(self, partitions: dict[tuple[str, int], object]) -> None:
        with self._cond:
            self._partitions = dict(partitions)
            self._cond.notify_all()

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
                if self._stopped:
                    return  # stop() closed the channel: the call was cancelled (or refused)
                if isinstance(exc, grpc.RpcError):
                    log.debug("fetch from broker %d at %s failed: %s", self.leader_id, self.address, exc.code())
                else:
                    log.exception("replica fetch round from broker %d failed", self.leader_id)
                if not self._pause(self.retry_backoff_ms / 1000):
                    return

    def _round(self, partitions: dict[tuple[str, int], object]) -> None:
        request = pb.FetchRequest(replica_id=self.broker_id, max_wait_ms=self.fetch_wait_max_ms, min_bytes=1,
                                  max_bytes=self.max_bytes)
        epochs: dict[tuple[str, int], int] = {}
        for key, partition in partitions.items():
            with partition.cond:  # type: ignore[attr-defined]
                if (partition.is_leader or partition.leader_id != self.leader_id  # type: ignore[attr-defined]
                        or partition.removed):  # type: ignore[attr-defined]
                    continue
                plog = partition.log  # type: ignore[attr-defined]
                leo = plog.log_end_offset
                epochs[key] = partition.leader_epoch  # type: ignore[attr-defined]
                request.partitions.add(topic=key[0], partition=key[1], fetch_offset=leo,
                                       current_leader_epoch=epochs[key],
                                       last_fetched_epoch=epoch_of_last_record(plog.epoch_entries(), leo),
                                       log_start_offset=plog.log_start_offset)
        if not request.partitions:
            self._pause(self.retry_backoff_ms / 1000)
            return
        if self._stopped:
            return
        response = self._stub.Fetch(request, timeout=self.fetch_wait_max_ms / 1000 + 5.0)
        errors = 0
        for result in response.partitions:
            key = (result.topic, result.partition)
            partition = partitions.get(key)
            if partition is None or key not in epochs:
                continue
            if result.HasField("error") and result.error.code != 0:
                errors += 1
                continue
            try:
                self._apply(partition, epochs[key], result)
            except SparkLogError as exc:
                errors += 1
                log.warning("follower %s-%d from broker %d: %s", key[0], key[1], self.leader_id, exc)
        if errors and errors == len(response.partitions):
            self._pause(self.retry_backoff_ms / 1000)  # everything erred: wait for new metadata

    def _apply(self, partition, epoch: int, result: pb.FetchPartitionResult) -> None:
        with partition.cond:
            if (partition.is_leader or partition.removed or partition.leader_id != self.leader_id
                    or partition.leader_epoch != epoch):
                return
            plog = partition.log
            if result.HasField("diverging_epoch"):
                leo = plog.log_end_offset
                cut = follower_truncation_offset(plog.epoch_entries(), leo,
                                                 (result.diverging_epoch.epoch, result.diverging_epoch.end_offset))
                log.info("%s-%d diverged from leader %d at epoch %d: truncating %d -> %d", result.topic,
                         result.partition, self.leader_id, result.diverging_epoch.epoch, leo, cut)
                partition.truncate_as_follower(cut)
                return
            data = memoryview(result.records)
            if len(data):
                leo = plog.log_end_offset
                skip = 0
                for position, header in iter_frames(data, verify=False):
                    if header.base_offset >= leo:
                        break
                    skip = position + header.frame_length
                if skip < len(data):
                    partition.append_as_follower(data[skip:])
            partition.replica.on_leader_high_watermark(result.high_watermark, plog.log_end_offset)
