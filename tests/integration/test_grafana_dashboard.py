"""conf/grafana-dashboard.json (issue 18): valid JSON, and every metric name its queries use
appears in a live scrape of the cluster's brokers (after a little traffic: a produce, a
group consume with a commit, a compacted topic, a committed transaction), so the dashboard
does not go blank."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer
from tests.support.metrics import names, scrape
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

DASHBOARD = Path(__file__).resolve().parents[2] / "conf" / "grafana-dashboard.json"
METRIC = re.compile(r"\bspark_log_[a-z0-9_]+")


def _dashboard_metrics() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert exprs and all(panel["datasource"]["type"] == "prometheus" for panel in dashboard["panels"])
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    return {name for expr in exprs for name in METRIC.findall(expr)}


def test_every_dashboard_metric_is_in_a_live_scrape(cluster: LocalCluster, topic_name: str) -> None:
    used = _dashboard_metrics()
    assert len(used) >= 20
    assert {"spark_log_txn_started_total", "spark_log_txn_committed_total", "spark_log_txn_aborted_total",
            "spark_log_txn_timed_out_total", "spark_log_txn_open", "spark_log_txn_markers_written_total",
            "spark_log_partition_lso_lag"} <= used, "the transaction panels"
    compacted = f"{topic_name}-c"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=3)
        admin.create_topic(compacted, partitions=1, replication_factor=1, config={"cleanup.policy": "compact"})
    with Producer(cluster.bootstrap) as producer:
        for i in range(20):
            producer.send(topic_name, b"x", key=f"k{i}")
            producer.send(compacted, b"y", key=f"k{i % 3}")
        producer.flush()
    with Producer(cluster.bootstrap, transactional_id=f"{topic_name}-tx") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic_name, b"t", key=b"k")
        producer.commit_transaction()
    group = f"{topic_name}-g"
    with Consumer(cluster.bootstrap, group_id=group, auto_offset_reset="earliest") as consumer:
        consumer.subscribe(topic_name)
        read: list[object] = []
        wait_until(lambda: read.extend(consumer.poll(0.5)) or len(read) >= 20, timeout=30, interval=0)
        consumer.commit()
    urls = [u for u in (cluster.metrics_url(n.node_id) for n in cluster.nodes) if u is not None]

    def missing() -> set[str]:
        seen: set[str] = set()
        for url in urls:
            seen |= names(scrape(url))
        return used - seen

    wait_until(lambda: not missing(), timeout=20, message=lambda: f"not in any scrape: {sorted(missing())}")
