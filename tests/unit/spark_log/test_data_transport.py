"""``spark_log._data_transport``: calls over real loopback sockets to a small server speaking
the data listener's framing (``brokers/server/data_listener.py``).

- Answers reach the call they belong to (one call per connection; calls in flight at once
  get their own connections; a connection is reused once its call is answered); payloads
  larger than a socket buffer go through whole.
- Every failure is a typed error of the call: the broker's refusal (``from_code``), a
  timeout, a connection the broker closed, a cancel, the client's close; a callback that
  raises does not stop the reader.
- A broker that refuses ``CLIENT_ID`` (it predates the PB APIs) makes ``call`` raise before
  anything is sent, and ``Cluster``'s route falls back to gRPC for that broker.
"""
from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time
from concurrent.futures import CancelledError
from typing import Any, Iterator

import pytest

from spark_log._client import _DataRoute
from spark_log._data_transport import CLIENT_ID, DataCall, DataTransport
from spark_log.errors import (
    BrokerNotAvailableError,
    ErrorCode,
    InvalidRequestError,
    NotLeaderError,
    RequestTimeoutError,
)

ECHO, NEVER, REFUSE, HANG_UP, SLOW = 99, 98, 97, 96, 95


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: _Server = self.server  # type: ignore[assignment]
        sock: socket.socket = self.request
        while True:
            head = _exact(sock, 4)
            if head is None:
                return
            body = _exact(sock, struct.unpack("<I", head)[0])
            if body is None:
                return
            api, correlation = struct.unpack_from("<BI", body, 0)
            payload = body[5:]
            if api == CLIENT_ID:
                if server.refuse_client_id:
                    _answer(sock, correlation, ErrorCode.INVALID_REQUEST, "unknown data listener api 17")
                    continue
                size = struct.unpack_from("<i", payload, 0)[0]
                server.client_ids.append(payload[4:4 + size].decode())
                _answer(sock, correlation)
            elif api == ECHO:
                _answer(sock, correlation, payload=payload)
            elif api == SLOW:  # a long poll: answered once the test releases it
                server.release.wait(30)
                _answer(sock, correlation, payload=payload)
            elif api == REFUSE:
                _answer(sock, correlation, ErrorCode.NOT_LEADER, "broker 2 leads it now")
            elif api == HANG_UP:
                return
            # NEVER: no answer; the next request (if any) is read


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.refuse_client_id = False
        self.client_ids: list[str] = []
        self.release = threading.Event()


