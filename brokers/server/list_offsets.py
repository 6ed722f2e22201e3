"""ListOffsets: earliest (a tiered topic: the Delta tier's start, as KIP-405), latest (the high watermark; under ``READ_COMMITTED`` the last
stable offset) or the first offset at a timestamp.

By timestamp the answer is exact per record for topics whose records carry their own
timestamps (bytes topics: the ``timestamp`` column): the log finds the first frame whose
max timestamp is >= the target, and this module scans that frame's column for the first
record that is.  Typed topics have one timestamp per frame, and so do ``LogAppendTime``
frames (the header's append time; the column keeps the producer's CreateTime), so the
frame's first offset is the answer.  When no record is that recent the answer is the high
watermark (the offset the next record will get), with ``timestamp`` -1.  A tiered topic's
Delta tier is searched first (KIP-405; ``tier_offsets.TierTimestamps``): its records are
below the local log's, so a record it holds at or after the time is the answer.

Leader epochs (KIP-320): a partition's ``current_leader_epoch`` >= 0 must equal this
replica's leader epoch (``brokers.partition.core.check_client_leader_epoch``): older is
``FencedLeaderEpochError``, newer ``UnknownLeaderEpochError`` (this broker is behind, e.g. a
deposed leader cut off from the controller whose image still says it leads), both
retriable for the client; -1 is not checked.  Every answer carries the replica's
``leader_epoch``.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from brokers.partition import Partition
from brokers.partition.core import check_client_leader_epoch
from spark_log.errors import InvalidRequestError, SparkLogError
from spark_log.frame import ATTR_LOG_APPEND_TIME, decode_batch, iter_frames, record_offsets
from spark_log.proto import broker_pb2 as pb

from .errors import to_pb
from .partition_manager import PartitionManager
from .tier_offsets import TierTimestamps

__all__ = ["ListOffsetsHandler", "EARLIEST", "LATEST"]

EARLIEST = -2
LATEST = -1


class ListOffsetsHandler:
    def __init__(self, manager: PartitionManager, tier: TierTimestamps | None = None) -> None:
        self.manager = manager
        self.tier = tier  # set by the broker once its tier location is known: searched by timestamp first

    def handle(self, request: pb.ListOffsetsRequest) -> pb.ListOffsetsResponse:
        response = pb.ListOffsetsResponse()
        for wanted in request.partitions:
            result = response.partitions.add(topic=wanted.topic, partition=wanted.partition, offset=-1, timestamp=-1,
                                             leader_epoch=-1)
            try:
                partition = self.manager.get(wanted.topic, wanted.partition)
                result.leader_epoch = partition.leader_epoch
                check_client_leader_epoch(f"{wanted.topic}-{wanted.partition}", wanted.current_leader_epoch,
                                          result.leader_epoch)
                result.offset, result.timestamp = self._offset(partition, wanted.timestamp,
                                                               request.isolation_level == pb.READ_COMMITTED)
            except SparkLogError as exc:
                result.error.CopyFrom(to_pb(exc))
        return response

    def _offset(self, partition: Partition, spec: int, committed: bool = False) -> tuple[int, int]:
        offsets = partition.listable_offsets()  # OffsetNotAvailableError while a new leader catches up
        start = offsets.log_start_offset
        hw = offsets.last_stable_offset if committed else offsets.high_watermark
        if spec == EARLIEST:
            return self._earliest(partition, start), -1
        if spec == LATEST:
            return hw, -1
        if spec < 0:
            raise InvalidRequestError(f"timestamp must be -2 (earliest), -1 (latest) or >= 0, got {spec}")
        if self.tier is not None and partition.config.remote_storage_enable:
            tiered = self.tier.first_at_or_after(partition, spec, hw)   # KIP-405: the tier's records first
            if tiered is not None:
                return tiered
        found = partition.offset_for_timestamp(spec)
        if found is None or found >= hw:
            return hw, -1
        return self._refine(partition, max(found, start), spec, hw)

    @staticmethod
    def _earliest(partition: Partition, local_start: int) -> int:
        """KIP-405's earliest: the tier's start when the Delta tier reaches the local log
        (a union read then starts there); else the local log start."""
        if not partition.config.remote_storage_enable:
            return local_start
        tier = partition.tier_status()
        if tier.tier_start < tier.tiered_end and tier.tiered_end >= local_start:
            return min(tier.tier_start, local_start)
        return local_start

    def _refine(self, partition: Partition, frame_offset: int, target: int, hw: int) -> tuple[int, int]:
        """The first record at or after ``frame_offset`` (a frame whose max timestamp is >=
        ``target``) whose timestamp is >= ``target``; frames without records (compaction
        emptied them) are passed over."""
        topic = self.manager.image.topics.get(partition.topic)
        offset = frame_offset
        while offset < hw:
            read = partition.read(offset, max_bytes=1 << 20, max_offset=hw).result
            if not read.data:
                break
            for position, header in iter_frames(read.data, verify=False):
                if header.next_offset <= offset or not header.record_count or header.is_control:
                    continue
                schema = topic.schema_by_id(header.schema_id) if topic is not None else None
                numbers = record_offsets(read.data, header, position)
                if schema is None or "timestamp" not in schema.names or header.attributes & ATTR_LOG_APPEND_TIME:
                    # one timestamp per frame: a typed topic's, or a LogAppendTime frame's append
                    # time (its records' column keeps the producer's CreateTime)
                    if header.max_timestamp >= target:
                        return int(numbers[0]), header.first_timestamp
                    continue
                batch = decode_batch(memoryview(read.data)[position: position + header.frame_length], schema)
                stamps = batch.column("timestamp").cast(pa.int64()).to_numpy(zero_copy_only=False)
                stamps = np.where(np.isnan(stamps.astype(np.float64)), -1, stamps).astype(np.int64)
                hits = np.flatnonzero((stamps >= target) & (numbers >= offset))
                if hits.size:
                    index = int(hits[0])
                    return int(numbers[index]), int(stamps[index])
            if read.next_offset <= offset:
                break
            offset = read.next_offset
        return hw, -1
