"""The ``Tiering`` service (``spark_log/proto/tiering.proto``; contract: docs/INTERNALS.md
"tiering" and ``brokers/partition/tiering.py``).

- ``DescribeTier``: every hosted replica of the named topics (``leaders_only``: the ones this
  broker leads) with the tier range of its latest committed TIERED frame, its offsets and
  ``tierable_end``; plus the cluster's tier location as this broker resolves it.
- ``CommitTiered``: the tiering job's report, after its Delta commit is durable, that the
  tier holds ``[tier_start, tiered_end)`` of a partition.  The leader appends the TIERED
  frame and answers once the in-sync replicas have it (``NotEnoughReplicasAfterAppendError``
  after the timeout: the job reports again; the same range twice appends nothing).
  Per-request errors: ``NOT_LEADER``, ``TIERING_NOT_ENABLED``, ``TIER_OFFSET_INVALID``.

Thread-safety: handlers may be called from any thread.
"""
from __future__ import annotations

import logging

import grpc

from brokers.partition import Partition
from brokers.partition.tiered import TierStatus
from spark_log import errors
from spark_log.errors import (
    InvalidRequestError,
    NotEnoughReplicasAfterAppendError,
    SparkLogError,
    TierOffsetInvalidError,
    TierUnavailableError,
)
from spark_log.proto import tiering_pb2 as pb
from spark_log.tier import TierTable, public_options

from .errors import to_pb
from .partition_manager import PartitionManager
from .wire import unary

__all__ = ["TieringHandler", "TieringServicer"]

log = logging.getLogger(__name__)



class TieringHandler:
    def __init__(self, manager: PartitionManager, *, location: str,
                 storage_options: dict[str, str] | None = None) -> None:
        self.manager = manager
        self.location = location
        self.storage_options = dict(storage_options or {})   # never logged

    def _fill(self, out: pb.PartitionTier, status: TierStatus, topic_id: str) -> None:
        out.broker_id = self.manager.broker_id
        out.topic_id = topic_id
        out.leader = status.leader
        out.remote_storage_enable = status.remote_storage_enable
        out.tier_start, out.tiered_end = status.tier_start, status.tiered_end
        o = status.offsets
        out.log_start_offset, out.high_watermark = o.log_start_offset, o.high_watermark
        out.last_stable_offset, out.log_end_offset = o.last_stable_offset, o.log_end_offset
        out.tierable_end, out.local_bytes = status.tierable_end, status.local_bytes
        out.untiered_bytes = status.untiered_bytes

    def describe(self, request: pb.DescribeTierRequest) -> pb.DescribeTierResponse:
        wanted = set(request.topics)
        # the options without their secrets: a client brings its own credentials (spark_log.tier)
        response = pb.DescribeTierResponse(location=self.location, storage_options=public_options(self.storage_options))
        for partition in sorted(self.manager.hosted(), key=lambda p: (p.topic, p.partition)):
            if (wanted and partition.topic not in wanted) or (request.leaders_only and not partition.is_leader):
                continue
            out = response.partitions.add(topic=partition.topic, partition=partition.partition)
            try:
                self._fill(out, partition.tier_status(), partition.topic_id)
            except SparkLogError as exc:
                out.error.CopyFrom(to_pb(exc))
        return response

    def _check_table_holds(self, partition: Partition, start: int, end: int) -> None:
        """``TierOffsetInvalidError`` unless the topic's Delta table says (its application
        transactions, which the tiering job commits with the data) it holds ``[start, end)``
        of the partition: a report the table does not back would let local retention delete
        records that are in no tier."""
        if start == end or not partition.config.remote_storage_enable:
            return   # nothing claimed; record_tiered refuses an untiered topic itself
        try:
            held = TierTable(self.location, partition.topic, partition.topic_id, self.storage_options or None).range(
                partition.partition)
        except TierUnavailableError as exc:   # a table of an earlier topic of the same name
            raise TierOffsetInvalidError(str(exc)) from None
        if held.empty or not (held.start <= start and end <= held.end):
            raise TierOffsetInvalidError(
                f"{partition.topic}-{partition.partition}: the Delta table at {self.location} holds "
                f"{'nothing' if held.empty else f'[{held.start}, {held.end})'} of the partition, not "
                f"[{start}, {end}): commit the records to the table before reporting them")

    def commit(self, request: pb.CommitTieredRequest) -> pb.CommitTieredResponse:
        if request.tier_start < 0 or request.tiered_end < request.tier_start:
            raise InvalidRequestError(f"a tiered range needs 0 <= tier_start <= tiered_end, got "
                                      f"[{request.tier_start}, {request.tiered_end})")
        partition: Partition = self.manager.get(request.topic, request.partition)
        self._check_table_holds(partition, request.tier_start, request.tiered_end)
        outcome = partition.record_tiered(start=request.tier_start, end=request.tiered_end)
        if outcome is not None:
            timeout_ms = request.timeout_ms or 30_000
            if not partition.wait_for_high_watermark(outcome.last_offset, timeout_ms, leader_epoch=outcome.leader_epoch):
                raise NotEnoughReplicasAfterAppendError(
                    f"{request.topic}-{request.partition}: the tier frame at {outcome.last_offset} was not replicated "
                    f"within {timeout_ms / 1000:.1f}s; report the range again")
            log.info("%s-%d: the Delta tier holds [%d, %d) (frame at %d)", request.topic, request.partition,
                     request.tier_start, request.tiered_end, outcome.base_offset)
        response = pb.CommitTieredResponse()
        response.partition.topic, response.partition.partition = request.topic, request.partition
        self._fill(response.partition, partition.tier_status(), partition.topic_id)
        return response


class TieringServicer:
    """The ``Tiering`` gRPC service over a ``TieringHandler``."""

    def __init__(self, handler: TieringHandler) -> None:
        self.handler = handler

    def rpc_handler(self) -> grpc.GenericRpcHandler:
        def ser(message: pb.DescribeTierResponse | pb.CommitTieredResponse) -> bytes:
            return message.SerializeToString()

        return grpc.method_handlers_generic_handler("spark_log.tiering.v1.Tiering", {
            "DescribeTier": unary(self.DescribeTier, pb.DescribeTierRequest, ser),
            "CommitTiered": unary(self.CommitTiered, pb.CommitTieredRequest, ser),
        })

    def DescribeTier(self, request: pb.DescribeTierRequest,  # noqa: N802
                     context: grpc.ServicerContext) -> pb.DescribeTierResponse:
        return errors.guard(context, "DescribeTier", lambda: self.handler.describe(request))

    def CommitTiered(self, request: pb.CommitTieredRequest,  # noqa: N802
                     context: grpc.ServicerContext) -> pb.CommitTieredResponse:
        return errors.guard(context, "CommitTiered", lambda: self.handler.commit(request))
