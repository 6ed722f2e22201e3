"""Prometheus metrics of a node (issue 18): ``NodeMetrics`` serves ``/metrics`` from a
per-node ``CollectorRegistry`` (several nodes can share one process in tests).

- ``counters.BrokerCounters``: the few hot-path counters (records and bytes in and out per
  topic, storage errors), plain integers under one lock, exported at scrape time;
- ``rpc.RpcMetricsInterceptor``: requests, errors and latency of every RPC the node serves;
- ``collectors``: everything else read from the node's existing state when scraped
  (partitions, ISR, Raft, controller, groups, cleaner, quotas).

Metric names are listed in ``names.py``; ``conf/grafana-dashboard.json`` uses them.
"""
from .counters import BrokerCounters as BrokerCounters
from .rpc import RpcMetricsInterceptor as RpcMetricsInterceptor
from .server import NodeMetrics as NodeMetrics

__all__ = ["BrokerCounters", "NodeMetrics", "RpcMetricsInterceptor"]