def _exact(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _answer(sock: socket.socket, correlation: int, code: int = 0, message: str = "", payload: bytes = b"") -> None:
    text = message.encode()
    body = struct.pack("<Ihi", correlation, code, len(text)) + text + payload
    sock.sendall(struct.pack("<I", len(body)) + body)


@pytest.fixture()
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture()
def transport() -> Iterator[DataTransport]:
    t = DataTransport(client_id="bench-1")
    yield t
    t.close()


def _call(transport: DataTransport, server: _Server, api: int, payload: bytes, timeout_s: float = 10.0) -> DataCall:
    host, port = server.server_address[:2]
    return transport.call(str(host), int(port), api, payload, timeout_s, bytes)


def test_answers_reach_their_calls_and_connections_are_reused(server: _Server, transport: DataTransport) -> None:
    for i in range(20):
        assert _call(transport, server, ECHO, b"req-%d" % i).result(timeout=10) == b"req-%d" % i
    assert transport.connections_opened == 1 and server.client_ids == ["bench-1"]
    slow = [_call(transport, server, SLOW, b"slow-%d" % i) for i in range(3)]  # in flight together
    fast = _call(transport, server, ECHO, b"fast")
    assert fast.result(timeout=10) == b"fast" and not any(c.done() for c in slow)  # not queued behind them
    server.release.set()
    assert [c.result(timeout=10) for c in slow] == [b"slow-0", b"slow-1", b"slow-2"]
    assert transport.connections_opened == 4
    big = bytes(range(256)) * (40 << 10)  # 10 MiB: many reads and sends
    assert _call(transport, server, ECHO, big).result(timeout=30) == big


def test_callbacks_run_once_also_when_added_late_and_one_that_raises_stops_nothing(server: _Server,
                                                                                   transport: DataTransport) -> None:
    seen: list[bytes] = []
    done = threading.Event()
    first = _call(transport, server, SLOW, b"a")

    def boom(_call: Any) -> None:
        raise RuntimeError("a callback's own bug")

    first.add_done_callback(boom)
    first.add_done_callback(lambda c: (seen.append(c.result()), done.set()))
    assert not first.done()
    server.release.set()
    assert done.wait(10) and seen == [b"a"]
    first.add_done_callback(lambda c: seen.append(c.result()))  # already done: runs at once, here
    assert seen == [b"a", b"a"]
    assert _call(transport, server, ECHO, b"b").result(timeout=10) == b"b"  # the reader thread lives on


def test_a_refusal_is_the_brokers_typed_error(server: _Server, transport: DataTransport) -> None:
    with pytest.raises(NotLeaderError, match="broker 2 leads it now"):
        _call(transport, server, REFUSE, b"").result(timeout=10)
    assert _call(transport, server, ECHO, b"x").result(timeout=10) == b"x"
    assert transport.connections_opened == 1  # a refusal leaves the connection usable


def test_no_answer_times_out_and_the_connection_is_dropped(server: _Server, transport: DataTransport) -> None:
    call = _call(transport, server, NEVER, b"", timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError) as caught:
        call.result(timeout=10)
    assert caught.value.retriable and time.monotonic() - started < 5
    assert _call(transport, server, ECHO, b"y").result(timeout=10) == b"y"
    assert transport.connections_opened == 2


def test_a_connection_the_broker_closes_fails_its_call_retriably(server: _Server, transport: DataTransport) -> None:
    with pytest.raises(BrokerNotAvailableError) as caught:
        _call(transport, server, HANG_UP, b"").result(timeout=10)
    assert caught.value.retriable
    assert _call(transport, server, ECHO, b"z").result(timeout=10) == b"z"


def test_cancel_ends_the_call_and_drops_its_connection(server: _Server, transport: DataTransport) -> None:
    call = _call(transport, server, NEVER, b"")
    ended = threading.Event()
    call.add_done_callback(lambda _c: ended.set())
    assert call.cancel() and ended.is_set() and not call.cancel()
    with pytest.raises(CancelledError):
        call.result(timeout=1)
    assert _call(transport, server, ECHO, b"w").result(timeout=10) == b"w"
    assert transport.connections_opened == 2


def test_close_fails_calls_in_flight_and_refuses_new_ones(server: _Server) -> None:
    transport = DataTransport()
    call = _call(transport, server, NEVER, b"")
    transport.close()
    with pytest.raises(BrokerNotAvailableError):
        call.result(timeout=10)
    with pytest.raises(BrokerNotAvailableError, match="closed"):
        _call(transport, server, ECHO, b"")
    assert transport.closed


def test_a_broker_without_the_pb_apis_is_refused_at_connect_and_routed_over_grpc(server: _Server,
                                                                                  transport: DataTransport) -> None:
    server.refuse_client_id = True
    with pytest.raises(InvalidRequestError, match="unknown data listener api"):
        _call(transport, server, ECHO, b"")

    class _Grpc:
        def __init__(self) -> None:
            self.requests: list[Any] = []

        def future(self, request: Any, *, timeout: float) -> str:
            self.requests.append(request)
            return "grpc future"

    grpc_call, unusable = _Grpc(), []
    host, port = server.server_address[:2]
    route = _DataRoute(transport, str(host), int(port), ECHO, bytes, bytes, grpc_call, lambda: unusable.append(1))
    assert route.future(b"payload", timeout=5) == "grpc future"
    assert grpc_call.requests == [b"payload"] and unusable == [1]
    with socket.socket() as probe:  # a port nobody listens on: refused, so gRPC too
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    assert _DataRoute(transport, "127.0.0.1", free, ECHO, bytes, bytes, grpc_call, lambda: unusable.append(2)) \
        .future(b"p2", timeout=5) == "grpc future"
    assert unusable == [1, 2]
