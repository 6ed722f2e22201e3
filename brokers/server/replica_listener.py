"""The data listener's replica APIs: followers fetch from their leader over the binary
listener (issue 19), carrying the stored frames as they are, without gRPC.

Kept apart from ``data_listener.py`` (which only dispatches the two API numbers here) so
the client-facing listener and the replication path change independently.

    NODE_AUTH (9)      req: str inter-node token (``brokers.net.node_auth``)
                       resp: str principal (``Node:<id>``; the connection is then that node)
                       Only on TLS listeners of a node that has ``inter_node_secret_file``, as on
                       gRPC (the token is a bearer credential: never over plaintext).
    REPLICA_FETCH (10) req: i32 replica id, i32 max wait ms, i32 min bytes, i32 max bytes,
                           i32 n x (str topic, i32 partition, i64 fetch offset, i32 current leader epoch,
                           i32 last fetched epoch, i64 log start offset, i32 partition max bytes)
                       resp: i32 n x (str topic, i32 partition, i16 code, str message, str leader address,
                            i64 high watermark, i64 last stable offset, i64 log start offset,
                            i64 log end offset, i64 next fetch offset, i32 diverging epoch (-1: none),
                            i64 diverging end offset, bytes stored frames)

    REPLICA_FETCH_SESSION (18)
                       req: REPLICA_FETCH's request holding only the partitions whose request changed
                            since the last one on this connection (or that are new to it), then
                            i32 m x (str topic, i32 partition): the partitions no longer fetched
                       resp: REPLICA_FETCH's answer holding only the partitions with something new
                             (records, an error, a diverging epoch, offsets not told yet)
                       The connection's fetch session (``replica_session.py``, Kafka's KIP-227
                       without ids: a session is its connection) remembers the rest, so an idle
                       round of 1,000 partitions carries and answers almost nothing.

    REPLICA_FETCH_V2 (19), REPLICA_FETCH_SESSION_V2 (20)
                       REPLICA_FETCH and REPLICA_FETCH_SESSION with ``str topic id`` right after each
                       request partition's ``str topic`` (KIP-516; the removals and the answers as
                       before): a leader whose replica of the partition has another topic id (the
                       topic was deleted and created again under the same name, and one of the two
                       brokers has not applied it yet; both incarnations start at leader epoch 0)
                       answers that partition ``INCONSISTENT_TOPIC_ID`` (150) with nothing else, so a
                       new, empty replica never takes the deleted topic's records.  An empty id is
                       not checked, nor is any partition of the old numbers (followers that predate
                       them).  New api numbers rather than a longer layout: a leader that predates
                       them refuses the request ("unknown data listener api", the follower then
                       fetches over gRPC) instead of reading the id's bytes as the partition's
                       offsets.

REPLICA_FETCH is ``Broker.Fetch`` with ``replica_id >= 0``: the same request, checked with the
same rule (``CLUSTER_ACTION`` on the cluster under the authorizer: a follower authenticates
as a node, with its certificate or ``NODE_AUTH``) and answered by the same
``LeaderFetchHandler`` (leader epoch fencing, divergence, HW, ISR bookkeeping, the fault
hook), so nothing about replication is decided here; only the encoding differs.  Not
charged to quotas (nodes never are; follower fetches are not consumer bytes).
"""
from __future__ import annotations

import struct
from typing import Any, Callable

from spark_log.errors import AuthenticationError, InvalidRequestError
from spark_log.proto import broker_pb2 as pb

from brokers.replica.replica_wire import FETCH_HEAD, I16, I32, OFFSETS, PART, WANTED, ReplicaWanted, name_bytes, read_name

from .leader_fetch import ReplicaPart
from .replica_session import ReplicaSession

__all__ = ["NODE_AUTH", "REPLICA_FETCH", "REPLICA_FETCH_SESSION", "REPLICA_FETCH_V2", "REPLICA_FETCH_SESSION_V2",
           "REPLICA_APIS", "node_auth", "replica_fetch", "replica_fetch_session"]

NODE_AUTH, REPLICA_FETCH = 9, 10
REPLICA_FETCH_SESSION = 18
REPLICA_FETCH_V2, REPLICA_FETCH_SESSION_V2 = 19, 20  # with topic ids (module docstring)
REPLICA_APIS = (NODE_AUTH, REPLICA_FETCH, REPLICA_FETCH_SESSION, REPLICA_FETCH_V2, REPLICA_FETCH_SESSION_V2)
_MAX_PARTITIONS = 1_000_000


# the arguments are data_listener.py's DataListener, _Reader, _Writer and Caller (not imported: it imports this)
def node_auth(listener: Any, request: Any, out: Any, caller: Any) -> None:
    """``NODE_AUTH``: the inter-node token makes the connection ``Node:<id>`` (the gRPC
    authenticator's own check of the ``spark-log-node`` header)."""
    from brokers.net.node_auth import HEADER

    token = request.str()
    if listener.security is None or listener.protocol == "PLAINTEXT":
        raise AuthenticationError("NODE_AUTH needs a TLS listener (SSL or SASL_SSL)")
    principal: str = listener.security.authenticator.authenticate({}, [(HEADER, token)])
    listener.end_session(caller)  # a node now: no SCRAM session of the connection is checked any more
    caller.principal = principal
    caller.authenticated = True
    out.str(principal)


