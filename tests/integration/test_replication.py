"""Replication on a real 3-node cluster: followers copy the leader's log, acks=all, min.insync.replicas."""
from __future__ import annotations

import pytest

from spark_log import Admin, Consumer, Producer
from spark_log.errors import NotEnoughReplicasError
from tests.support.replica_logs import read_replica, replica_dir
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration


def test_rf3_followers_hold_the_leaders_log_and_consumers_see_it(cluster, bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        description = admin.create_topic(topic_name, partitions=2, replication_factor=3)
    assert all(len(p.replicas) == 3 for p in description.partitions.values())
    values = [f"v{i}".encode() for i in range(400)]
    with Producer(bootstrap, acks="all", linger_ms=2) as producer:
        futures = [producer.send(topic_name, v, key=f"k{i % 13}".encode()) for i, v in enumerate(values)]
        acks = {v: f.result(timeout=60) for v, f in zip(values, futures)}
    expected: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    for value, (partition, offset) in acks.items():
        expected[partition].append((offset, value))
    for partition in expected:
        expected[partition].sort()

    def replicas_match() -> bool:
        return all(read_replica(replica_dir(cluster.node_dir(node.node_id), topic_name, p)) == expected[p]
                   for node in cluster.nodes for p in expected)

    wait_until(replicas_match, timeout=30, message="every replica holds exactly the acknowledged records")
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, 0), (topic_name, 1)])
        seen: list = []
        wait_until(lambda: seen.extend(consumer.poll(0.5)) or len(seen) >= len(values), timeout=30,
                   message="consumer reads every record")
    assert sorted(r.value for r in seen) == sorted(values)
    # replica_fetch_transport = "auto" (the default): the followers fetched over the leaders' data
    # listeners in fetch sessions (REPLICA_FETCH_SESSION), not gRPC and not without a session
    logs = "".join((cluster.node_dir(node.node_id) / "node.log").read_text(errors="replace") for node in cluster.nodes)
    assert "over its data listener" in logs
    assert "refused REPLICA_FETCH_SESSION" not in logs and "fetching without a session" not in logs


def test_min_insync_above_replication_factor_refuses_acks_all(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=2, config={"min.insync.replicas": "3"})
    with Producer(bootstrap, acks="all", linger_ms=1, delivery_timeout_ms=2000) as producer:
        future = producer.send(topic_name, b"x", partition=0)
        with pytest.raises(NotEnoughReplicasError, match="min.insync.replicas=3"):
            future.result(timeout=30)
    with Producer(bootstrap, acks=1, linger_ms=1) as producer:
        assert producer.send(topic_name, b"y", partition=0).result(timeout=30) == (0, 0)


def test_a_producer_keeps_working_after_a_write_is_refused_for_good(bootstrap: str, topic_name: str) -> None:
    """A refused batch leaves a hole in its partition's sequences; the same Producer must go
    on (the partition's later sequences move to a fresh producer id from 0:
    ``spark_log/_sequence_reset.py``) instead of failing OUT_OF_ORDER_SEQUENCE."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=2, config={"min.insync.replicas": "3"})
        with Producer(bootstrap, acks="all", linger_ms=1, delivery_timeout_ms=2000) as producer:
            refused = producer.send(topic_name, b"refused", partition=0)
            with pytest.raises(NotEnoughReplicasError):
                refused.result(timeout=30)
            admin.alter_configs(topic_name, {"min.insync.replicas": "2"})
            accepted = wait_until(lambda: _try_send(producer, topic_name, b"after"), timeout=30,
                                  message="the same producer writes again once the ISR suffices")
            assert accepted == (0, 0)
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, 0)])
        seen: list = []
        wait_until(lambda: seen.extend(consumer.poll(0.5)) or seen, timeout=30, message="the accepted record")
    assert [r.value for r in seen] == [b"after"]


def _try_send(producer: Producer, topic: str, value: bytes) -> tuple[int, int] | None:
    try:
        return producer.send(topic, value, partition=0).result(timeout=30)
    except NotEnoughReplicasError:
        return None  # the leader has not applied the new config yet
