"""Typed errors into the per-partition ``Error`` message of broker responses."""
from __future__ import annotations

from spark_log.errors import NotControllerError, NotLeaderError, SparkLogError
from spark_log.proto import broker_pb2 as pb

__all__ = ["to_pb"]


def to_pb(error: SparkLogError) -> pb.Error:
    """The wire form of ``error``: code, message, and the leader hint of NOT_LEADER / NOT_CONTROLLER."""
    message = pb.Error(code=int(error.code), message=error.message, leader_id=-1)
    if isinstance(error, (NotLeaderError, NotControllerError)):
        message.leader_address = error.leader_address or ""
        leader_id = error.details.get("leader_id")
        if leader_id is not None:
            message.leader_id = int(leader_id)
    return message
