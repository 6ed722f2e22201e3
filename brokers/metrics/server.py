"""``NodeMetrics``: one node's registry and its ``/metrics`` HTTP listener.

The registry is the node's own (``CollectorRegistry``), never ``prometheus_client``'s global
one, so several nodes in one process (tests) each report their own.  ``start(host, port,
data_dir, tls=...)`` serves it on ``host:port`` (``BrokerConfig.metrics_port``: -1 off, 0 a
free port); the bound port is written to ``<data_dir>/metrics.port`` the way the node writes
its gRPC port to ``broker.port``, and the scheme (``http`` or ``https``) to
``<data_dir>/metrics.scheme`` (the local cluster and tests read them there); both are removed
by ``stop()``.  ``scrape()`` renders the same text without HTTP.

TLS (``MetricsTls``; the node passes it when its listener uses TLS, unless
``metrics_allow_plaintext = true``): ``/metrics`` is served over HTTPS with the node's own
certificate, and asks for a client certificate signed by the node's CA when the listener
does (``ssl_client_auth = required``), so a scraper needs what any other caller of that
broker needs.  The handshake runs in the connection's own thread (a slow or silent client
holds no other scrape), and a new handshake uses the certificate files as last reloaded
(``TlsFiles``: a renewed certificate needs no restart, as for the gRPC listener).  A failed
handshake (plain HTTP against HTTPS, no client certificate, an unknown CA) closes that
connection and is counted in ``handshake_failures``.
"""
from __future__ import annotations

import logging
import os
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any, Callable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, generate_latest, make_wsgi_app
from prometheus_client.registry import Collector

from .rpc import RpcMetricsInterceptor

__all__ = ["NodeMetrics", "MetricsTls", "PORT_FILE", "SCHEME_FILE"]

log = logging.getLogger(__name__)

PORT_FILE = "metrics.port"
SCHEME_FILE = "metrics.scheme"
_HANDSHAKE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class MetricsTls:
    """HTTPS for ``/metrics``: the node's certificate and key, the CA that verifies client
    certificates, whether one is required, and ``generation()`` (changes when the node's
    TLS files were reloaded: the next handshake builds a new context)."""

    certfile: str
    keyfile: str
    cafile: str | None
    client_auth_required: bool
    generation: Callable[[], int] = lambda: 1

    def context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.certfile, self.keyfile)
        if self.cafile:
            context.load_verify_locations(self.cafile)
        if self.client_auth_required:
            context.verify_mode = ssl.CERT_REQUIRED
        return context


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no access log
        pass


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    tls: MetricsTls | None = None
    handshake_failures = 0
    _context: tuple[int, ssl.SSLContext] | None = None
    _lock = threading.Lock()

    def _ssl_context(self, tls: MetricsTls) -> ssl.SSLContext:
        generation = tls.generation()
        with self._lock:
            if self._context is None or self._context[0] != generation:
                self._context = (generation, tls.context())
            return self._context[1]

    def finish_request(self, request: Any, client_address: Any) -> None:
        tls = self.tls
        if tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(_HANDSHAKE_TIMEOUT_S)
        try:
            wrapped = self._ssl_context(tls).wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            with self._lock:
                self.handshake_failures += 1
            log.debug("metrics: TLS handshake with %s failed: %s", client_address, exc)
            return
        try:
            handler: Any = self.RequestHandlerClass  # socketserver's stubs type its server as Self
            handler(wrapped, client_address, self)
        finally:
            try:
                wrapped.close()
            except OSError:
                pass


class NodeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.interceptor = RpcMetricsInterceptor(self.registry)
        self.port: int | None = None
        self.scheme = "http"
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._files: list[Path] = []

    def register(self, collector: Collector) -> None:
        self.registry.register(collector)

    def unregister(self, collector: Collector) -> None:
        try:
            self.registry.unregister(collector)
        except KeyError:
            pass

    def scrape(self) -> str:
        return generate_latest(self.registry).decode()

    @property
    def handshake_failures(self) -> int:
        return self._httpd.handshake_failures if self._httpd is not None else 0

    def start(self, host: str, port: int, data_dir: Path, *, tls: MetricsTls | None = None) -> int | None:
        """Serve ``/metrics`` (``port`` -1: not at all), over HTTPS with ``tls``; the bound port."""
        if port < 0:
            return None
        if tls is not None:
            tls.context()  # unreadable files or a bad pair: refused now, not at the first scrape
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]

        class Server(_Server):
            address_family = family

        httpd = make_server(host, port, make_wsgi_app(self.registry), Server, handler_class=_QuietHandler)
        httpd.tls = tls
        httpd._lock = threading.Lock()
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()
        self.port = int(httpd.server_port)
        self.scheme = "https" if tls is not None else "http"
        self._files = []
        for name, text in ((SCHEME_FILE, self.scheme), (PORT_FILE, str(self.port))):  # the port last: readers wait on it
            path = Path(data_dir) / name
            tmp = path.with_suffix(".tmp")
            tmp.write_text(f"{text}\n")
            os.replace(tmp, path)
            self._files.append(path)
        return self.port

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        for path in self._files:
            path.unlink(missing_ok=True)
        self._files = []
