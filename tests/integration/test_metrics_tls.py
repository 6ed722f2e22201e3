"""/metrics on a secured broker (issue 18): a broker whose listener uses TLS serves its
metrics over HTTPS with its own certificate (and asks a scraper for a client certificate
when its listener asks callers for one: tests/unit/brokers/test_metrics_tls.py), so the
metrics are not the one plaintext door of a secured cluster; ``metrics_allow_plaintext =
true`` is the explicit way to keep plain HTTP, and does so.  On the shared SASL_SSL cluster
and one single-node TLS broker."""
from __future__ import annotations

import http.client
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from brokers.launcher.secure import DevSecurity
from tests.support.metrics import scrape, value
from tests.support.secure_cluster import SecuredCluster, secured_cluster

pytestmark = pytest.mark.integration


def _context(ca_file: str, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca_file)
    if cert is not None and key is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def _refused(url: str, context: ssl.SSLContext | None) -> BaseException:
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError, http.client.HTTPException)) as caught:
        with urllib.request.urlopen(url, timeout=10, context=context) as answer:
            answer.read()
    return caught.value


def test_a_tls_broker_serves_metrics_over_https_only(sasl_cluster: SecuredCluster) -> None:
    urls = [sasl_cluster.cluster.metrics_url(n.node_id) for n in sasl_cluster.cluster.nodes]
    assert all(u is not None and u.startswith("https://127.0.0.1:") for u in urls), urls
    for url in urls:
        assert value(scrape(url or "", context=_context(sasl_cluster.ca_file)), "spark_log_node_info") == 1
    url = urls[0] or ""
    _refused(url.replace("https://", "http://"), None)      # plain HTTP to the port: no metrics
    _refused(url, ssl.create_default_context())               # a scraper must verify the broker (its CA)
    assert value(scrape(url, context=_context(sasl_cluster.ca_file)), "spark_log_node_info") == 1  # still serving


def test_metrics_allow_plaintext_keeps_http_on_a_tls_broker(tmp_path: Path) -> None:
    with secured_cluster(tmp_path, DevSecurity(tls=True), brokers=1,
                         extra_config={"metrics_allow_plaintext": True}) as cluster:
        url = cluster.cluster.metrics_url(cluster.cluster.nodes[0].node_id)
        assert url is not None and url.startswith("http://127.0.0.1:"), url
        assert value(scrape(url), "spark_log_node_info") == 1
        log = (cluster.cluster.node_dir(cluster.cluster.nodes[0].node_id) / "node.log").read_text()
        assert "/metrics is plain HTTP on a SSL broker (metrics_allow_plaintext = true)" in log
