"""PeerCalls: one channel per peer address, one callable per RPC and peer, all closed at stop."""
from __future__ import annotations

from typing import Any, Sequence

import pytest

from brokers.net.peers import PeerCalls
from spark_log.proto import transactions_pb2 as pb


class _Channel:
    def __init__(self, address: str) -> None:
        self.address, self.closed, self.methods = address, False, []

    def unary_unary(self, method: str, **_: Any) -> object:
        self.methods.append(method)
        return (self.address, method)

    def close(self) -> None:
        self.closed = True


class _Channels:
    tls = False

    def __init__(self) -> None:
        self.opened: list[_Channel] = []

    def open(self, address: str, options: Sequence[tuple[str, Any]] = ()) -> Any:
        assert ("grpc.max_reconnect_backoff_ms", 250) in list(options)  # the quick-reconnect peer options
        channel = _Channel(address)
        self.opened.append(channel)
        return channel


def test_one_channel_per_peer_and_one_callable_per_method_until_closed() -> None:
    channels = _Channels()
    peers = PeerCalls(channels)
    a = peers.unary("a:1", "/s/M", pb.AddPartitionsRequest, pb.AddPartitionsResponse)
    assert peers.unary("a:1", "/s/M", pb.AddPartitionsRequest, pb.AddPartitionsResponse) is a
    peers.unary("a:1", "/s/N", pb.AddPartitionsRequest, pb.AddPartitionsResponse)
    peers.unary("b:2", "/s/M", pb.AddPartitionsRequest, pb.AddPartitionsResponse)
    assert [c.address for c in channels.opened] == ["a:1", "b:2"]
    assert channels.opened[0].methods == ["/s/M", "/s/N"]
    peers.close()
    assert all(c.closed for c in channels.opened)
    with pytest.raises(RuntimeError):
        peers.unary("a:1", "/s/M", pb.AddPartitionsRequest, pb.AddPartitionsResponse)
