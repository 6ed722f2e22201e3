"""The ``Compaction`` service (``spark_log/proto/compaction.proto``) and the broker's cleaner.

- ``Describe``: every hosted replica of the named topics (all topics when none is named;
  ``leaders_only``: the partitions this broker leads) with its cleaned offset, dirty ratio,
  latest and applied plans, and the last clean's figures; read under each partition's lock.
- ``Compact``: for each named partition this broker leads, ask for a clean
  (``Partition.request_compaction``) and wake the cleaner.  Per-partition errors:
  ``NOT_LEADER`` (with the leader's address), ``TOPIC_NOT_COMPACTED``,
  ``UNKNOWN_TOPIC_OR_PARTITION``.  A broker whose cleaner is off (``log_cleaner_enable =
  false``) refuses ``Compact`` and ``OfferOffsetMap`` with ``InvalidRequestError`` (it would
  accept work it never does); ``Describe`` still answers.
- ``OfferOffsetMap``: a Spark job's key -> latest offset map of ``[start, end)`` (an Arrow
  IPC stream of ``key``, ``offset``), at most ``max_map_bytes``.  With ``plan`` (sent to the
  leader) the leader publishes a plan ending at ``end`` at once (``Partition.plan_with_map``:
  ``CompactionConflictError`` when the cleaned offset is no longer ``start``); without it
  (sent to every replica) the map waits for that replica's apply of the plan.  A map that
  does not match the log is refused when it is used, record by record, and the replica
  builds its own (``InvalidOffsetMapError`` in its log, nothing lost).

``BrokerCleaner`` assembles the ``CleanerPool`` (threads, I/O limit, dedupe buffer, backoff
from ``BrokerConfig``) over the hosted replicas, with each topic's ``KeySpec`` from the
metadata image.

Thread-safety: handlers may be called from any thread.
"""
from __future__ import annotations

import logging

import grpc
import pyarrow as pa
import pyarrow.ipc as ipc

from brokers.log.cleaner.offset_map import OffsetMap
from brokers.log.cleaner.plan import CompactionPlan
from brokers.log.cleaner.pool import CleanerPool
from brokers.log.cleaner.records import KeySpec
from brokers.partition import Partition
from spark_log import errors
from spark_log.clock import Clock
from spark_log.config import BrokerConfig
from spark_log.errors import InvalidOffsetMapError, InvalidRequestError, SparkLogError
from spark_log.proto import compaction_pb2 as pb

from .errors import to_pb
from .partition_manager import PartitionManager
from .wire import unary

__all__ = ["BrokerCleaner", "CompactionHandler", "CompactionServicer"]

log = logging.getLogger(__name__)



class BrokerCleaner:
    """The broker's cleaner threads over ``manager``'s replicas (module docstring)."""

    def __init__(self, manager: PartitionManager, config: BrokerConfig, clock: Clock) -> None:
        self.manager = manager
        self.enabled = config.log_cleaner_enable
        self.pool = CleanerPool(logs=manager.hosted, spec_for=self.spec_for, clock=clock,
                                threads=config.log_cleaner_threads,
                                io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
                                dedupe_buffer_bytes=config.log_cleaner_dedupe_buffer_bytes,
                                backoff_ms=config.log_cleaner_backoff_ms, name=f"cleaner-{manager.broker_id}")
        manager.compaction_listener = self.pool.wake

    def spec_for(self, topic: str) -> KeySpec | None:
        image = self.manager.image.topics.get(topic)
        if image is None:
            return None
        return KeySpec(image.kind, tuple(image.key_columns), image.config.tombstone_column, image.schema_by_id)

    def start(self) -> None:
        if self.enabled:
            self.pool.start()

    def stop(self) -> None:
        self.pool.stop()


def _plan_pb(message: pb.CompactionPlan, offset: int, plan: CompactionPlan | None) -> None:
    message.offset = offset
    if plan is not None:
        message.end_offset = plan.end_offset
        message.tombstone_horizon_ms = plan.tombstone_horizon_ms
        message.producer_horizon_ms = plan.producer_horizon_ms


