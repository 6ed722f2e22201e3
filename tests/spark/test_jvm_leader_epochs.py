"""Client leader epochs (KIP-320) in the JVM connector (``connectors/jvm``, Cluster.java).

Leadership of a partition goes a -> b -> a (as ``tests/integration/test_client_leader_epochs.py``),
so broker a leads again in a newer leader epoch.  A JVM ``Cluster`` (``EpochProbe``, py4j, as a
query's driver holds one) that cached the first epoch sends it with its ListOffsets: broker a
fences it, the Cluster refreshes and answers the new end.  Told of an epoch newer than any
broker's (as a client that saw the new leader before asking a deposed one), neither its
ListOffsets nor a task's reader takes an answer: metadata answers are stale for it, brokers
refuse the epoch, and the call fails after its deadline instead of returning old offsets or
records.  A batch read through the JVM format reads every record after the moves.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest

from spark_log import Producer
from tests.support.jvm import require_jvm
from tests.support.leadership import lead
from tests.support.wait import wait_until

pytestmark = pytest.mark.spark


def test_jvm_cluster_follows_and_never_regresses_leader_epochs(spark: Any, log_cluster: Any, admin: Any,
                                                                topic_name: Callable[[], str]) -> None:
    from py4j.protocol import Py4JJavaError

    jvm_format = require_jvm()
    topic = topic_name()
    bootstrap = log_cluster.bootstrap
    a, b = admin.create_topic(topic, partitions=1, replication_factor=2).partitions[0].replicas
    first = admin.describe_topic(topic, live=False).partitions[0].leader_epoch
    with Producer(bootstrap, acks="all") as producer:
        for n in range(5):
            producer.send(topic, b"v%d" % n, partition=0).result(timeout=30)
        jvm = spark.sparkContext._jvm.io.sparklog.spark
        probe = jvm.EpochProbe(bootstrap)
        try:
            assert probe.latest(topic, 0, 30_000) == 5
            assert probe.knownEpoch(topic, 0) == probe.leaderEpoch(topic, 0) == first

            lead(admin, topic, b, [b, a])
            epoch = lead(admin, topic, a, [a, b])
            assert epoch >= first + 2
            for n in range(5, 10):
                producer.send(topic, b"v%d" % n, partition=0).result(timeout=30)

            # the probe still holds leader a in the first epoch: a fences it, a refresh finds the new one
            assert probe.leaderEpoch(topic, 0) == first
            assert probe.latest(topic, 0, 30_000) == 10
            assert probe.epochRefusals() >= 1, "the ListOffsets carried the old epoch and was fenced"
            assert probe.knownEpoch(topic, 0) == probe.leaderEpoch(topic, 0) == epoch

            # a task planned by a driver that knew an older epoch reads everything
            rows, _refusals = jvm.EpochProbe.read(bootstrap, topic, 0, 0, 10, first, 30_000)
            assert rows == 10

            # a Cluster that has seen a newer epoch than every broker: no answer is taken
            probe.seen(topic, 0, epoch + 1)
            with pytest.raises(Py4JJavaError) as refused:
                probe.latest(topic, 0, 1_500)
            assert "UnknownLeaderEpochError" in str(refused.value.java_exception), refused.value.java_exception
            probe.refresh(topic)
            assert probe.knownEpoch(topic, 0) == epoch + 1  # every broker's answer is stale for it
            assert probe.staleAnswers() >= 1
            with pytest.raises(Py4JJavaError) as timed_out:
                jvm.EpochProbe.read(bootstrap, topic, 0, 0, 10, epoch + 1, 1_500)
            # its own metadata answers name no leader that new (NotLeaderError), or the leader refuses the epoch
            why = str(timed_out.value.java_exception)
            assert "UnknownLeaderEpochError" in why or f"no leader known in leader epoch {epoch + 1}" in why, why
        finally:
            probe.close()

    df = spark.read.format(jvm_format).option("bootstrap", bootstrap).option("subscribe", topic).load()
    assert sorted(bytes(r.value) for r in df.collect()) == [b"v%d" % n for n in range(10)]


def test_a_topic_created_again_under_its_name_starts_its_epochs_over(spark: Any, log_cluster: Any, admin: Any,
                                                                     topic_name: Callable[[], str]) -> None:
    """Leader epochs are remembered per topic id (METADATA_V2): after a topic is deleted and
    created again under the same name (a new id, epochs from 0 again), a JVM Cluster that saw
    the old topic's higher epoch, and the JVM-wide metadata cache, take the new topic's
    metadata instead of calling every answer stale."""
    jvm_format = require_jvm()
    topic, bootstrap = topic_name(), log_cluster.bootstrap
    a, b = admin.create_topic(topic, partitions=1, replication_factor=2).partitions[0].replicas
    lead(admin, topic, b, [b, a])   # two leader changes: the old topic's epoch grows
    old_epoch = lead(admin, topic, a, [a, b])
    with Producer(bootstrap, acks="all") as producer:
        for n in range(3):
            producer.send(topic, b"old%d" % n, partition=0).result(timeout=30)

    def read() -> list[bytes]:
        df = spark.read.format(jvm_format).option("bootstrap", bootstrap).option("subscribe", topic).load()
        return sorted(bytes(r.value) for r in df.collect())

    assert read() == [b"old0", b"old1", b"old2"]   # the JVM-wide cache now holds the old topic's epoch
    probe = spark.sparkContext._jvm.io.sparklog.spark.EpochProbe(bootstrap)
    try:
        assert probe.latest(topic, 0, 30_000) == 3 and probe.knownEpoch(topic, 0) == old_epoch
        admin.delete_topic(topic)
        wait_until(lambda: topic not in admin.list_topics(), timeout=30, message="topic deleted")
        admin.create_topic(topic, partitions=1, replication_factor=2)
        new_epoch = admin.describe_topic(topic, live=False).partitions[0].leader_epoch
        assert new_epoch < old_epoch
        with Producer(bootstrap, acks="all") as producer:
            for n in range(2):
                producer.send(topic, b"new%d" % n, partition=0).result(timeout=30)
        assert probe.latest(topic, 0, 30_000) == 2
        assert probe.knownEpoch(topic, 0) == new_epoch
    finally:
        probe.close()
    assert read() == [b"new0", b"new1"]
