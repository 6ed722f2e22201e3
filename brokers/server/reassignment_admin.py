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

from collections.abc import Callable

from brokers.controller.client import ControllerClient
from brokers.metadata.image import MetadataImage, PartitionInfo
from spark_log.errors import RequestTimeoutError, UnknownTopicOrPartitionError
from spark_log.proto import broker_pb2 as pb

__all__ = ["ReassignmentAdmin"]

WaitFor = Callable[[Callable[[MetadataImage], bool], float], MetadataImage]


def _reassignment(topic: str, index: int, info: PartitionInfo) -> pb.PartitionReassignment:
    return pb.PartitionReassignment(topic=topic, partition=index, replicas=list(info.replicas),
                                    adding_replicas=list(info.adding_replicas),
                                    removing_replicas=list(info.removing_replicas))


class ReassignmentAdmin:
    def __init__(self, *, controller: ControllerClient, image: Callable[[], MetadataImage], wait_for: WaitFor,
                 wait_s: float = 10.0) -> None:
        self.controller = controller
        self.image = image
        self.wait_for = wait_for
        self.wait_s = wait_s

    def _await(self, predicate: Callable[[MetadataImage], bool]) -> None:
        try:
            self.wait_for(predicate, self.wait_s)
        except RequestTimeoutError:
            pass  # committed; this broker is just behind

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
