"""gRPC transport for ``RaftNode``: one unary ``RaftService.Call`` per Raft message.

A request message (vote, fetch, fetch-snapshot) gets its answer in the call's reply, so
observers, whose addresses nobody knows, are answered on their own calls, and a fetch
to a caught-up leader is a long poll (the leader holds it up to one heartbeat).
Messages with no caller waiting (BeginQuorumEpoch, answers whose caller gave up) are
sent as new calls to the destination voter's address.

``transport_filter(from_id, to_id) -> bool`` decides whether a message may travel; it is
checked when sending, when a call arrives and when replying, so a filter in one process
is enough to cut a link both ways (fault injection: network partitions in tests).
Without an explicit filter, the tests' fault file (``brokers.net.faults``, env
``SPARK_LOG_REPLICA_FAULTS``; ``isolated``/``cut`` keys) is the filter; with neither,
every message travels.
Thread-safety: ``Peers.send`` is safe from any thread; reply callbacks run on gRPC
threads and must only enqueue.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Mapping, Protocol

import grpc

from brokers.net import faults as link_faults
from brokers.net.channels import PEER_CHANNEL_OPTIONS, PLAINTEXT, Channels
from spark_log.proto import raft_pb2 as pb
from spark_log.proto import raft_pb2_grpc as pb_grpc

from .messages import Message
from .wire import from_proto, to_proto

__all__ = ["Peers", "RaftServicer", "add_raft_service"]

log = logging.getLogger(__name__)


Filter = Callable[[int, int], bool]


class RaftStub(Protocol):
    """What this module uses of the generated ``RaftServiceStub``."""

    Call: grpc.UnaryUnaryMultiCallable[pb.RaftMessage, pb.RaftReply]


# The generated gRPC module (spark_log/proto/raft_pb2_grpc.py) has no annotations; these
# names give its stub constructor and its registration function the types relied on here.
_new_stub: Callable[[grpc.Channel], RaftStub] = pb_grpc.RaftServiceStub
_add_servicer: Callable[[pb_grpc.RaftServiceServicer, grpc.Server], None] = pb_grpc.add_RaftServiceServicer_to_server


def add_raft_service(servicer: "RaftServicer", server: grpc.Server) -> None:
    """Register ``servicer`` as the ``RaftService`` of ``server`` (before it starts)."""
    _add_servicer(servicer, server)


class Peers:
    """Channels to the voters, opened lazily."""

    def __init__(self, node_id: int, addresses: Mapping[int, str], transport_filter: Filter | None,
                 channels: Channels = PLAINTEXT) -> None:
        self.node_id = node_id
        self._channels_factory = channels  # the node's security (brokers.net.channels)
        self.addresses = dict(addresses)
        self.allowed: Filter = transport_filter or link_faults.link_filter(node_id) or (lambda _a, _b: True)
        self._lock = threading.Lock()
        self._stubs: dict[int, RaftStub] = {}
        self._channels: list[grpc.Channel] = []
        self._closed = False

    def _stub(self, node: int) -> RaftStub | None:
        with self._lock:
            if self._closed:
                return None
            stub = self._stubs.get(node)
            if stub is None:
                channel = self._channels_factory.open(self.addresses[node], PEER_CHANNEL_OPTIONS)
                self._channels.append(channel)
                stub = self._stubs[node] = _new_stub(channel)
            return stub

    def send(self, message: Message, timeout_s: float, on_reply: Callable[[Message], None]) -> None:
        """Send ``message`` without blocking; ``on_reply`` gets the answer, if any."""
        if message.dst not in self.addresses or not self.allowed(self.node_id, message.dst):
            return
        stub = self._stub(message.dst)
        if stub is None:
            return
        try:
            future = stub.Call.future(to_proto(message), timeout=timeout_s)
        except (ValueError, RuntimeError):  # channel closed while stopping
            return

        def done(f: grpc.Future[pb.RaftReply]) -> None:
            try:
                reply = f.result()
            except grpc.RpcError as exc:
                log.debug("raft %d -> %d: %s", self.node_id, message.dst, exc.code())
                return
            except Exception:  # noqa: BLE001 - cancelled at shutdown
                return
            for raw in reply.messages:
                answer = from_proto(raw)
                if self.allowed(answer.src, self.node_id):
                    on_reply(answer)

        future.add_done_callback(done)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels, self._channels, self._stubs = self._channels, [], {}
        for channel in channels:
            channel.close()


class RaftServicer(pb_grpc.RaftServiceServicer):
    """Hands each incoming message to ``handle(message) -> answer | None``."""

    def __init__(self, node_id: int, handle: Callable[[Message], Message | None], transport_filter: Filter | None) -> None:
        self.node_id = node_id
        self.handle = handle
        self.allowed: Filter = transport_filter or link_faults.link_filter(node_id) or (lambda _a, _b: True)

    def Call(self, request: pb.RaftMessage, context: grpc.ServicerContext) -> pb.RaftReply:  # noqa: N802
        try:
            message = from_proto(request)
        except Exception as exc:  # noqa: BLE001 - malformed input from the wire
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad Raft message: {exc}")
        if message.dst != self.node_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"message for node {message.dst} sent to {self.node_id}")
        if not self.allowed(message.src, self.node_id):
            context.abort(grpc.StatusCode.UNAVAILABLE, "link cut by transport filter")
        answer = self.handle(message)
        reply = pb.RaftReply()
        if answer is not None and self.allowed(self.node_id, message.src):
            reply.messages.append(to_proto(answer))
        return reply
