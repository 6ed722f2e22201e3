"""The produce path: validate each partition entry, then append it as leader.

Validation of an entry's bytes, before anything is written (bad input changes nothing):

1. whole frames with good magic, version, lengths and CRC-32C   -> ``CorruptRecordError``
2. no frame larger than the topic's ``max.message.bytes``        -> ``RecordTooLargeError``
3. producers may not write control frames (transactions later)   -> ``InvalidRequestError``
4. each frame's schema id is one of the topic's schema versions  -> ``SchemaMismatchError``
5. each frame's body is an Arrow record batch of that schema with
   the header's record count                                     -> ``CorruptRecordError``

Then ``Partition.append`` decides idempotence and appends; acks=all is refused up front
(``NotEnoughReplicasError``, nothing appended) while the ISR is below
``min.insync.replicas``, and waits for the high
watermark (``timeout_ms``; ``NotEnoughReplicasError`` if it does not get there).  Every
entry is answered independently in the response, in request order; entries are processed
in request order, so a producer's frames for one partition keep their order.

acks=all appends *every* entry of the request before waiting for any of them to replicate
(one deadline for the request), and wakes the long polls (followers, consumers) once, after
the last append, so followers fetch the request's frames together and the request costs
one replication round trip, not one per entry.  A wait fails with
``NotLeaderError`` if this broker stopped leading in the epoch the entry was appended in.
"""
from __future__ import annotations

import logging
import time

import pyarrow as pa
import pyarrow.ipc as ipc

from brokers.metadata.image import TopicImage
from spark_log.errors import (
    CorruptRecordError,
    FencedEpochError,
    InvalidRequestError,
    NotLeaderError,
    UnknownTopicOrPartitionError,
    NotEnoughReplicasError,
    RecordTooLargeError,
    SchemaMismatchError,
    SparkLogError,
    StorageError,
)
from spark_log.frame import ATTR_CONTROL, HEADER_SIZE, FrameHeader, iter_frames
from spark_log.proto import broker_pb2 as pb

from brokers.replica.manager import check_min_insync

from .errors import to_pb
from .partition import AppendOutcome, Partition
from .partition_manager import PartitionManager

__all__ = ["ProduceHandler", "validate_frames"]

log = logging.getLogger(__name__)

_MAX_GAP_WAIT_S = 10.0


def validate_frames(data: memoryview, topic: TopicImage) -> list[FrameHeader]:
    """Check an entry's frames against ``topic`` (rules 1-5 of the module docstring)."""
    if not len(data):
        raise CorruptRecordError("empty records: an entry must hold at least one frame")
    headers: list[FrameHeader] = []
    limit = topic.config.max_message_bytes
    for position, header in iter_frames(data, verify=True):
        if header.frame_length > limit:
            raise RecordTooLargeError(
                f"frame at byte {position} is {header.frame_length} bytes; topic {topic.name!r} allows "
                f"max.message.bytes={limit}")
        if header.attributes & ATTR_CONTROL:
            raise InvalidRequestError("producers may not write control frames")
        schema = topic.schema_by_id(header.schema_id)
        if schema is None:
            known = ", ".join(str(v.schema_id) for v in topic.schemas) or "none"
            raise SchemaMismatchError(
                f"frame at byte {position} has schema id {header.schema_id}, which is not a schema of topic "
                f"{topic.name!r} (its schema ids: {known})")
        body = pa.py_buffer(data[position + HEADER_SIZE: position + header.frame_length])
        try:
            batch = ipc.read_record_batch(body, schema)
            batch.validate()
        except (pa.ArrowInvalid, pa.ArrowIOError, pa.ArrowNotImplementedError, OSError) as exc:
            raise CorruptRecordError(
                f"frame at byte {position} does not hold an Arrow batch of schema {header.schema_id}: {exc}") from None
        if batch.num_rows != header.record_count:
            raise CorruptRecordError(
                f"frame at byte {position} claims {header.record_count} records but holds {batch.num_rows}")
        headers.append(header)
    return headers


class ProduceHandler:
    """Answers Produce requests for the partitions this broker leads."""

    def __init__(self, manager: PartitionManager) -> None:
        self.manager = manager

    def handle(self, request: pb.ProduceRequest) -> pb.ProduceResponse:
        if request.acks not in (-1, 0, 1):
            raise InvalidRequestError(f"acks must be -1 (all), 0 or 1, got {request.acks}")
        if request.transactional_id:
            raise InvalidRequestError("transactions are not supported yet")
        timeout_s = (request.timeout_ms if request.timeout_ms > 0 else 30_000) / 1000
        deadline = time.monotonic() + timeout_s
        response = pb.ProduceResponse()
        replicating = []  # acks=all: (entry, partition, outcome, result), waited for once all are appended
        appended = False
        for entry in request.partitions:
            result = response.partitions.add(topic=entry.topic, partition=entry.partition, base_offset=-1,
                                             last_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
                                             high_watermark=-1)
            try:
                partition, outcome = self._append(entry, request.acks, timeout_s, result)
            except SparkLogError as exc:
                result.error.CopyFrom(to_pb(exc))
            except Exception as exc:  # noqa: BLE001 - one partition's failure must not fail the others
                log.exception("produce to %s-%d failed", entry.topic, entry.partition)
                result.error.CopyFrom(to_pb(StorageError(f"unexpected broker error: {exc}")))
            else:
                appended = appended or not outcome.duplicate
                if request.acks == -1:
                    replicating.append((entry, partition, outcome, result))
        if appended:
            self.manager.wake_all()  # one wake-up for the whole request (appends pass notify=False)
        for entry, partition, outcome, result in replicating:
            try:
                if not partition.wait_for_high_watermark(outcome.last_offset, max(0.0, deadline - time.monotonic()),
                                                         leader_epoch=outcome.leader_epoch):
                    raise NotEnoughReplicasError(
                        f"{entry.topic}-{entry.partition}: offsets {outcome.base_offset}..{outcome.last_offset} were "
                        f"appended but not replicated within {timeout_s:.1f}s")
            except SparkLogError as exc:
                result.error.CopyFrom(to_pb(exc))
        return response

    def _append(self, entry: pb.PartitionRecords, acks: int, timeout_s: float,
                result: pb.PartitionProduceResult) -> tuple[Partition, AppendOutcome]:
        """Validate and append one entry (acks=all: after the min.insync.replicas check);
        the caller waits for replication."""
        partition = self.manager.get(entry.topic, entry.partition)
        if entry.current_leader_epoch >= 0 and entry.current_leader_epoch != partition.leader_epoch:
            if entry.current_leader_epoch < partition.leader_epoch:
                raise FencedEpochError(f"leader epoch {entry.current_leader_epoch} is stale; current is "
                                       f"{partition.leader_epoch}")
            raise NotLeaderError(f"this broker has not seen leader epoch {entry.current_leader_epoch} yet")
        topic = self.manager.image.topics.get(entry.topic)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {entry.topic!r}")
        data = memoryview(entry.records)
        headers = validate_frames(data, topic)
        if acks == -1:
            check_min_insync(partition)
        outcome = partition.append(data, headers, gap_timeout_s=min(timeout_s, _MAX_GAP_WAIT_S), notify=False)
        result.base_offset = outcome.base_offset
        result.last_offset = outcome.last_offset
        result.duplicate = outcome.duplicate
        result.log_start_offset = outcome.log_start_offset
        result.high_watermark = outcome.high_watermark
        return partition, outcome
