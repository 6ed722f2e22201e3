"""gRPC options and channels for the node's server and its links to other nodes (one place).

Options:

- ``SERVER_OPTIONS``: the node's one ``grpc.Server`` (256 MiB messages: Raft snapshots,
  large follower fetches);
- ``PEER_CHANNEL_OPTIONS``: channels between nodes (Raft peers, replica fetchers).  They
  reconnect quickly: a restarted voter or leader must be reachable again within a fraction
  of an election timeout, not after gRPC's default exponential backoff (up to 120 s);
- ``CONTROLLER_CHANNEL_OPTIONS``: a broker's channels to the controller voters (quick
  reconnects; answers up to 64 MiB, e.g. a described metadata image).

Channels (``Channels.open(address, options)``): every node-to-node channel (Raft
transport, controller client, replica fetchers, the launcher's probes) is opened through
the node's ``Channels``, so the listener's security applies to internal traffic too:

- ``PLAINTEXT``: ``grpc.insecure_channel``;
- ``TlsChannels(files, metadata=...)``: TLS, verifying the peer's certificate against the
  node's CA and presenting the node's own certificate (mutual TLS when the listener
  requires client certificates); the channels follow certificate renewals
  (``reloading.ReloadingChannel``) and carry ``metadata`` on every call (the inter-node
  token of ``node_auth.py`` when the cluster uses one).
"""
from __future__ import annotations

from typing import Any, Protocol, Sequence

import grpc

from .reloading import Metadata, ReloadingChannel
from .tls import TlsFiles

__all__ = ["SERVER_OPTIONS", "PEER_CHANNEL_OPTIONS", "CONTROLLER_CHANNEL_OPTIONS", "GrpcOptions", "Channels",
           "PlaintextChannels", "TlsChannels", "PLAINTEXT"]

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


class Channels(Protocol):
    """Opens this node's channels to other nodes (see the module docstring)."""

    @property
    def tls(self) -> bool: ...

    def open(self, address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel: ...


class PlaintextChannels:
    tls = False

    def open(self, address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
        return grpc.insecure_channel(address, options=list(options))


PLAINTEXT: Channels = PlaintextChannels()


class TlsChannels:
    """TLS channels over the node's ``TlsFiles``, each call carrying ``metadata``."""

    tls = True

    def __init__(self, files: TlsFiles, *, metadata: Metadata = ()) -> None:
        self.files = files
        self.metadata = metadata

    def open(self, address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
        return ReloadingChannel(address, self.files, options=options, metadata=self.metadata)
