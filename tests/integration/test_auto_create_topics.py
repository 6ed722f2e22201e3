"""The brokers' topic defaults and automatic topic creation on real clusters
(``brokers/server/topic_defaults.py``): ``auto_create_topics``, ``default_partitions`` and
``default_replication_factor`` do what they say, and only where they say it.

Three clusters: two brokers with auto-creation on (3 partitions, replication factor 2 by
default), one broker as configured by default (auto-creation off), and one broker with
auto-creation on and a default replication factor it cannot meet.
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer
from spark_log.errors import InvalidReplicationFactorError, InvalidTopicError, UnknownTopicOrPartitionError
from tests.support.cluster import local_cluster
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
AUTO = {"auto_create_topics": True, "default_partitions": 3, "default_replication_factor": 2}


@pytest.fixture(scope="module")
def auto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("auto-create"), brokers=2, extra_config=AUTO) as running:
        yield running


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("no-auto-create"), brokers=1) as running:
        yield running


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("auto-create-short"), brokers=1,
                       extra_config={**AUTO, "default_replication_factor": 2}) as running:
        yield running


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _values(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    got: list[bytes] = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        wait_until(lambda: got.extend(r.value for r in consumer.poll(0.2)) or bool(got), timeout=30,
                   message=f"the record sent to {topic} was not read back")
    return got


def test_a_producer_creates_the_topic_it_names_with_the_broker_defaults(auto: LocalCluster) -> None:
    topic = _name("auto")
    with Admin(auto.bootstrap) as admin:
        assert topic not in admin.list_topics()
        with Producer(auto.bootstrap) as producer:
            partition, offset = producer.send(topic, b"first", partition=1).result(timeout=60)
        assert (partition, offset) == (1, 0)
        description = admin.describe_topic(topic, live=False)
        assert description.kind == "bytes"
        assert description.num_partitions == 3
        assert {len(p.replicas) for p in description.partitions.values()} == {2}
    assert _values(auto.bootstrap, topic, 3) == [b"first"]


def test_a_create_without_counts_takes_the_broker_defaults(auto: LocalCluster) -> None:
    topic, by_cli = _name("defaults"), _name("defaults-cli")
    with Admin(auto.bootstrap) as admin:
        created = admin.create_topic(topic)
        assert (created.num_partitions, created.replication_factor) == (3, 2)
        given = admin.create_topic(_name("given"), partitions=1, replication_factor=1)
        assert (given.num_partitions, given.replication_factor) == (1, 1)  # given counts win
        env = dict(os.environ, PYTHONPATH=str(REPO))
        run = subprocess.run([sys.executable, "-m", "spark_log.cli", "--bootstrap", auto.bootstrap,
                              "topics", "create", by_cli], capture_output=True, text=True, timeout=120, env=env,
                             cwd=REPO)
        assert run.returncode == 0, run.stderr
        described = admin.describe_topic(by_cli, live=False)
        assert (described.num_partitions, described.replication_factor) == (3, 2)


def test_readers_and_admins_never_create_a_topic(auto: LocalCluster) -> None:
    topic = _name("read-only")
    with Admin(auto.bootstrap) as admin:
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.list_offsets(topic, "latest")
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_topic(topic)
        with Consumer(auto.bootstrap) as consumer:
            with pytest.raises(UnknownTopicOrPartitionError):
                consumer.assign([(topic, 0)])
                consumer.poll(0.5)
        assert topic not in admin.list_topics()


def test_illegal_and_internal_names_are_not_created(auto: LocalCluster) -> None:
    with Producer(auto.bootstrap) as producer:
        for name in ("bad name!", "__consumer_offsets"):
            # unknown (not created), or the internal topic's typed refusal
            with pytest.raises((UnknownTopicOrPartitionError, InvalidTopicError)):
                producer.send(name, b"x", partition=0).result(timeout=30)
    with Admin(auto.bootstrap) as admin:
        assert "bad name!" not in admin.list_topics()


def test_without_auto_create_a_missing_topic_stays_missing(plain: LocalCluster) -> None:
    topic = _name("missing")
    with Producer(plain.bootstrap) as producer:
        with pytest.raises(UnknownTopicOrPartitionError):
            producer.send(topic, b"x", partition=0)
    with Admin(plain.bootstrap) as admin:
        assert topic not in admin.list_topics()
        created = admin.create_topic(_name("one"))  # this cluster's defaults: 1 and 1
        assert (created.num_partitions, created.replication_factor) == (1, 1)


def test_a_refused_creation_is_the_producers_typed_error(short: LocalCluster) -> None:
    topic = _name("refused")
    with Producer(short.bootstrap) as producer:
        with pytest.raises(InvalidReplicationFactorError, match="replication"):
            producer.send(topic, b"x", partition=0)  # 2 replicas asked of 1 live broker
    with Admin(short.bootstrap) as admin:
        assert topic not in admin.list_topics()
