"""Renewed certificates are taken without a restart: by the listener (dynamic server
credentials) and by the node's own channels (``ReloadingChannel``); a half-written
renewal is not."""
from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import grpc
import pytest

from brokers.net.channels import TlsChannels
from brokers.net.tls import TlsFiles, server_credentials
from brokers.security.certs import Issued, LocalPki
from spark_log.clock import ManualClock

METHOD = "/test.Echo/Echo"


def _install(issued: Issued, cert: Path, key: Path) -> None:
    shutil.copyfile(issued.key, key)  # key first, as a renewal should
    shutil.copyfile(issued.cert, cert)


@pytest.fixture()
def pkis(tmp_path: Path) -> tuple[LocalPki, LocalPki]:
    return LocalPki.create(tmp_path / "a", name="CA A"), LocalPki.create(tmp_path / "b", name="CA B")


def _server(files: TlsFiles, *, require_client_auth: bool) -> tuple[grpc.Server, int]:
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Echo", {
        "Echo": grpc.unary_unary_rpc_method_handler(lambda request, context: request)}),))
    port = server.add_secure_port("127.0.0.1:0", server_credentials(files, require_client_auth=require_client_auth))
    server.start()
    return server, port


@pytest.fixture()
def stop_servers() -> Iterator[list[grpc.Server]]:
    servers: list[grpc.Server] = []
    yield servers
    for server in servers:
        server.stop(0)


def _echo(channel: grpc.Channel) -> bool:
    try:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(METHOD)
        return call(b"ping", timeout=5) == b"ping"
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
        return False


def test_the_listener_serves_a_renewed_certificate_without_a_restart(
        tmp_path: Path, pkis: tuple[LocalPki, LocalPki], stop_servers: list[grpc.Server]) -> None:
    ca_a, ca_b = pkis
    cert, key = tmp_path / "node.pem", tmp_path / "node.key"
    _install(ca_a.issue("node", file_stem="node-a"), cert, key)
    clock = ManualClock()
    files = TlsFiles(certfile=cert, keyfile=key, check_interval_ms=1000, clock=clock)
    server, port = _server(files, require_client_auth=False)
    stop_servers.append(server)

    def trusting(ca: LocalPki) -> grpc.Channel:
        credentials = grpc.ssl_channel_credentials(root_certificates=ca.ca_file.read_bytes())
        return grpc.secure_channel(f"127.0.0.1:{port}", credentials)

    with trusting(ca_a) as channel:
        assert _echo(channel)
    with trusting(ca_b) as channel:
        assert not _echo(channel)  # served by A's certificate: a B-only client refuses it
    renewed = ca_b.issue("node", file_stem="node-b")
    shutil.copyfile(renewed.key, key)  # half-written: the new key, the old certificate
    clock.advance(1000)
    assert files.current().generation == 1  # not a pair: not published
    with trusting(ca_a) as channel:
        assert _echo(channel)
    shutil.copyfile(renewed.cert, cert)
    clock.advance(1000)
    assert files.current().generation == 2
    with trusting(ca_b) as channel:
        assert _echo(channel)  # same server, new certificate
    with trusting(ca_a) as channel:
        assert not _echo(channel)


def test_the_nodes_channels_present_a_renewed_client_certificate(
        tmp_path: Path, pkis: tuple[LocalPki, LocalPki], stop_servers: list[grpc.Server]) -> None:
    ca_a, ca_b = pkis
    server_files = TlsFiles(certfile=ca_b.issue("server").cert, keyfile=ca_b.directory / "server.key",
                            cafile=ca_b.ca_file)
    server, port = _server(server_files, require_client_auth=True)  # only B's client certificates
    stop_servers.append(server)
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    _install(ca_a.issue("client", server=False, file_stem="client-a"), cert, key)
    clock = ManualClock()
    files = TlsFiles(certfile=cert, keyfile=key, cafile=ca_b.ca_file, check_interval_ms=500, clock=clock)
    channel = TlsChannels(files, metadata=(("x-extra", "1"),)).open(f"127.0.0.1:{port}")
    try:
        assert not _echo(channel)  # A's client certificate is refused
        _install(ca_b.issue("client", server=False, file_stem="client-b"), cert, key)
        clock.advance(500)
        assert _echo(channel)  # the same channel object now presents B's certificate
        assert channel.generation == 2  # type: ignore[attr-defined]
    finally:
        channel.close()
