"""Integration fixtures: one 3-node cluster (brokers + voters) per test session.

``cluster`` is session-scoped and shared by every integration test (and by other suites
that import it); tests create their own uniquely named topics (``topic_name``) so they
do not see each other's data.  Tests that stop or restart nodes start their own cluster
with ``tests.support.cluster.local_cluster``.
"""
from __future__ import annotations

import itertools
import uuid
from typing import Iterator

import pytest

from brokers.launcher.local import LocalCluster
from tests.support.cluster import local_cluster

_names = itertools.count()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("cluster"), brokers=3) as running:
        yield running


@pytest.fixture()
def bootstrap(cluster: LocalCluster) -> str:
    return cluster.bootstrap


@pytest.fixture()
def topic_name(request: pytest.FixtureRequest) -> str:
    base = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:40]
    return f"{base}-{next(_names)}-{uuid.uuid4().hex[:6]}"
