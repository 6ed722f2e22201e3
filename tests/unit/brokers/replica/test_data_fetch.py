"""REPLICA_FETCH's encoding (``brokers/server/replica_listener.py``) read back by the follower
(``brokers/replica/data_fetch.py``): errors, diverging epochs, HW and frames survive the round
trip; a consumer id and an unauthenticated SASL_SSL caller are refused before the leader's
handler runs; and a follower whose leader has no usable data listener falls back to gRPC."""
from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from brokers.net.faults import FetchFaults
from brokers.replica.data_fetch import _parse
from brokers.replica.replica_wire import ReplicaWanted
from brokers.replica.fetcher import ReplicaFetcher
from brokers.server.data_listener import Caller, DataListener
from brokers.partition.messages import Diverging
from brokers.server.leader_fetch import ReplicaPart
from brokers.server.replica_listener import REPLICA_FETCH, REPLICA_FETCH_SESSION_V2, REPLICA_FETCH_V2
from spark_log.errors import ErrorCode, FencedEpochError, NotLeaderError


class _Handler:
    def __init__(self, parts: list[ReplicaPart]) -> None:
        self.parts = parts
        self.requests: list[tuple[int, int, list[ReplicaWanted]]] = []

    def answer(self, replica_id: int, max_wait_ms: int, max_bytes: int, wanted: list[ReplicaWanted], *,
               is_active: Any) -> list[ReplicaPart]:
        self.requests.append((replica_id, max_bytes, list(wanted)))
        return self.parts


def _listener(tmp_path: Path, handler: _Handler, protocol: str | None = None) -> DataListener:
    manager = SimpleNamespace(broker_id=1, image=SimpleNamespace(security=None))
    listener = DataListener(manager=manager, builder=None, fetch=SimpleNamespace(follower_fetches=handler),  # type: ignore[arg-type]
                            produce=None, list_offsets=None, host="127.0.0.1", port=0,  # type: ignore[arg-type]
                            data_dir=tmp_path, channels=None)  # type: ignore[arg-type]
    if protocol is not None:
        listener.security = SimpleNamespace(authorizer=None, config=SimpleNamespace(security_protocol=protocol))
    return listener


def _request(replica_id: int, wanted: list[ReplicaWanted]) -> bytes:
    import struct

    out = [struct.pack("<iiiii", replica_id, 0, 1, 1 << 20, len(wanted))]
    for w in wanted:
        name = w.topic.encode()
        out.append(struct.pack("<i", len(name)) + name)
        out.append(struct.pack("<iqiiqi", w.partition, w.fetch_offset, w.current_leader_epoch, w.last_fetched_epoch,
                               w.log_start_offset, 0))
    return b"".join(out)


def _answer(listener: DataListener, payload: bytes, caller: Caller | None = None) -> tuple[int, memoryview]:
    chunks = listener.answer(REPLICA_FETCH, memoryview(payload), caller=caller)
    data = memoryview(b"".join(bytes(c) for c in chunks))
    code = int.from_bytes(data[:2], "little", signed=True)
    size = int.from_bytes(data[2:6], "little", signed=True)
    return code, data[6 + size:]


