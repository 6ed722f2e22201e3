"""Producer and consumer counters (issue 18): ``metrics()`` as a dict, and the same values
in a Prometheus registry through ``register_metrics``."""
from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from spark_log import Admin, Consumer, Producer
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration


def test_client_counters_as_a_dict_and_in_a_registry(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=2)
    registry = CollectorRegistry()
    with Producer(bootstrap, linger_ms=50, batch_size=1 << 20, client_id="metrics-p") as producer:
        producer.register_metrics(registry)
        assert producer.metrics()["records_sent"] == 0
        for i in range(100):
            producer.send(topic_name, f"v{i}".encode(), partition=i % 2)
        producer.flush()
        sent = producer.metrics()
    assert sent["records_sent"] == 100 and sent["records_failed"] == 0
    assert sent["retries"] == 0 and sent["errors"] == 0
    assert 2 <= sent["batches"] <= 100 and sent["batch_records_total"] == 100
    assert sent["batch_records_max"] <= 100 and sent["batch_records_avg"] == 100 / sent["batches"]
    assert sent["batch_bytes_total"] > 0 and sent["requests"] >= 1
    with Consumer(bootstrap, auto_offset_reset="earliest", client_id="metrics-c") as consumer:
        consumer.register_metrics(registry)
        consumer.assign([(topic_name, 0), (topic_name, 1)])
        read: list[object] = []
        wait_until(lambda: read.extend(consumer.poll(0.5)) or len(read) >= 100, timeout=30, interval=0)
        got = consumer.metrics()
    assert got["records_consumed"] == 100 == len(read)
    assert got["polls"] >= 1 and got["fetch_requests"] >= 1 and got["bytes_consumed"] > 0
    text = generate_latest(registry).decode()
    assert 'spark_log_producer_records_sent_total{client_id="metrics-p"} 100.0' in text
    assert 'spark_log_consumer_records_consumed_total{client_id="metrics-c"} 100.0' in text
    assert 'spark_log_producer_batch_records_max{client_id="metrics-p"}' in text


def test_a_retry_is_counted(bootstrap: str, topic_name: str) -> None:
    """acks=all to a topic whose min.insync.replicas its one replica cannot meet is refused
    with a retriable NOT_ENOUGH_REPLICAS and retried until the setting is lowered."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=1, config={"min.insync.replicas": "2"})
        with Producer(bootstrap, linger_ms=0, delivery_timeout_ms=60_000) as producer:
            future = producer.send(topic_name, b"waits")
            wait_until(lambda: producer.metrics()["retries"] >= 1, timeout=20, message="no retry counted")
            admin.alter_configs(topic_name, set={"min.insync.replicas": "1"})
            future.result(timeout=30)
            values = producer.metrics()
    assert values["errors"] >= values["retries"] >= 1
    assert values["records_sent"] == 1 and values["records_failed"] == 0


def test_keyed_records_over_many_partitions_share_one_call_per_broker(bootstrap: str, topic_name: str) -> None:
    """Issue 19: the batches one flush (or one linger round) ships go in one Produce call per
    leader broker, whatever their partitions: 300 keyed records over 60 partitions of an
    RF=3 topic on 3 brokers take at most 2 calls per broker (the first record to a broker
    with nothing in flight goes at once, alone; the others wait for its answer, or the
    flush, and go together), and every record lands in its key's partition, readable in
    order."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=60, replication_factor=3)
    with Producer(bootstrap, linger_ms=60_000) as producer:
        futures = [producer.send(topic_name, f"v{i}".encode(), key=f"k{i % 100}") for i in range(300)]
        producer.flush()
        sent = producer.metrics()
        placed = [f.result(timeout=0) for f in futures]
    assert sent["records_sent"] == 300 and sent["records_failed"] == 0
    assert sent["batches"] >= 50 and sent["requests"] <= 6, sent
    by_key: dict[str, list[tuple[int, int]]] = {}
    for i, where in enumerate(placed):
        by_key.setdefault(f"k{i % 100}", []).append(where)
    for key, places in by_key.items():
        assert len({p for p, _ in places}) == 1, f"{key} went to several partitions: {places}"
        assert [o for _, o in places] == sorted(o for _, o in places)
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, p) for p in range(60)])
        read: list[object] = []
        wait_until(lambda: read.extend(consumer.poll(0.5)) or len(read) >= 300, timeout=30, interval=0)
    assert len(read) == 300
