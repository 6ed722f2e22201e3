"""Admin requests for partition reassignment and preferred-leader election.

``AlterPartitionReassignments`` and ``ElectLeaders`` are forwarded to the active
controller through ``ControllerClient`` (which follows NOT_CONTROLLER), as
``AdminHandler`` forwards topic changes; once the controller has committed the change,
this broker waits (up to ``wait_s``) until its own image shows it, so that a describe or
produce sent here right after the answer sees it.  ``ListPartitionReassignments`` is
answered from this broker's image (pending reassignments only).

Errors are the controller's typed errors, passed through unchanged
(``UnknownTopicOrPartitionError``, ``InvalidRequestError`` for duplicate or unknown
broker ids, ...).  Thread-safety: called from the server's worker threads; stateless.
"""
from __future__ import annotations

from brokers.metadata.image import PartitionInfo
from spark_log.errors import UnknownTopicOrPartitionError
from spark_log.proto import broker_pb2 as pb

from .admin import AdminHandler

__all__ = ["ReassignmentAdmin"]


def _reassignment(topic: str, index: int, info: PartitionInfo) -> pb.PartitionReassignment:
    return pb.PartitionReassignment(topic=topic, partition=index, replicas=list(info.replicas),
                                    adding_replicas=list(info.adding_replicas),
                                    removing_replicas=list(info.removing_replicas))


class ReassignmentAdmin:
    """Shares the ``AdminHandler``'s controller client, image and wait for the change."""

    def __init__(self, handler: AdminHandler) -> None:
        self.controller = handler.controller
        self.image = handler.image
        self._await = handler._await

    def alter(self, request: pb.AlterPartitionReassignmentsRequest) -> pb.AlterPartitionReassignmentsResponse:
        info = self.controller.alter_partition_reassignment(request.topic, request.partition,
                                                            list(request.target_replicas))
        self._await(lambda img: (p := img.partition(request.topic, request.partition)) is not None
                    and p.partition_epoch >= info.partition_epoch)
        return pb.AlterPartitionReassignmentsResponse(partition=_reassignment(request.topic, request.partition, info))

    def list(self, request: pb.ListPartitionReassignmentsRequest) -> pb.ListPartitionReassignmentsResponse:
        image = self.image()
        if request.topic and request.topic not in image.topics:
            raise UnknownTopicOrPartitionError(f"unknown topic {request.topic!r}")
        return pb.ListPartitionReassignmentsResponse(reassignments=[
            _reassignment(name, index, info) for name, index, info in image.iter_partitions()
            if info.reassigning and (not request.topic or name == request.topic)])

    def elect(self, request: pb.ElectLeadersRequest) -> pb.ElectLeadersResponse:
        wanted = [(p.topic, p.partition) for p in request.partitions] or None
        results = self.controller.elect_leaders(wanted)
        moved = {(r.topic, r.partition): r.leader for r in results if r.reason is None}
        self._await(lambda img: all((p := img.partition(t, i)) is not None and p.leader == leader
                                    for (t, i), leader in moved.items()))
        return pb.ElectLeadersResponse(results=[
            pb.ElectionResult(topic=r.topic, partition=r.partition,
                              preferred=-1 if r.preferred is None else r.preferred,
                              leader=-1 if r.leader is None else r.leader, reason=r.reason or "")
            for r in results])
