"""``BrokerCounters``: the broker's hot-path counters, cheap to bump.

Produce and fetch bump ``produced`` / ``fetched`` once per partition entry of a request
(not per record): one uncontended lock and a dict lookup.  The values are exported by
``collect()`` (a ``prometheus_client`` custom collector) when ``/metrics`` is scraped, so the
request path never touches ``prometheus_client``.

``storage_error`` is where a broker reports a failing disk (a full disk, an I/O error): it
logs the error (once per ``log_interval_s`` per partition and operation, so a full disk does
not flood the log) and counts every occurrence.

Thread-safety: every method may be called from any thread.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from spark_log.errors import SparkLogError

__all__ = ["BrokerCounters"]

log = logging.getLogger(__name__)

# per topic: records in, bytes in, records out, bytes out
_RECORDS_IN, _BYTES_IN, _RECORDS_OUT, _BYTES_OUT = range(4)


class BrokerCounters(Collector):
    def __init__(self, broker_id: int, *, log_interval_s: float = 10.0) -> None:
        self.broker_id = broker_id
        self._lock = threading.Lock()
        self._topics: dict[str, list[int]] = {}
        self._storage_errors: dict[str, int] = {}
        self._logged: dict[tuple[str, str, int], float] = {}
        self._log_interval_s = log_interval_s

    def _row(self, topic: str) -> list[int]:
        row = self._topics.get(topic)
        if row is None:
            row = self._topics[topic] = [0, 0, 0, 0]
        return row

    def produced(self, topic: str, records: int, nbytes: int) -> None:
        """``records`` appended by a Produce entry of ``nbytes`` bytes."""
        with self._lock:
            row = self._row(topic)
            row[_RECORDS_IN] += records
            row[_BYTES_IN] += nbytes

    def fetched(self, topic: str, records: int, nbytes: int) -> None:
        """A consumer fetch handed out ``records`` offsets in ``nbytes`` stored bytes."""
        with self._lock:
            row = self._row(topic)
            row[_RECORDS_OUT] += records
            row[_BYTES_OUT] += nbytes

    def storage_error(self, operation: str, topic: str, partition: int, error: BaseException) -> None:
        """Log (rate-limited per partition and operation) and count a storage error."""
        now = time.monotonic()
        key = (operation, topic, partition)
        with self._lock:
            self._storage_errors[operation] = self._storage_errors.get(operation, 0) + 1
            count = self._storage_errors[operation]
            last = self._logged.get(key)
            quiet = last is not None and now - last < self._log_interval_s
            if not quiet:
                self._logged[key] = now
        if not quiet:
            text = error.message if isinstance(error, SparkLogError) else str(error)
            log.error("storage error on broker %d (%s %s-%d): %s [%d %s storage errors so far]",
                      self.broker_id, operation, topic, partition, text, count, operation)

    def storage_errors(self) -> dict[str, int]:
        with self._lock:
            return dict(self._storage_errors)

    def topic_totals(self, topic: str) -> tuple[int, int, int, int]:
        """``(records in, bytes in, records out, bytes out)`` of ``topic`` so far."""
        with self._lock:
            row = self._topics.get(topic, [0, 0, 0, 0])
            return row[0], row[1], row[2], row[3]

    def collect(self) -> Iterator[CounterMetricFamily]:
        with self._lock:
            topics = {name: list(row) for name, row in self._topics.items()}
            storage = dict(self._storage_errors)
        families = [
            CounterMetricFamily("spark_log_topic_records_in", "Records appended by producers (Produce)", labels=["topic"]),
            CounterMetricFamily("spark_log_topic_bytes_in", "Bytes appended by producers (Produce)", labels=["topic"]),
            CounterMetricFamily("spark_log_topic_records_out", "Offsets handed to consumers (Fetch; records on "
                                "uncompacted logs)", labels=["topic"]),
            CounterMetricFamily("spark_log_topic_bytes_out", "Stored bytes handed to consumers (Fetch)", labels=["topic"]),
        ]
        for name, row in sorted(topics.items()):
            for index, family in enumerate(families):
                family.add_metric([name], row[index])
        yield from families
        errors = CounterMetricFamily("spark_log_storage_errors", "Storage errors (full disk, I/O error) by operation",
                                     labels=["operation"])
        for operation in ("produce", "fetch", "request"):
            errors.add_metric([operation], storage.get(operation, 0))
        for operation, count in sorted(storage.items()):
            if operation not in ("produce", "fetch", "request"):
                errors.add_metric([operation], count)
        yield errors
