"""The produce path: validate each partition entry once, then append it as leader.

Validation of an entry's bytes, before anything is written (bad input changes nothing), in
one pass over its frames (``validate_frames``, through ``brokers.log.append.check_frames``):

1. whole frames with good magic, version, lengths and CRC-32C   -> ``CorruptRecordError``
2. no frame larger than the topic's ``max.message.bytes``        -> ``RecordTooLargeError``
3. producers may not write control frames (markers are brokers') -> ``InvalidRequestError``
4. each frame's schema id is one of the topic's schema versions  -> ``SchemaMismatchError``
   (an id newer than every version this broker knows may be one its metadata image has not
   reached yet: a writer that just registered it learned it from a broker ahead of this one,
   so the produce waits for the image, at most ``_SCHEMA_WAIT_MS``, before refusing)
5. each frame's body is an Arrow record batch of that schema with
   the header's record count                                     -> ``CorruptRecordError``
6. a bytes topic whose ``cleanup.policy`` names ``compact`` takes
   only records with a key (as Kafka)                            -> ``MissingKeyError``
7. version-2 frames (rows with their own offsets) are compaction's
   alone                                                         -> ``InvalidRequestError``

The result is a ``CheckedFrames``, handed down to ``Partition.append_as_leader`` and the
log, which check nothing again.  The partition then decides (under its lock, in one go):
leadership and the entry's ``current_leader_epoch`` (``NotLeaderError`` /
``FencedEpochError``), acks=all against ``min.insync.replicas``
(``NotEnoughReplicasError``), and idempotence; acks=all then waits for the high watermark
(``timeout_ms``; ``NotEnoughReplicasAfterAppendError`` if it does not get there: unlike
``NotEnoughReplicasError``, which refuses before the append, the records were written and
may yet become visible).  An error after the append keeps the entry's ``base_offset`` and
``last_offset`` in its answer, so a client can tell "maybe written" from "refused".  Every entry is
answered independently in the response, in request order; entries are processed in
request order, so a producer's frames for one partition keep their order.

acks=all appends *every* entry of the request before waiting for any of them to replicate
(one deadline for the request, from the broker's injected clock), and wakes the long polls
(followers, consumers) once, after the last append, so followers fetch the request's frames
together and the request costs one replication round trip, not one per entry.  A wait fails
with ``NotLeaderError`` if this broker stopped leading in the epoch the entry was appended in.
"""
from __future__ import annotations

import logging
import threading
from typing import NamedTuple, Protocol, Sequence

import pyarrow as pa

from brokers.log.append import CheckedFrames, check_frames
from brokers.metrics.counters import BrokerCounters
from brokers.metadata.image import MetadataImage, TopicImage
from brokers.partition import AppendOutcome, Partition
from spark_log.errors import (
    CorruptRecordError,
    InvalidRequestError,
    InvalidTopicError,
    MissingKeyError,
    NotEnoughReplicasAfterAppendError,
    OutOfOrderSequenceError,
    SchemaMismatchError,
    SparkLogError,
    StorageError,
    UnknownTopicOrPartitionError,
)
from spark_log.frame import ATTR_CONTROL, DAMAGED_MESSAGE_ERRORS, FrameHeader, frame_body, iter_frames, read_message
from spark_log.proto import broker_pb2 as pb

from .coordinator_topics import COORDINATOR_TOPICS
from .errors import to_pb
from .partition_manager import PartitionManager

__all__ = ["ProduceHandler", "ProduceEntryLike", "ProduceRequestLike", "validate_frames"]

log = logging.getLogger(__name__)

# the sequence gaps of one request wait at most this long together, and at most half the
# call's timeout, so that a refusal reaches the producer before its call times out (a
# timeout tells it less)
_MAX_GAP_WAIT_MS = 10_000
_BOUND_PRODUCERS = 100_000  # transactional producers whose transactional id is remembered
_SCHEMA_WAIT_MS = 5_000   # how long a frame's schema id newer than this broker's image waits for it


