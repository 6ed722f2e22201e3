"""Broker Prometheus metrics (issue 18), scraped over HTTP from real broker processes.

- a produce and consume run: the per-topic counters match the records sent and read, the
  RPC counters and latency histograms move, the log size and group lag show up;
- transactions: each coordinator counts the transactions it started, committed, aborted and
  timed out, reports the open ones, the partition leader counts the markers it wrote and
  the last-stable-offset lag (HW - LSO) while a transaction is open;
- a follower killed: the leader's under-replicated gauge goes to 1, and back to 0 once the
  follower returns and catches up (own cluster, short ISR and session timeouts).
"""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer, errors
from tests.support.cluster import local_cluster
from tests.support.metrics import scrape, total, value
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

RECORDS = 500


def _urls(cluster: LocalCluster, *, alive_only: bool = True) -> list[str]:
    urls = []
    for node_id, _, _, alive in cluster.status():
        url = cluster.metrics_url(node_id)
        if url is not None and (alive or not alive_only):
            urls.append(url)
    return urls


def test_counters_match_a_produce_and_consume_run(cluster: LocalCluster, topic_name: str) -> None:
    urls = _urls(cluster)
    assert len(urls) == 3, "every node serves /metrics on the port in its metrics.port"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic_name, partitions=2, replication_factor=3)
    sent_bytes = 0
    with Producer(cluster.bootstrap, linger_ms=2) as producer:
        for i in range(RECORDS):
            value_bytes = f"record-{i:05d}".encode()
            sent_bytes += len(value_bytes)
            producer.send(topic_name, value_bytes, key=f"k{i % 13}")
            if i == RECORDS // 2:
                producer.flush()
                # mid-run: what is acknowledged so far is counted, and no more than was sent
                mid = total(urls, "spark_log_topic_records_in_total", topic=topic_name)
                assert 0 < mid <= i + 1
        producer.flush()
    assert total(urls, "spark_log_topic_records_in_total", topic=topic_name) == RECORDS
    assert total(urls, "spark_log_topic_bytes_in_total", topic=topic_name) > sent_bytes  # frames carry headers too
    assert total(urls, "spark_log_topic_records_out_total", topic=topic_name) == 0

    group = f"{topic_name}-g"
    read = 0
    with Consumer(cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False) as consumer:
        consumer.subscribe(topic_name)

        def drained() -> bool:
            nonlocal read
            read += len(consumer.poll(0.5))
            return read >= RECORDS

        wait_until(drained, timeout=60, interval=0, message=lambda: f"read {read} of {RECORDS}")
        mid_out = total(urls, "spark_log_topic_records_out_total", topic=topic_name)
        assert mid_out == RECORDS, "every record read was counted once, no more"
        consumer.commit()
    assert read == RECORDS

    samples = [scrape(url) for url in urls]
    assert sum(value(s, "spark_log_topic_bytes_out_total", topic=topic_name) for s in samples) > sent_bytes
    assert sum(value(s, "spark_log_rpc_requests_total", method="Broker/Produce") for s in samples) >= 1
    assert sum(value(s, "spark_log_rpc_latency_seconds_count", method="Broker/Fetch") for s in samples) >= 1
    # each of the 3 replicas of both partitions holds the data
    assert sum(value(s, "spark_log_log_size_bytes", topic=topic_name) for s in samples) > 3 * sent_bytes
    assert sum(value(s, "spark_log_log_segments", topic=topic_name) for s in samples) == 6
    leaders = sum(value(s, "spark_log_leader_partitions") for s in samples)
    assert leaders >= 2
    assert sum(value(s, "spark_log_controller_active") for s in samples) == 1
    assert sum(value(s, "spark_log_raft_role", role="leader") for s in samples) == 1
    # the group's coordinator reports its committed offsets and a lag of 0 once the commit applied
    wait_until(lambda: total(urls, "spark_log_group_committed_offset", group=group, topic=topic_name) == RECORDS,
               timeout=15, message="the committed offsets of the group are not in the coordinator's metrics")
    assert total(urls, "spark_log_group_lag", group=group, topic=topic_name) == 0


_TXN = ("spark_log_txn_started_total", "spark_log_txn_committed_total", "spark_log_txn_aborted_total",
        "spark_log_txn_timed_out_total")


