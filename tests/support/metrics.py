"""Scraping a node's Prometheus ``/metrics`` in tests.

    samples = scrape(url)                     # {(name, (("label", "v"), ...)): value}
    value(samples, "spark_log_topic_records_in_total", topic="t")
    total(cluster_urls, "spark_log_under_replicated_partitions")   # summed over nodes
"""
from __future__ import annotations

import ssl
import urllib.request
from typing import Iterable

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Samples", "scrape", "value", "total", "names"]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str, *, timeout: float = 5.0, context: ssl.SSLContext | None = None) -> Samples:
    """``url``'s samples; an https URL (a TLS cluster's) needs ``context`` (its CA, and a
    client certificate when the brokers ask for one)."""
    with urllib.request.urlopen(url, timeout=timeout, context=context) as answer:
        assert answer.status == 200
        assert answer.headers.get_content_type() == "text/plain"
        text = answer.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """Sum of ``name``'s samples whose labels include ``labels`` (0 when there are none)."""
    wanted = set(labels.items())
    return sum(v for (n, sample_labels), v in samples.items() if n == name and wanted <= set(sample_labels))


def total(urls: Iterable[str], name: str, **labels: str) -> float:
    """``value`` summed over a scrape of each of ``urls``."""
    return sum(value(scrape(url), name, **labels) for url in urls)


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}