def validate_frames(data: bytes | memoryview, topic: TopicImage) -> CheckedFrames:
    """Check an entry's frames against ``topic`` (rules 1-5 of the module docstring), once."""
    if not len(data):
        raise CorruptRecordError("empty records: an entry must hold at least one frame")

    needs_keys = topic.kind == "bytes" and topic.config.compact

    def producer_rules(view: memoryview, position: int, header: FrameHeader) -> None:
        if header.attributes & ATTR_CONTROL:
            raise InvalidRequestError("producers may not write control frames")
        schema = topic.schema_by_id(header.schema_id)
        if schema is None:
            known = ", ".join(str(v.schema_id) for v in topic.schemas) or "none"
            raise SchemaMismatchError(
                f"frame at byte {position} has schema id {header.schema_id}, which is not a schema of topic "
                f"{topic.name!r} (its schema ids: {known})")
        try:
            batch = read_message(pa.py_buffer(frame_body(view, header, position)), schema, header.codec)
            batch.validate()
        except (*DAMAGED_MESSAGE_ERRORS, pa.ArrowNotImplementedError) as exc:
            raise CorruptRecordError(
                f"frame at byte {position} does not hold an Arrow batch of schema {header.schema_id}: {exc}") from None
        if batch.num_rows != header.record_count:
            raise CorruptRecordError(
                f"frame at byte {position} claims {header.record_count} records but holds {batch.num_rows}")
        if needs_keys and batch.column("key").null_count:
            raise MissingKeyError(
                f"topic {topic.name!r} is compacted (cleanup.policy={topic.config.cleanup_policy}): every record "
                f"needs a key; frame at byte {position} has {batch.column('key').null_count} without one")

    return check_frames(data, max_message_bytes=topic.config.max_message_bytes, rule=producer_rules, topic=topic.name)


class ProduceEntryLike(Protocol):
    """One partition's records: gRPC's ``pb.PartitionRecords``, or the data listener's
    ``spark_log.fetch_wire.ProduceEntry`` (its records a view of the request: no copy)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def records(self) -> bytes | memoryview: ...

    @property
    def current_leader_epoch(self) -> int: ...


class ProduceRequestLike(Protocol):
    """A produce request: gRPC's ``pb.ProduceRequest`` or the data listener's
    ``spark_log.fetch_wire.ProduceView``."""

    @property
    def acks(self) -> int: ...

    @property
    def timeout_ms(self) -> int: ...

    @property
    def transactional_id(self) -> str: ...

    @property
    def partitions(self) -> Sequence[ProduceEntryLike]: ...


class _Replicating(NamedTuple):
    """An acks=all entry appended and waiting for the high watermark."""

    entry: ProduceEntryLike
    partition: Partition
    outcome: AppendOutcome
    result: pb.PartitionProduceResult


class Verifier(Protocol):
    """KIP-890: is the partition in the producer's open transaction (``TxnVerifier``)?"""

    def verify(self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int) -> None: ...


