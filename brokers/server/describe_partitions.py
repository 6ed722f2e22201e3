"""DescribePartitions: the leader's live replication state of the partitions it leads.

For each requested partition (a topic with no partitions listed means all of them) the
answer is built from the leader's own state, read under the partition's lock in one go:

- leader epoch, partition epoch, replicas, the ISR as this leader last applied it and any
  ISR expansion in flight (``pending_isr``);
- log start offset, high watermark, last stable offset (``Partition``'s, as Fetch answers)
  and the leader's log end offset;
- per replica (the leader included) its log end offset as the leader knows it from that
  follower's last fetch (-1 when it has not fetched in this leader epoch) and how long ago it
  was last caught up (-1 unknown).

Errors are per partition, so one bad partition does not fail the others: a partition this
broker does not lead gets ``NOT_LEADER`` with the leader's address when the image knows it
(the client refreshes its metadata and asks the right broker); an unknown topic or partition
gets ``UNKNOWN_TOPIC_OR_PARTITION``.  A request that names no topic, or a partition
number < 0, is wrong as a whole: ``InvalidRequestError`` (nothing is read).  Read only: the
handler never changes a partition.
"""
from __future__ import annotations

import logging

from spark_log.errors import InvalidRequestError, NotLeaderError, SparkLogError, StorageError, UnknownTopicOrPartitionError
from spark_log.proto import broker_pb2 as pb

from .errors import to_pb
from .partition_manager import PartitionManager

__all__ = ["DescribePartitionsHandler"]

log = logging.getLogger(__name__)


class DescribePartitionsHandler:
    """Answers ``Broker.DescribePartitions`` (see the module docstring).  Thread-safe."""

    def __init__(self, manager: PartitionManager) -> None:
        self.manager = manager

    def handle(self, request: pb.DescribePartitionsRequest) -> pb.DescribePartitionsResponse:
        wanted = self._expand(request)
        response = pb.DescribePartitionsResponse()
        for topic, index in wanted:
            state = response.partitions.add(topic=topic, partition=index, leader_id=-1, leader_epoch=-1,
                                            partition_epoch=-1, log_start_offset=-1, high_watermark=-1,
                                            last_stable_offset=-1, log_end_offset=-1)
            try:
                self._describe(topic, index, state)
            except SparkLogError as exc:
                self._clear(state)
                state.error.CopyFrom(to_pb(exc))
            except Exception as exc:  # noqa: BLE001 - one partition's failure must not fail the others
                log.exception("describe of %s-%d failed", topic, index)
                self._clear(state)
                state.error.CopyFrom(to_pb(StorageError(f"describe failed on the broker: {exc}")))
        return response

    def _expand(self, request: pb.DescribePartitionsRequest) -> list[tuple[str, int]]:
        """The ``(topic, partition)`` pairs asked for, in request order, without repeats."""
        if not request.topics:
            raise InvalidRequestError("DescribePartitions needs at least one topic")
        image = self.manager.image
        out: dict[tuple[str, int], None] = {}
        for entry in request.topics:
            if not entry.topic:
                raise InvalidRequestError("DescribePartitions: a topic name is empty")
            bad = [p for p in entry.partitions if p < 0]
            if bad:
                raise InvalidRequestError(f"DescribePartitions: partition numbers must be >= 0, got {bad[0]}")
            if entry.partitions:
                indexes = list(entry.partitions)
            else:
                topic = image.topics.get(entry.topic)
                # an unknown topic still gets one answer (partition 0) carrying the error
                indexes = sorted(topic.partitions) if topic is not None else [0]
            for index in indexes:
                out[(entry.topic, int(index))] = None
        return list(out)

    def _describe(self, topic: str, index: int, state: pb.PartitionState) -> None:
        partition = self.manager.get(topic, index)   # NotLeaderError / UnknownTopicOrPartitionError
        replication = partition.replication_view()
        view, offsets = replication.replica, replication.offsets
        if not view.is_leader:
            info = self.manager.image.topics.get(topic)
            leader = info.partitions[index].leader if info is not None and index in info.partitions else None
            raise NotLeaderError(f"broker {self.manager.broker_id} no longer leads {topic}-{index}",
                                 leader_address=self.manager.image.broker_address(leader),
                                 leader_id=leader if leader is not None else -1)
        if partition.topic_id != _topic_id(self.manager, topic):
            raise UnknownTopicOrPartitionError(f"{topic}-{index} was re-created; ask again")
        state.leader_id = self.manager.broker_id
        state.leader_epoch = view.leader_epoch
        state.partition_epoch = view.partition_epoch
        state.replicas.extend(view.replicas)
        state.isr.extend(view.isr)
        state.pending_isr.extend(view.pending_isr)
        state.log_start_offset = offsets.log_start_offset
        state.high_watermark = offsets.high_watermark
        state.last_stable_offset = offsets.last_stable_offset
        state.log_end_offset = view.log_end_offsets.get(self.manager.broker_id, -1)
        state.log_size_bytes = partition.log_size_bytes()
        for replica in view.replicas:
            state.replicas_progress.add(broker_id=replica, log_end_offset=view.log_end_offsets.get(replica, -1),
                                        caught_up_ms_ago=view.caught_up_ms_ago.get(replica, -1))

    @staticmethod
    def _clear(state: pb.PartitionState) -> None:
        """Back to the neutral answer: an error carries no half-filled state."""
        topic, index = state.topic, state.partition
        state.Clear()
        state.topic, state.partition = topic, index
        state.leader_id = state.leader_epoch = state.partition_epoch = -1
        state.log_start_offset = state.high_watermark = state.last_stable_offset = state.log_end_offset = -1
        state.log_size_bytes = -1


def _topic_id(manager: PartitionManager, topic: str) -> str | None:
    info = manager.image.topics.get(topic)
    return info.topic_id if info is not None else None
