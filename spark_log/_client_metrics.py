"""``ClientMetrics``: a client's own counters (issue 18), as a dict and, when asked, as
Prometheus metrics.

Counters are plain integers under one lock, bumped once per batch, request or poll (never
per record).  ``snapshot()`` is what ``Producer.metrics()`` / ``Consumer.metrics()`` return;
``register(registry)`` adds a collector reading the same values at scrape time, each as
``spark_log_<kind>_<name>`` (counters get Prometheus' ``_total`` suffix), labelled with the
client id.  ``prometheus_client`` is imported only then.

Thread-safety: every method may be called from any thread.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Iterator, Mapping

__all__ = ["ClientMetrics"]


class ClientMetrics:
    def __init__(self, kind: str, counters: Iterable[str], *, client_id: str = "",
                 extra: Callable[[], Mapping[str, int]] = dict) -> None:
        """``extra()``: more counters kept elsewhere (the throttle gate's), read with the rest."""
        self.kind = kind
        self._extra = extra
        self.client_id = client_id
        self._lock = threading.Lock()
        self._counters: dict[str, int] = dict.fromkeys(counters, 0)
        self._batches = 0
        self._batch_records = 0
        self._batch_bytes = 0
        self._batch_records_max = 0
        self._batch_bytes_max = 0

    def add(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._counters[name] += amount

    def batch(self, records: int, nbytes: int) -> None:
        """One batch (a frame) of ``records`` records in ``nbytes`` bytes."""
        with self._lock:
            self._batches += 1
            self._batch_records += records
            self._batch_bytes += nbytes
            self._batch_records_max = max(self._batch_records_max, records)
            self._batch_bytes_max = max(self._batch_bytes_max, nbytes)

    def snapshot(self) -> dict[str, float]:
        """Every counter, and the batch figures: count, totals, averages and maxima."""
        with self._lock:
            out: dict[str, float] = dict(self._counters)
            batches = self._batches
            out.update(batches=batches, batch_records_total=self._batch_records, batch_bytes_total=self._batch_bytes,
                       batch_records_max=self._batch_records_max, batch_bytes_max=self._batch_bytes_max,
                       batch_records_avg=self._batch_records / batches if batches else 0.0,
                       batch_bytes_avg=self._batch_bytes / batches if batches else 0.0)
        out.update(self._extra())
        return out

    def register(self, registry: Any) -> Any:
        """Add these metrics to ``registry`` (a ``prometheus_client.CollectorRegistry``);
        returns the collector (``registry.unregister(collector)`` removes it)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

        metrics = self

        class _Collector:
            def collect(self) -> Iterator[Metric]:
                values = metrics.snapshot()
                for name, value in sorted(values.items()):
                    full = f"spark_log_{metrics.kind}_{name}"
                    family: Metric
                    if name.endswith(("_max", "_avg")):
                        family = GaugeMetricFamily(full, f"{metrics.kind} {name.replace('_', ' ')}", labels=["client_id"])
                    else:
                        family = CounterMetricFamily(full.removesuffix("_total"), f"{metrics.kind} {name.replace('_', ' ')}",
                                                     labels=["client_id"])
                    family.add_metric([metrics.client_id], value)
                    yield family

        collector = _Collector()
        registry.register(collector)
        return collector