class ProduceHandler:
    """Answers Produce requests for the partitions this broker leads.  Transactional frames
    need the request's ``transactional_id``; the first transactional write of a producer
    to a partition is verified with its coordinator (``verifier``)."""

    def __init__(self, manager: PartitionManager, verifier: Verifier | None = None,
                 counters: BrokerCounters | None = None) -> None:
        self.manager = manager
        self._clock = manager.clock
        self._verifier = verifier
        self.counters = counters if counters is not None else BrokerCounters(manager.broker_id)
        # (producer id, epoch) -> the transactional id the coordinator confirmed it for
        self._bound: dict[tuple[int, int], str] = {}
        self._bound_lock = threading.Lock()

    def handle(self, request: ProduceRequestLike) -> pb.ProduceResponse:
        if request.acks not in (-1, 0, 1):
            raise InvalidRequestError(f"acks must be -1 (all), 0 or 1, got {request.acks}")
        timeout_ms = request.timeout_ms if request.timeout_ms > 0 else 30_000
        deadline_ms = self._clock.monotonic_ms() + timeout_ms
        gap_deadline_ms = deadline_ms - timeout_ms + min(timeout_ms // 2, _MAX_GAP_WAIT_MS)
        response = pb.ProduceResponse()
        replicating: list[_Replicating] = []  # acks=all: waited for once every entry is appended
        appended = False
        for entry in request.partitions:
            result = response.partitions.add(topic=entry.topic, partition=entry.partition, base_offset=-1,
                                             last_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
                                             high_watermark=-1)
            records = entry.records  # read once: each read of a protobuf bytes field is a new copy
            try:
                partition, outcome = self._append(entry, records, request.acks, timeout_ms, gap_deadline_ms, result,
                                                  request.transactional_id)
            except StorageError as exc:  # a full or failing disk: logged and counted, not only answered
                self.counters.storage_error("produce", entry.topic, entry.partition, exc)
                result.error.CopyFrom(to_pb(exc))
            except SparkLogError as exc:
                result.error.CopyFrom(to_pb(exc))
            except Exception as exc:  # noqa: BLE001 - one partition's failure must not fail the others
                log.exception("produce to %s-%d failed", entry.topic, entry.partition)
                self.counters.storage_error("produce", entry.topic, entry.partition, exc)
                result.error.CopyFrom(to_pb(StorageError(f"unexpected broker error: {exc}")))
            else:
                appended = appended or not outcome.duplicate
                if not outcome.duplicate:
                    self.counters.produced(entry.topic, outcome.last_offset - outcome.base_offset + 1,
                                           len(records))
                if request.acks == -1:
                    replicating.append(_Replicating(entry, partition, outcome, result))
        if appended:
            self.manager.wake_all()  # one wake-up for the whole request (appends pass notify=False)
        for waiting in replicating:
            outcome = waiting.outcome
            try:
                remaining_ms = max(0, deadline_ms - self._clock.monotonic_ms())
                if not waiting.partition.wait_for_high_watermark(outcome.last_offset, remaining_ms,
                                                                 leader_epoch=outcome.leader_epoch, acks_all=True):
                    raise NotEnoughReplicasAfterAppendError(
                        f"{waiting.entry.topic}-{waiting.entry.partition}: offsets {outcome.base_offset}.."
                        f"{outcome.last_offset} were appended but not replicated within {timeout_ms / 1000:.1f}s")
            except SparkLogError as exc:
                waiting.result.error.CopyFrom(to_pb(exc))
        return response

    def _newer_schema_image(self, name: str, records: bytes | memoryview, topic: TopicImage,
                            wait_ms: int) -> TopicImage | None:
        """The topic's image once it knows every schema id of ``records``' frames, when one
        of them is newer than every version ``topic`` knows (rule 4: this broker's image
        may be behind the writer's); None when none is, or after ``wait_ms`` without it."""
        try:
            wanted = {header.schema_id for _, header in iter_frames(memoryview(records), verify=False)}
        except SparkLogError:
            return None   # the frames are refused for what they are: validate_frames said why
        newest = max((v.schema_id for v in topic.schemas), default=-1)
        if not any(i > newest for i in wanted):
            return None

        def knows(image: MetadataImage) -> bool:
            found = image.topics.get(name)
            return found is not None and all(found.schema_by_id(i) is not None for i in wanted)
        image = self.manager.wait_for_image(knows, wait_ms / 1000)
        return image.topics.get(name) if image is not None else None

    def _append(self, entry: ProduceEntryLike, records: bytes | memoryview, acks: int, timeout_ms: int,
                gap_deadline_ms: int,
                result: pb.PartitionProduceResult, transactional_id: str = "") -> tuple[Partition, AppendOutcome]:
        """Validate and append one entry; the caller waits for replication (acks=all)."""
        if entry.topic in COORDINATOR_TOPICS:  # only their coordinators write them
            raise InvalidTopicError(f"{entry.topic} is internal: clients cannot produce to it")
        partition = self.manager.get(entry.topic, entry.partition)
        topic = self.manager.image.topics.get(entry.topic)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {entry.topic!r}")
        try:
            frames = validate_frames(memoryview(records), topic)
        except SchemaMismatchError:
            newer = self._newer_schema_image(entry.topic, records, topic, min(timeout_ms, _SCHEMA_WAIT_MS))
            if newer is None:
                raise
            frames = validate_frames(memoryview(records), newer)
        first = frames.headers[0]
        if first.is_transactional:
            self._verify(partition, transactional_id, first)
        try:
            outcome = partition.append_as_leader(frames, required_leader_epoch=entry.current_leader_epoch,
                                                 acks_all=acks == -1,
                                                 gap_timeout_ms=max(0, gap_deadline_ms - self._clock.monotonic_ms()),
                                                 notify=False)
        except OutOfOrderSequenceError:
            # the log start lets the producer tell whether retention took its state (KIP-360)
            result.log_start_offset = partition.offsets().log_start_offset
            raise
        result.base_offset = outcome.base_offset
        result.last_offset = outcome.last_offset
        result.duplicate = outcome.duplicate
        result.log_start_offset = outcome.log_start_offset
        result.high_watermark = outcome.high_watermark
        return partition, outcome

    def _verify(self, partition: Partition, transactional_id: str, header: FrameHeader) -> None:
        """A transactional entry: allowed when its producer's transaction is open here in
        its epoch and the coordinator confirmed that producer id and epoch belong to the
        request's transactional id, else only once the coordinator confirms the partition is
        in that transactional id's transaction (so a client cannot write into another
        transactional id's open transaction by naming its producer id)."""
        if not transactional_id:
            raise InvalidRequestError("transactional frames need the request's transactional_id")
        if header.producer_id < 0:
            raise InvalidRequestError("transactional frames need a producer id")
        producer = (header.producer_id, header.producer_epoch)
        if partition.in_transaction(*producer) and self._bound.get(producer) == transactional_id:
            return
        if self._verifier is None:
            raise InvalidRequestError("this broker has no transaction coordinator to verify the write with")
        self._verifier.verify(transactional_id, header.producer_id, header.producer_epoch, partition.topic,
                              partition.partition)
        with self._bound_lock:  # the coordinator confirmed the id is that transactional id's
            if len(self._bound) >= _BOUND_PRODUCERS:
                del self._bound[next(iter(self._bound))]  # the oldest: it is verified again if it writes
            self._bound[producer] = transactional_id
