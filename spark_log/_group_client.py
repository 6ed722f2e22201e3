"""Calls to a group's coordinator: finding it, caching it, retrying while it moves.

``GroupRpc(cluster)`` asks any broker ``FindCoordinator(group)`` (the leader of the group's
``__consumer_offsets`` partition; the first request of a cluster creates that topic),
keeps the answer, and sends the group's requests there.  ``call`` retries what retrying
can fix (``NotCoordinatorError``, ``CoordinatorNotAvailableError``,
``CoordinatorLoadInProgressError``, an unreachable or timed-out broker, a
``NotEnoughReplicasError``) until its deadline, finding the coordinator again after a
move, and an unknown topic for 2 s (the coordinator's metadata may lag a topic just
created); every other typed error is raised at once.  ``once`` makes one attempt (the
heartbeat thread retries on its own schedule).  Thread-safe.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import grpc

from . import errors
from ._client import READ_TRY_S, Cluster
from .errors import BrokerNotAvailableError, SparkLogError
from .proto import groups_pb2 as gpb
from .proto import groups_pb2_grpc as grpc_groups

__all__ = ["GroupRpc"]

_MOVED = (errors.NotCoordinatorError, errors.CoordinatorNotAvailableError, BrokerNotAvailableError,
          errors.RequestTimeoutError)
_RETRY = (*_MOVED, errors.CoordinatorLoadInProgressError, errors.NotEnoughReplicasError)
_BRIEF_S = 2.0  # UnknownTopicOrPartitionError: retried this long only


class GroupRpc:
    """Requests to group coordinators through ``cluster`` (module docstring)."""

    def __init__(self, cluster: Cluster, *, timeout_s: float = 30.0) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._coordinators: dict[str, str] = {}

    def stub(self, address: str) -> grpc_groups.GroupCoordinatorStub:
        return grpc_groups.GroupCoordinatorStub(self.cluster.channel(address))

    def coordinator(self, group_id: str, *, refresh: bool = False) -> str:
        """The address of ``group_id``'s coordinator (cached unless ``refresh``)."""
        with self._lock:
            cached = self._coordinators.get(group_id)
        if cached is not None and not refresh:
            return cached
        request = gpb.FindCoordinatorRequest(group_id=group_id)
        try_s = min(self.timeout_s, READ_TRY_S)
        answer: gpb.FindCoordinatorResponse = self.cluster.call_any(
            lambda address: self.stub(address).FindCoordinator(request, timeout=try_s), read_only=True)
        with self._lock:
            self._coordinators[group_id] = answer.address
        return str(answer.address)

    def forget(self, group_id: str) -> None:
        with self._lock:
            self._coordinators.pop(group_id, None)

    def once(self, group_id: str, method: str, request: Any, *, timeout_s: float | None = None) -> Any:
        """One attempt at the coordinator; a typed error on failure (a move forgets the
        cached coordinator so the next attempt finds it again)."""
        try:
            address = self.coordinator(group_id)
            return getattr(self.stub(address), method)(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as exc:
            error = errors.from_rpc_error(exc)
        except SparkLogError as exc:
            error = exc
        if isinstance(error, _MOVED) or error.refresh_metadata:
            self.forget(group_id)
        raise error

    def call(self, group_id: str, method: str, request: Any, *, deadline_s: float | None = None,
             timeout_s: float | None = None, sleep: Callable[[float], None] = time.sleep) -> Any:
        """``method(request)`` at the group's coordinator, retried until ``deadline_s``
        (default: the request timeout) while the error is retriable (module docstring)."""
        started = time.monotonic()
        deadline = started + (self.timeout_s if deadline_s is None else deadline_s)
        delay = 0.02
        while True:
            try:
                return self.once(group_id, method, request, timeout_s=timeout_s)
            except SparkLogError as error:
                brief = isinstance(error, errors.UnknownTopicOrPartitionError) and time.monotonic() - started < _BRIEF_S
                if not (isinstance(error, _RETRY) or brief) or time.monotonic() + delay > deadline:
                    raise
            sleep(delay)  # backoff while the coordinator moves or loads, not synchronisation
            delay = min(delay * 2, 0.5)

    def each_broker(self, method: str, request: Any) -> list[Any]:
        """``method(request)`` at every live broker (listing groups); unreachable ones are
        skipped, other errors raised."""
        self.cluster.refresh([])
        answers = []
        for address in self.cluster.addresses():
            try:
                answers.append(getattr(self.stub(address), method)(request, timeout=min(self.timeout_s, READ_TRY_S)))
            except grpc.RpcError as exc:
                error = errors.from_rpc_error(exc, address=address)
                if not isinstance(error, (BrokerNotAvailableError, errors.RequestTimeoutError)):
                    raise error from None
        return answers