class CompactionHandler:
    """Answers the ``Compaction`` service (module docstring)."""

    def __init__(self, manager: PartitionManager, cleaner: BrokerCleaner, *, max_map_bytes: int) -> None:
        self.manager = manager
        self.cleaner = cleaner
        self.max_map_bytes = max_map_bytes

    def _fill(self, out: pb.PartitionCompaction, partition: Partition) -> None:
        status = partition.compaction_status()
        offsets = partition.offsets()
        out.broker_id = self.manager.broker_id
        out.leader = partition.is_leader
        out.cleanup_policy = partition.config.cleanup_policy
        out.cleaned_offset, out.cleanable_end = status.cleaned_offset, status.cleanable_end
        out.clean_bytes, out.dirty_bytes, out.dirty_ratio = status.clean_bytes, status.dirty_bytes, status.dirty_ratio
        _plan_pb(out.latest_plan, status.plan_offset, status.plan)
        out.applied_plan_offset, out.requested = status.applied_plan_offset, status.requested
        out.log_start_offset, out.high_watermark = offsets.log_start_offset, offsets.high_watermark
        out.log_end_offset = offsets.log_end_offset
        last = status.last
        out.records_read, out.records_kept, out.tombstones_removed = last.records_read, last.records_kept, \
            last.tombstones_removed
        out.bytes_read, out.bytes_written = last.bytes_read, last.bytes_written
        out.markers_removed = last.markers_removed

    def describe(self, request: pb.DescribeCompactionRequest) -> pb.DescribeCompactionResponse:
        wanted = set(request.topics)
        response = pb.DescribeCompactionResponse()
        for partition in sorted(self.manager.hosted(), key=lambda p: (p.topic, p.partition)):
            if (wanted and partition.topic not in wanted) or (request.leaders_only and not partition.is_leader):
                continue
            out = response.partitions.add(topic=partition.topic, partition=partition.partition)
            try:
                self._fill(out, partition)
            except SparkLogError as exc:
                out.error.CopyFrom(to_pb(exc))
        return response

    def _require_cleaner(self) -> None:
        if not self.cleaner.enabled:
            raise InvalidRequestError(f"broker {self.manager.broker_id} runs no log cleaner (log_cleaner_enable = "
                                      f"false in its broker.toml): it cannot compact")

    def compact(self, request: pb.CompactRequest) -> pb.CompactResponse:
        self._require_cleaner()
        topic = self.manager.image.topics.get(request.topic)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(f"unknown topic {request.topic!r}")
        indexes = list(request.partitions) or sorted(i for i, info in topic.partitions.items()
                                                      if info.leader == self.manager.broker_id)
        response = pb.CompactResponse()
        for index in indexes:
            out = response.partitions.add(topic=request.topic, partition=index)
            try:
                partition = self.manager.get(request.topic, index)
                partition.request_compaction()
                self._fill(out, partition)
            except SparkLogError as exc:
                out.error.CopyFrom(to_pb(exc))
        self.cleaner.pool.wake()
        return response

    def offer_map(self, request: pb.OffsetMapRequest) -> pb.OffsetMapResponse:
        self._require_cleaner()
        if len(request.offset_map) > self.max_map_bytes:
            raise InvalidRequestError(f"an offset map of {len(request.offset_map)} bytes is larger than this broker's "
                                      f"log_cleaner_dedupe_buffer_bytes ({self.max_map_bytes})")
        if not 0 <= request.start_offset < request.end_offset:
            raise InvalidRequestError(f"an offset map covers [start, end) with 0 <= start < end, got "
                                      f"[{request.start_offset}, {request.end_offset})")
        try:
            table = ipc.open_stream(pa.py_buffer(request.offset_map)).read_all()
        except (pa.ArrowInvalid, OSError) as exc:
            raise InvalidOffsetMapError(f"the offset map is not an Arrow IPC stream: {exc}") from None
        offset_map = OffsetMap.from_arrow(table, start=request.start_offset, end=request.end_offset)
        response = pb.OffsetMapResponse()
        if request.plan:
            partition = self.manager.get(request.topic, request.partition)
            at = partition.plan_with_map(request.start_offset, request.end_offset, offset_map)
            _plan_pb(response.plan, at.offset, at.plan)
        else:
            self.manager.get(request.topic, request.partition, leader=False).offer_offset_map(
                request.start_offset, request.end_offset, offset_map)
            response.plan.offset = -1
        self.cleaner.pool.wake()
        return response


class CompactionServicer:
    """The ``Compaction`` gRPC service over a ``CompactionHandler``."""

    def __init__(self, handler: CompactionHandler) -> None:
        self.handler = handler

    def rpc_handler(self) -> grpc.GenericRpcHandler:
        def ser(message: pb.DescribeCompactionResponse | pb.CompactResponse | pb.OffsetMapResponse) -> bytes:
            return message.SerializeToString()

        return grpc.method_handlers_generic_handler("spark_log.compaction.v1.Compaction", {
            "Describe": unary(self.Describe, pb.DescribeCompactionRequest, ser),
            "Compact": unary(self.Compact, pb.CompactRequest, ser),
            "OfferOffsetMap": unary(self.OfferOffsetMap, pb.OffsetMapRequest, ser),
        })

    def Describe(self, request: pb.DescribeCompactionRequest,  # noqa: N802
                 context: grpc.ServicerContext) -> pb.DescribeCompactionResponse:
        return errors.guard(context, "Describe", lambda: self.handler.describe(request))

    def Compact(self, request: pb.CompactRequest, context: grpc.ServicerContext) -> pb.CompactResponse:  # noqa: N802
        return errors.guard(context, "Compact", lambda: self.handler.compact(request))

    def OfferOffsetMap(self, request: pb.OffsetMapRequest,  # noqa: N802
                       context: grpc.ServicerContext) -> pb.OffsetMapResponse:
        return errors.guard(context, "OfferOffsetMap", lambda: self.handler.offer_map(request))