def test_transaction_metrics(cluster: LocalCluster, topic_name: str) -> None:
    urls = {n.node_id: cluster.metrics_url(n.node_id) or "" for n in cluster.nodes}
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=3)
        leader = admin.describe_topic(topic_name, live=False).partitions[0].leader
    assert leader is not None
    before = {node: scrape(url) for node, url in urls.items()}
    expected: dict[int, list[int]] = {node: [0, 0, 0, 0] for node in urls}   # started, committed, aborted, timed out

    def add(node: int, *counts: int) -> None:
        expected[node] = [a + b for a, b in zip(expected[node], counts)]

    def coordinator(tid: str) -> int:
        with Admin(cluster.bootstrap) as admin:
            return int(admin.describe_transaction(tid)["coordinator_id"])  # type: ignore[call-overload]

    def delta(node: int, name: str, **labels: str) -> float:
        return value(scrape(urls[node]), name, **labels) - value(before[node], name, **labels)

    # one committed and one aborted transaction
    tid = f"m-{uuid.uuid4().hex[:8]}"
    with Producer(cluster.bootstrap, transactional_id=tid) as producer:
        producer.init_transactions()
        for commit in (True, False):
            producer.begin_transaction()
            producer.send(topic_name, b"x", key=b"k")
            producer.commit_transaction() if commit else producer.abort_transaction()
    add(coordinator(tid), 2, 1, 1, 0)

    # an open transaction: the coordinator reports it, the leader the offsets read_committed cannot read yet
    held = f"m-{uuid.uuid4().hex[:8]}"
    with Producer(cluster.bootstrap, transactional_id=held) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for _ in range(5):
            producer.send(topic_name, b"open", key=b"k")
        producer.flush()
        held_by = coordinator(held)
        lag = value(scrape(urls[leader]), "spark_log_partition_lso_lag", topic=topic_name, partition="0")
        assert lag == 5, "HW - LSO is the 5 records of the open transaction"
        open_now = scrape(urls[held_by])
        assert value(open_now, "spark_log_txn_open", state="Ongoing") >= 1
        assert value(open_now, "spark_log_txn_oldest_open_age_ms") >= 0
        assert value(open_now, "spark_log_txn_coordinator_partitions") >= 1
        producer.abort_transaction()
    add(held_by, 1, 0, 1, 0)
    assert value(scrape(urls[leader]), "spark_log_partition_lso_lag", topic=topic_name, partition="0") == 0

    # a transaction left open past its timeout: aborted by the coordinator
    late = f"m-{uuid.uuid4().hex[:8]}"
    with Producer(cluster.bootstrap, transactional_id=late, transaction_timeout_ms=1000) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic_name, b"late", key=b"k")
        producer.flush()
        late_by = coordinator(late)
        wait_until(lambda: delta(late_by, "spark_log_txn_timed_out_total") >= 1, timeout=20,
                   message="the coordinator did not count the timed-out transaction")
        with pytest.raises(errors.TransactionTimedOutError):
            producer.commit_transaction()
    add(late_by, 1, 0, 1, 1)

    def counted() -> dict[int, list[int]]:
        return {node: [int(delta(node, name)) for name in _TXN] for node in urls}

    wait_until(lambda: counted() == expected, timeout=15,
               message=lambda: f"transactions counted {counted()}, expected {expected}")
    # the leader of the one partition wrote one commit marker and three abort markers
    assert sum(delta(n, "spark_log_txn_markers_written_total", type="commit") for n in urls) == 1
    assert sum(delta(n, "spark_log_txn_markers_written_total", type="abort") for n in urls) == 3
    assert delta(leader, "spark_log_txn_markers_written_total") == 4


def test_under_replicated_gauge_follows_a_killed_follower(tmp_path: Path) -> None:
    fast = {"replica_lag_time_max_ms": 1500, "session_timeout_ms": 2000, "heartbeat_interval_ms": 200}
    with local_cluster(tmp_path, brokers=3, extra_config=fast) as cluster:
        topic = "urp"
        with Admin(cluster.bootstrap) as admin:
            admin.create_topic(topic, partitions=1, replication_factor=3)
            description = admin.describe_topic(topic)
        partition = description.partitions[0]
        leader = partition.leader
        urls = _urls(cluster)
        wait_until(lambda: total(urls, "spark_log_leader_partitions") >= 1, timeout=20,
                   message="the topic's leader does not report it")
        assert total(urls, "spark_log_under_replicated_partitions") == 0
        controller = next(int(n) for n in range(1, 4)
                          if value(scrape(cluster.metrics_url(n) or ""), "spark_log_controller_active") == 1)
        follower = next(r for r in partition.replicas if r not in (leader, controller))
        node = next(n for n in cluster.nodes if n.node_id == follower)
        with Producer(cluster.bootstrap, acks=1) as producer:
            producer.send(topic, b"before").result(timeout=30)

            cluster.stop_node(node, kill=True)
            live = [u for n, u in ((n.node_id, cluster.metrics_url(n.node_id)) for n in cluster.nodes)
                    if n != follower and u is not None]
            leader_url = cluster.metrics_url(leader) or ""
            wait_until(lambda: value(scrape(leader_url), "spark_log_under_replicated_partitions") == 1, timeout=30,
                       message="the leader did not report the partition under-replicated")
            assert value(scrape(leader_url), "spark_log_partition_under_replicated", topic=topic, partition="0") == 1
            assert value(scrape(leader_url), "spark_log_isr_shrinks_total") + sum(
                value(scrape(u), "spark_log_controller_fenced_brokers") for u in live) >= 1
            producer.send(topic, b"while-down").result(timeout=30)

            cluster.start_node(node)
            cluster.wait_healthy(timeout_s=60)
            wait_until(lambda: value(scrape(leader_url), "spark_log_under_replicated_partitions") == 0, timeout=60,
                       message="the partition stayed under-replicated after the follower returned")
            assert value(scrape(leader_url), "spark_log_partition_isr_size", topic=topic, partition="0") == 3
