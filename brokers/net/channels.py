"""gRPC options for the node's server and its channels to other nodes (one place).

- ``SERVER_OPTIONS``: the node's one ``grpc.Server`` (256 MiB messages: Raft snapshots,
  large follower fetches);
- ``PEER_CHANNEL_OPTIONS``: channels between nodes (Raft peers, replica fetchers).  They
  reconnect quickly: a restarted voter or leader must be reachable again within a fraction
  of an election timeout, not after gRPC's default exponential backoff (up to 120 s);
- ``CONTROLLER_CHANNEL_OPTIONS``: a broker's channels to the controller voters (quick
  reconnects; answers up to 64 MiB, e.g. a described metadata image).
"""
from __future__ import annotations

__all__ = ["SERVER_OPTIONS", "PEER_CHANNEL_OPTIONS", "CONTROLLER_CHANNEL_OPTIONS", "GrpcOptions"]

GrpcOptions = list[tuple[str, int]]

SERVER_OPTIONS: GrpcOptions = [
    ("grpc.max_send_message_length", 256 * 1024 * 1024),
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
]

PEER_CHANNEL_OPTIONS: GrpcOptions = SERVER_OPTIONS + [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 250),
]

CONTROLLER_CHANNEL_OPTIONS: GrpcOptions = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 500),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
]
