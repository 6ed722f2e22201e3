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

__all__ = ["NODE_AUTH", "REPLICA_FETCH", "node_auth", "replica_fetch"]

NODE_AUTH, REPLICA_FETCH = 9, 10
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
    caller.principal = principal
    caller.authenticated = True
    out.str(principal)


def replica_fetch(listener: Any, request: Any, out: Any, is_active: Callable[[], bool], caller: Any) -> None:
    """``REPLICA_FETCH`` (module docstring).  Parsed and answered without protobuf messages:
    one ``struct`` call per partition each way, the topic names decoded and encoded once per
    request (an idle round of 1,000 partitions is mostly this loop)."""
    data, at = request.data, request.at
    try:
        replica_id, max_wait_ms, _min_bytes, max_bytes, n = FETCH_HEAD.unpack_from(data, at)
        at += FETCH_HEAD.size
        if replica_id < 0:
            raise InvalidRequestError(f"REPLICA_FETCH needs a replica id >= 0, got {replica_id}")
        if n < 0 or n > _MAX_PARTITIONS:
            raise InvalidRequestError(f"bad count {n} in data listener request")
        names: dict[bytes, str] = {}
        wanted: list[ReplicaWanted] = []
        for _ in range(n):
            topic, at = read_name(data, at, names)
            wanted.append(ReplicaWanted(topic, *WANTED.unpack_from(data, at)))
            at += WANTED.size
    except struct.error:
        raise InvalidRequestError("truncated data listener request") from None
    except ValueError as exc:  # a name past the request, or not UTF-8
        raise InvalidRequestError(f"malformed REPLICA_FETCH request: {exc}") from None
    request.at = at
    # the rule of a follower fetch depends on its replica id alone (CLUSTER_ACTION)
    listener._check("/spark_log.broker.v1.Broker/Fetch", pb.FetchRequest(replica_id=replica_id), caller)
    handler: Any = listener.fetch.follower_fetches
    if handler is None:
        raise InvalidRequestError("this broker does not serve follower fetches")
    parts: list[ReplicaPart] = handler.answer(replica_id, max_wait_ms, max_bytes, wanted, is_active=is_active)
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
