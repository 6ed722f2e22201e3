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

from typing import Any, Callable

from spark_log.errors import AuthenticationError, InvalidRequestError
from spark_log.proto import broker_pb2 as pb

__all__ = ["NODE_AUTH", "REPLICA_FETCH", "node_auth", "replica_fetch"]

NODE_AUTH, REPLICA_FETCH = 9, 10


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
    """``REPLICA_FETCH`` (module docstring)."""
    replica_id, max_wait_ms, min_bytes, max_bytes = request.i32(), request.i32(), request.i32(), request.i32()
    if replica_id < 0:
        raise InvalidRequestError(f"REPLICA_FETCH needs a replica id >= 0, got {replica_id}")
    n = request.count()
    partitions = []
    for _ in range(n):
        topic, partition = request.str(), request.i32()
        fetch_offset, leader_epoch, last_epoch = request.i64(), request.i32(), request.i32()
        log_start, partition_max_bytes = request.i64(), request.i32()
        partitions.append(pb.FetchPartition(topic=topic, partition=partition, fetch_offset=fetch_offset,
                                            current_leader_epoch=leader_epoch, last_fetched_epoch=last_epoch,
                                            log_start_offset=log_start, partition_max_bytes=partition_max_bytes))
    message = pb.FetchRequest(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                              max_bytes=max_bytes, partitions=partitions)
    listener._check("/spark_log.broker.v1.Broker/Fetch", message, caller)
    handler: Any = listener.fetch.follower_fetches
    if handler is None:
        raise InvalidRequestError("this broker does not serve follower fetches")
    parts = handler.handle(message, is_active=is_active)
    out.i32(len(parts))
    for result, _field, payload in parts:
        out.str(result.topic)
        out.i32(result.partition)
        if result.HasField("error") and result.error.code:
            out.i16(result.error.code)
            out.str(result.error.message)
            out.str(result.error.leader_address)
        else:
            out.i16(0)
            out.str("")
            out.str("")
        out.i64(result.high_watermark)
        out.i64(result.last_stable_offset)
        out.i64(result.log_start_offset)
        out.i64(result.log_end_offset)
        out.i64(result.next_fetch_offset)
        if result.HasField("diverging_epoch"):
            out.i32(result.diverging_epoch.epoch)
            out.i64(result.diverging_epoch.end_offset)
        else:
            out.i32(-1)
            out.i64(-1)
        out.raw(payload)
