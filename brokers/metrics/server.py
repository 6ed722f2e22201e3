"""``NodeMetrics``: one node's registry and its ``/metrics`` HTTP listener.

The registry is the node's own (``CollectorRegistry``), never ``prometheus_client``'s global
one, so several nodes in one process (tests) each report their own.  ``start(host, port,
data_dir)`` serves it on ``host:port`` (``BrokerConfig.metrics_port``: -1 off, 0 a free
port); the bound port is written to ``<data_dir>/metrics.port`` the way the node writes its
gRPC port to ``broker.port`` (the local cluster and tests read it there), and removed by
``stop()``.  ``scrape()`` renders the same text without HTTP.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.registry import Collector

from .rpc import RpcMetricsInterceptor

__all__ = ["NodeMetrics", "PORT_FILE"]

PORT_FILE = "metrics.port"


class NodeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.interceptor = RpcMetricsInterceptor(self.registry)
        self.port: int | None = None
        self._httpd: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._port_file: Path | None = None

    def register(self, collector: Collector) -> None:
        self.registry.register(collector)

    def unregister(self, collector: Collector) -> None:
        try:
            self.registry.unregister(collector)
        except KeyError:
            pass

    def scrape(self) -> str:
        return generate_latest(self.registry).decode()

    def start(self, host: str, port: int, data_dir: Path) -> int | None:
        """Serve ``/metrics`` (``port`` -1: not at all); the bound port."""
        if port < 0:
            return None
        self._httpd, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self._thread.name = "metrics-http"
        self.port = int(self._httpd.server_port)
        self._port_file = Path(data_dir) / PORT_FILE
        tmp = self._port_file.with_suffix(".tmp")
        tmp.write_text(f"{self.port}\n")
        os.replace(tmp, self._port_file)
        return self.port

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._port_file is not None:
            self._port_file.unlink(missing_ok=True)