def test_the_answer_round_trips_errors_divergence_and_frames(tmp_path: Path) -> None:
    frames = bytes(range(256)) * 10
    moved = NotLeaderError("broker 3 leads v-4 now", leader_address="127.0.0.1:9093")
    handler = _Handler([
        ReplicaPart("t", 0, None, 40, 40, 3, 50, 50, None, memoryview(frames)),
        ReplicaPart("t", 1, None, 7, 7, 0, 9, 9, Diverging(4, 6), b""),
        ReplicaPart("u", 2, FencedEpochError("epoch 3 is fenced"), -1, -1, -1, -1, 0, None, b""),
        ReplicaPart("v\u00e9", 4, moved, -1, -1, -1, -1, 0, None, b""),
    ])
    wanted = [ReplicaWanted("t", 0, 40, 5, 5, 3), ReplicaWanted("t", 1, 9, 5, 5, 0), ReplicaWanted("u", 2, 0, 3, -1, 0),
              ReplicaWanted("v\u00e9", 4, 0, 3, -1, 0)]
    code, payload = _answer(_listener(tmp_path, handler), _request(2, wanted))
    assert code == 0
    [(replica_id, max_bytes, seen)] = handler.requests
    assert replica_id == 2 and max_bytes == 1 << 20
    assert seen == wanted
    got = _parse(payload)
    assert [(a.topic, a.partition, a.error_code, a.high_watermark, a.log_start_offset) for a in got] == [
        ("t", 0, 0, 40, 3), ("t", 1, 0, 7, 0), ("u", 2, ErrorCode.FENCED_EPOCH, -1, -1),
        ("v\u00e9", 4, ErrorCode.NOT_LEADER, -1, -1)]
    assert bytes(got[0].records) == frames and got[0].diverging is None
    assert got[1].diverging is not None and (got[1].diverging.epoch, got[1].diverging.end_offset) == (4, 6)
    assert not len(got[1].records) and got[2].error_message == "epoch 3 is fenced"
    assert got[3].error_message == "broker 3 leads v-4 now" and not len(got[3].records)


def test_a_truncated_or_malformed_request_is_a_typed_refusal(tmp_path: Path) -> None:
    handler = _Handler([])
    listener = _listener(tmp_path, handler)
    whole = _request(2, [ReplicaWanted("t", 0, 0, 0, -1, 0)])
    for payload in (whole[:-1], whole[:10], _request(2, [ReplicaWanted("t", 0, 0, 0, -1, 0)]).replace(b"t", b"\xff", 1)):
        code, _ = _answer(listener, payload)
        assert code == ErrorCode.INVALID_REQUEST, payload
    assert handler.requests == []


def test_a_consumer_id_and_an_unauthenticated_caller_are_refused_before_the_handler(tmp_path: Path) -> None:
    handler = _Handler([])
    code, _ = _answer(_listener(tmp_path, handler), _request(-1, [ReplicaWanted("t", 0, 0, 0, -1, 0)]))
    assert code == ErrorCode.INVALID_REQUEST
    sasl = _listener(tmp_path, handler, protocol="SASL_SSL")
    code, _ = _answer(sasl, _request(2, [ReplicaWanted("t", 0, 0, 0, -1, 0)]), caller=sasl.new_caller("127.0.0.1"))
    assert code == ErrorCode.AUTHENTICATION_FAILED
    assert handler.requests == []


class _Peers:
    def __init__(self, port: int) -> None:
        self.port = port
        self.forgotten: list[tuple[int, str]] = []

    def address(self, broker_id: int, grpc_address: str) -> tuple[str, int]:
        return "127.0.0.1", self.port

    def forget(self, broker_id: int, grpc_address: str) -> None:
        self.forgotten.append((broker_id, grpc_address))


def test_a_leader_without_a_usable_data_listener_is_fetched_over_grpc() -> None:
    wanted = [ReplicaWanted("t", 0, 0, 0, -1, 0)]
    with socket.socket() as probe:  # a port nobody listens on: the connection is refused
        probe.bind(("127.0.0.1", 0))
        refused = probe.getsockname()[1]
    for port in (0, refused):
        peers = _Peers(port)
        fetcher = ReplicaFetcher(broker_id=2, leader_id=1, address="127.0.0.1:1", faults=FetchFaults(None, 2),
                                 transport="auto", data_peers=peers)
        try:
            assert fetcher._fetch_over_data(wanted, 0) is None   # the round goes over gRPC
            assert fetcher._data_retry_at > 0 and fetcher.data_connections == 0
            assert peers.forgotten == ([] if port == 0 else [(1, "127.0.0.1:1")])
            assert fetcher._fetch_over_data(wanted, 0) is None   # not asked again before the retry time
        finally:
            fetcher.stop()
    grpc_only = ReplicaFetcher(broker_id=2, leader_id=1, address="127.0.0.1:1", faults=FetchFaults(None, 2),
                               transport="grpc", data_peers=_Peers(refused))
    try:
        assert grpc_only._fetch_over_data(wanted, 0) is None and grpc_only._data_retry_at == 0
    finally:
        grpc_only.stop()


