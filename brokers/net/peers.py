"""``PeerCalls``: this broker's calls to other brokers (transaction markers, KIP-890
verification, group offsets of a transaction), over one channel per peer address.

Every such call goes through the node's ``Channels`` (so TLS and the inter-node token
apply) with ``PEER_CHANNEL_OPTIONS``; a channel is opened on first use and kept until
``close`` (the broker's stop).  ``unary(address, method, request, response)`` answers the
cached callable of one RPC to one peer.

Thread-safety: every method may be called from any thread.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import grpc

from .channels import PEER_CHANNEL_OPTIONS, Channels, GrpcOptions

__all__ = ["PeerCalls"]


class PeerCalls:
    def __init__(self, channels: Channels, options: GrpcOptions = PEER_CHANNEL_OPTIONS) -> None:
        self._channels = channels
        self._options = options
        self._lock = threading.Lock()
        self._open: dict[str, grpc.Channel] = {}
        self._calls: dict[tuple[str, str], Callable[..., Any]] = {}
        self._closed = False

    def unary(self, address: str, method: str, request: Any, response: Any) -> Callable[..., Any]:
        """The callable of ``method`` (``/package.Service/Method``) on ``address``; ``request``
        and ``response`` are the message classes."""
        key = (address, method)
        with self._lock:
            call = self._calls.get(key)
            if call is None:
                if self._closed:
                    raise RuntimeError("the broker's peer channels are closed")
                channel = self._open.get(address)
                if channel is None:
                    channel = self._open[address] = self._channels.open(address, self._options)
                call = self._calls[key] = channel.unary_unary(method, request_serializer=request.SerializeToString,
                                                              response_deserializer=response.FromString)
            return call

    def close(self) -> None:
        with self._lock:
            channels, self._open, self._calls, self._closed = list(self._open.values()), {}, {}, True
        for channel in channels:
            channel.close()
