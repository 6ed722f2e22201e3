"""Transaction markers: the broker side that writes them (``MarkerHandler``, every broker,
for the partitions it leads) and the coordinator side that sends them (``MarkerSender``:
to each partition's leader, this broker's own handler without a network hop).

A marker is appended like an acks=all produce: the handler answers a partition once the
high watermark passed the marker (or with the error), so a coordinator that completes a
transaction after every marker was answered never loses one to a leader failover.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable

import grpc

from brokers.metadata.image import MetadataImage
from brokers.net.peers import PeerCalls
from spark_log import errors
from spark_log.errors import (
    BrokerNotAvailableError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderError,
    SparkLogError,
    StorageError,
)
from spark_log.proto import transactions_pb2 as pb

from .model import Participant, TopicPartition

__all__ = ["MarkerHandler", "MarkerSender"]

log = logging.getLogger(__name__)



class MarkerHandler:
    """WriteTxnMarkers for the partitions this broker leads."""

    def __init__(self, get_partition: Callable[[str, int], object], wake: Callable[[], None]) -> None:
        self._get = get_partition
        self._wake = wake
        self._lock = threading.Lock()
        self._written = {True: 0, False: 0}

    def written(self) -> tuple[int, int]:
        """Metrics: ``(commit markers, abort markers)`` this broker wrote and saw replicated."""
        with self._lock:
            return self._written[True], self._written[False]

    def write(self, request: pb.WriteTxnMarkersRequest) -> pb.WriteTxnMarkersResponse:
        response = pb.WriteTxnMarkersResponse()
        timeout_ms = request.timeout_ms if request.timeout_ms > 0 else 10_000
        waiting = []
        for tp in request.partitions:
            result = response.results.add(topic=tp.topic, partition=tp.partition)
            try:
                partition = self._get(tp.topic, tp.partition)
                outcome = partition.append_marker(  # type: ignore[attr-defined]
                    producer_id=request.producer_id, producer_epoch=request.producer_epoch, commit=request.commit,
                    coordinator_epoch=request.coordinator_epoch, notify=False)
                waiting.append((result, partition, outcome))
            except SparkLogError as exc:
                result.error_code, result.error_message = int(exc.code), exc.message
            except Exception as exc:  # noqa: BLE001 - one partition's failure must not fail the others
                log.exception("writing a marker to %s-%d failed", tp.topic, tp.partition)
                result.error_code, result.error_message = int(StorageError.code), str(exc)
        if waiting:
            self._wake()
        for result, partition, outcome in waiting:
            try:
                if not partition.wait_for_high_watermark(outcome.last_offset, timeout_ms,  # type: ignore[attr-defined]
                                                         leader_epoch=outcome.leader_epoch):
                    raise NotEnoughReplicasAfterAppendError(
                        f"{result.topic}-{result.partition}: marker at {outcome.base_offset} not replicated in time")
                with self._lock:
                    self._written[request.commit] += 1
            except SparkLogError as exc:
                result.error_code, result.error_message = int(exc.code), exc.message
        return response


class MarkerSender:
    """Sends a participant's markers to the leaders of its partitions; answers the
    partitions that are done (the caller retries the rest)."""

    def __init__(self, *, broker_id: int, image: Callable[[], MetadataImage], local: MarkerHandler,
                 peers: PeerCalls, timeout_ms: int = 10_000) -> None:
        self.broker_id = broker_id
        self._image = image
        self._local = local
        self._peers = peers
        self._timeout_ms = timeout_ms

    def send(self, participant: Participant, commit: bool, coordinator_epoch: int,
             partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Write the markers (epoch ``participant.epoch + 1``); returns the partitions written
        (a deleted topic's partitions count as written: nothing there to mark)."""
        image = self._image()
        by_leader: dict[int, list[TopicPartition]] = {}
        done: set[TopicPartition] = set()
        for topic, index in partitions:
            info = image.topics.get(topic)
            part = info.partitions.get(index) if info is not None else None
            if part is None:
                done.add((topic, index))  # deleted: no marker needed
                continue
            if part.leader is None:
                continue
            by_leader.setdefault(part.leader, []).append((topic, index))
        for leader, tps in by_leader.items():
            request = pb.WriteTxnMarkersRequest(
                producer_id=participant.producer_id, producer_epoch=participant.epoch + 1, commit=commit,
                coordinator_epoch=coordinator_epoch, timeout_ms=self._timeout_ms,
                partitions=[pb.TopicPartition(topic=t, partition=p) for t, p in tps])
            try:
                if leader == self.broker_id:
                    response = self._local.write(request)
                else:
                    address = image.broker_address(leader)
                    if address is None:
                        continue
                    call = self._peers.unary(address, "/spark_log.transactions.v1.TxnMarkers/WriteTxnMarkers",
                                             pb.WriteTxnMarkersRequest, pb.WriteTxnMarkersResponse)
                    response = call(request, timeout=self._timeout_ms / 1000 + 5)
            except grpc.RpcError as exc:
                error = errors.from_rpc_error(exc)
                log.info("markers to broker %d not written yet: %s", leader, error)
                continue
            for result in response.results:
                if result.error_code == 0:
                    done.add((result.topic, result.partition))
                elif result.error_code not in (NotLeaderError.code, BrokerNotAvailableError.code):
                    log.info("marker for %s-%d not written yet: %s", result.topic, result.partition,
                             result.error_message)
        return done