class _OldLeader:
    """A data listener that predates some replica APIs: it refuses ``refused`` with
    InvalidRequestError (unknown api) and answers REPLICA_FETCH with no partitions."""

    def __init__(self, refused: set[int]) -> None:
        import threading

        self.refused = refused
        self.asked: list[tuple[int, int]] = []  # (connection, api)
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(4)
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import struct

        from spark_log.errors import InvalidRequestError

        connection = 0
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            connection += 1
            with conn:
                while True:
                    head = conn.recv(4, socket.MSG_WAITALL)
                    if len(head) < 4:
                        break
                    body = conn.recv(struct.unpack("<I", head)[0], socket.MSG_WAITALL)
                    api, correlation = struct.unpack_from("<BI", body)
                    self.asked.append((connection, api))
                    if api in self.refused:
                        message = f"unknown data listener api {api}".encode()
                        answer = struct.pack("<Ih", correlation, int(InvalidRequestError.code))
                        answer += struct.pack("<i", len(message)) + message
                    else:
                        answer = struct.pack("<Ihi", correlation, 0, 0) + struct.pack("<i", 0)
                    conn.sendall(struct.pack("<I", len(answer)) + answer)

    def close(self) -> None:
        self.server.close()


def test_a_leader_that_does_not_know_replica_fetch_is_fetched_over_grpc_and_asked_again_later() -> None:
    """An older leader answers REPLICA_FETCH_SESSION_V2 and REPLICA_FETCH_V2 (what followers
    send: with topic ids) with InvalidRequestError (unknown api): the first round goes over
    gRPC and the next connection asks without a session; refused again, that round goes over
    gRPC too, the connection is dropped and the data listener is tried again later."""
    leader = _OldLeader({REPLICA_FETCH_V2, REPLICA_FETCH_SESSION_V2})
    peers = _Peers(leader.port)
    fetcher = ReplicaFetcher(broker_id=2, leader_id=1, address="127.0.0.1:1", faults=FetchFaults(None, 2),
                             transport="auto", data_peers=peers)
    wanted = [ReplicaWanted("t", 0, 0, 0, -1, 0)]
    try:
        assert fetcher._fetch_over_data(wanted, 0) is None
        assert leader.asked == [(1, REPLICA_FETCH_SESSION_V2)] and fetcher._sessions_retry_at > 0
        assert fetcher._data is None and fetcher._data_retry_at == 0 and peers.forgotten == []
        assert fetcher._fetch_over_data(wanted, 0) is None
        assert leader.asked[1:] == [(2, REPLICA_FETCH_V2)] and fetcher.data_connections == 2
        assert fetcher._data is None and fetcher._data_retry_at > 0 and peers.forgotten == [(1, "127.0.0.1:1")]
    finally:
        fetcher.stop()
        leader.close()


def test_a_leader_without_fetch_sessions_is_fetched_without_one() -> None:
    """A leader that knows REPLICA_FETCH_V2 but not REPLICA_FETCH_SESSION_V2: after one round
    over gRPC, every round goes to its data listener without a session, on one connection."""
    leader = _OldLeader({REPLICA_FETCH_SESSION_V2})
    fetcher = ReplicaFetcher(broker_id=2, leader_id=1, address="127.0.0.1:1", faults=FetchFaults(None, 2),
                             transport="auto", data_peers=_Peers(leader.port))
    wanted = [ReplicaWanted("t", 0, 0, 0, -1, 0)]
    try:
        assert fetcher._fetch_over_data(wanted, 0) is None
        assert fetcher._fetch_over_data(wanted, 0) == [] and fetcher._fetch_over_data(wanted, 0) == []
        assert leader.asked == [(1, REPLICA_FETCH_SESSION_V2), (2, REPLICA_FETCH_V2), (2, REPLICA_FETCH_V2)]
        assert fetcher.data_connections == 2 and fetcher._data is not None
    finally:
        fetcher.stop()
        leader.close()