def replica_fetch(listener: Any, request: Any, out: Any, is_active: Callable[[], bool], caller: Any, *,
                  topic_ids: bool = False) -> None:
    """``REPLICA_FETCH`` (module docstring), with ``topic_ids`` ``REPLICA_FETCH_V2``.  Parsed
    and answered without protobuf messages: one ``struct`` call per partition each way, the
    topic names decoded and encoded once per request (an idle round of 1,000 partitions is
    mostly this loop)."""
    replica_id, max_wait_ms, max_bytes, wanted, _ = _parse(request, session=False, topic_ids=topic_ids)
    handler = _handler(listener, replica_id, caller)
    _encode(handler.answer(replica_id, max_wait_ms, max_bytes, wanted, is_active=is_active), out)


def replica_fetch_session(listener: Any, request: Any, out: Any, is_active: Callable[[], bool], caller: Any, *,
                          topic_ids: bool = False) -> None:
    """``REPLICA_FETCH_SESSION`` (module docstring), with ``topic_ids``
    ``REPLICA_FETCH_SESSION_V2``: the connection's fetch session (``replica_session.py``) takes
    the request's changes, and the answer holds only the partitions with something new."""
    replica_id, max_wait_ms, max_bytes, upserts, removals = _parse(request, session=True, topic_ids=topic_ids)
    handler = _handler(listener, replica_id, caller)
    session: ReplicaSession | None = caller.replica_session
    if session is None:
        session = caller.replica_session = ReplicaSession(replica_id)
    session.update(replica_id, upserts, removals)
    _encode(handler.answer_session(session, max_wait_ms, max_bytes, is_active=is_active), out)


def _parse(request: Any, *, session: bool,
           topic_ids: bool) -> tuple[int, int, int, list[ReplicaWanted], list[tuple[str, int]]]:
    """(replica id, max wait ms, max bytes, the partitions, the partitions removed (a
    session's request only)); ``topic_ids``: the _V2 layout (a topic id after each name)."""
    data, at = request.data, request.at
    removals: list[tuple[str, int]] = []
    try:
        replica_id, max_wait_ms, _min_bytes, max_bytes, n = FETCH_HEAD.unpack_from(data, at)
        at += FETCH_HEAD.size
        if replica_id < 0:
            raise InvalidRequestError(f"REPLICA_FETCH needs a replica id >= 0, got {replica_id}")
        if n < 0 or n > _MAX_PARTITIONS:
            raise InvalidRequestError(f"bad count {n} in data listener request")
        names: dict[bytes, str] = {}
        wanted: list[ReplicaWanted] = []
        topic_id = ""
        for _ in range(n):
            topic, at = read_name(data, at, names)
            if topic_ids:
                topic_id, at = read_name(data, at, names)
            index, fetch_offset, leader_epoch, last_epoch, log_start, partition_max = WANTED.unpack_from(data, at)
            wanted.append(ReplicaWanted(topic, index, fetch_offset, leader_epoch, last_epoch, log_start, partition_max,
                                        topic_id))
            at += WANTED.size
        if session:
            (m,) = I32.unpack_from(data, at)
            at += 4
            if m < 0 or m > _MAX_PARTITIONS:
                raise InvalidRequestError(f"bad count {m} of removed partitions in data listener request")
            for _ in range(m):
                topic, at = read_name(data, at, names)
                removals.append((topic, I32.unpack_from(data, at)[0]))
                at += 4
    except struct.error:
        raise InvalidRequestError("truncated data listener request") from None
    except ValueError as exc:  # a name past the request, or not UTF-8
        raise InvalidRequestError(f"malformed REPLICA_FETCH request: {exc}") from None
    request.at = at
    return replica_id, max_wait_ms, max_bytes, wanted, removals


def _handler(listener: Any, replica_id: int, caller: Any) -> Any:
    """The leader's ``LeaderFetchHandler`` once the caller may fetch as ``replica_id``."""
    # the rule of a follower fetch depends on its replica id alone (CLUSTER_ACTION)
    listener._check("/spark_log.broker.v1.Broker/Fetch", pb.FetchRequest(replica_id=replica_id), caller)
    handler: Any = listener.fetch.follower_fetches
    if handler is None:
        raise InvalidRequestError("this broker does not serve follower fetches")
    return handler


def _encode(parts: list[ReplicaPart], out: Any) -> None:
    chunks = out.chunks
    chunks.append(I32.pack(len(parts)))
    encoded: dict[str, bytes] = {}
    for topic, index, error, hw, lso, log_start, leo, next_offset, diverging, records in parts:
        name = name_bytes(topic, encoded)
        div_epoch, div_end = diverging if diverging is not None else (-1, -1)
        if error is None:
            chunks.append(name + PART.pack(index, 0, 0, 0, hw, lso, log_start, leo, next_offset, div_epoch, div_end,
                                           len(records)))
        else:
            message = error.message.encode("utf-8")
            leader = (getattr(error, "leader_address", None) or "").encode("utf-8")
            chunks.append(name + I32.pack(index) + I16.pack(int(error.code)) + I32.pack(len(message)) + message +
                          I32.pack(len(leader)) + leader +
                          OFFSETS.pack(hw, lso, log_start, leo, next_offset, div_epoch, div_end, len(records)))
        if len(records):
            chunks.append(records)
