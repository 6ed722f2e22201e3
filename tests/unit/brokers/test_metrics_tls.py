"""``NodeMetrics`` over TLS (brokers/metrics/server.py), in process with certificates from a
throwaway CA: HTTPS with the node's certificate, a client certificate required when asked
(none, or one from another CA, is refused and counted), plain HTTP refused, and a renewed
certificate used by the next handshake without a restart."""
from __future__ import annotations

import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.wait import wait_until
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from brokers.metrics import NodeMetrics
from brokers.metrics.server import MetricsTls
from brokers.security.certs import LocalPki


class _Probe(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("spark_log_tls_probe", "a sample to find in the scrape", value=1)


def _get(url: str, context: ssl.SSLContext | None) -> bytes:
    with urllib.request.urlopen(url, timeout=10, context=context) as answer:
        return answer.read()


def _client(pki_dir: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki_dir / "ca.pem"))
    if cert is not None and key is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def test_https_with_client_certificates_and_a_renewed_certificate(tmp_path: Path) -> None:
    pki = LocalPki.create(tmp_path / "pki")
    node = pki.issue("node-1", server=True)
    generation = [1]
    tls = MetricsTls(certfile=str(node.cert), keyfile=str(node.key), cafile=str(tmp_path / "pki" / "ca.pem"),
                     client_auth_required=True, generation=lambda: generation[0])
    metrics = NodeMetrics()
    metrics.register(_Probe())
    port = metrics.start("127.0.0.1", 0, tmp_path, tls=tls)
    try:
        assert (tmp_path / "metrics.scheme").read_text().strip() == "https"
        assert int((tmp_path / "metrics.port").read_text()) == port
        url = f"https://127.0.0.1:{port}/metrics"
        scraper = pki.issue("prometheus", server=False)
        assert b"spark_log_tls_probe 1.0" in _get(url, _client(tmp_path / "pki", scraper.cert, scraper.key))
        refused = 0
        stranger_pki = LocalPki.create(tmp_path / "stranger")
        stranger = stranger_pki.issue("prometheus", server=False)
        for context in (_client(tmp_path / "pki"),                                     # no client certificate
                        _client(tmp_path / "pki", stranger.cert, stranger.key)):       # another CA's
            with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
                _get(url, context)
            refused += 1
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            _get(f"http://127.0.0.1:{port}/metrics", None)                             # plain HTTP
        # the server counts a failed handshake in its connection's thread, maybe after the client gave up
        wait_until(lambda: metrics.handshake_failures >= refused + 1, timeout=10,
                   message=lambda: f"{metrics.handshake_failures} failed handshakes counted, {refused + 1} refused")

        # a renewed certificate (same files) is served from the next handshake on
        renewed = pki.issue("node-1", server=True)
        assert renewed.cert == node.cert
        generation[0] = 2
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with _client(tmp_path / "pki", scraper.cert, scraper.key).wrap_socket(raw, server_hostname="127.0.0.1") as s:
                served = s.getpeercert(binary_form=True)
        assert served == ssl.PEM_cert_to_DER_cert(renewed.cert.read_text().split("-----END CERTIFICATE-----")[0]
                                                  + "-----END CERTIFICATE-----\n")
        assert b"spark_log_tls_probe 1.0" in _get(url, _client(tmp_path / "pki", scraper.cert, scraper.key))
    finally:
        metrics.stop()
    assert not (tmp_path / "metrics.port").exists() and not (tmp_path / "metrics.scheme").exists()


def test_bad_tls_files_are_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "cert.pem").write_text("not a certificate")
    (tmp_path / "key.pem").write_text("not a key")
    metrics = NodeMetrics()
    with pytest.raises(ssl.SSLError):
        metrics.start("127.0.0.1", 0, tmp_path, tls=MetricsTls(certfile=str(tmp_path / "cert.pem"),
                                                               keyfile=str(tmp_path / "key.pem"), cafile=None,
                                                               client_auth_required=False))
    assert not (tmp_path / "metrics.port").exists()
