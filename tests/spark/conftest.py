"""Spark connector tests: one local SparkSession and one spark-log cluster per test session.

The cluster is the embedded local cluster (``python -m brokers.launcher.local up``: three
real node processes on 127.0.0.1, stopped with ``down`` at the end).
``SPARK_LOG_TEST_BOOTSTRAP=host:port,...`` reuses a running cluster instead.
Every test gets fresh topic names from ``topic_name``.
"""
from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.support.jvm import require_jvm


class _RealCluster:
    def __init__(self, bootstrap: str, data_dir: Path | None = None) -> None:
        self.bootstrap = bootstrap
        self.data_dir = data_dir

    def metrics_urls(self) -> list[str]:
        """The brokers' ``/metrics`` (none for a reused cluster: ``SPARK_LOG_TEST_BOOTSTRAP``)."""
        if self.data_dir is None:
            return []
        return [f"http://127.0.0.1:{int(port.read_text())}/metrics"
                for port in sorted(self.data_dir.glob("node-*/metrics.port"))]

    def admin(self) -> Any:
        from spark_log import Admin

        return Admin(self.bootstrap)


@pytest.fixture(scope="session")
def log_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The spark-log cluster the Spark tests read and write (``.bootstrap``, ``.admin()``)."""
    if os.environ.get("SPARK_LOG_TEST_BOOTSTRAP"):
        yield _RealCluster(os.environ["SPARK_LOG_TEST_BOOTSTRAP"])
        return
    data_dir = tmp_path_factory.mktemp("spark-log-cluster")
    launcher = [sys.executable, "-m", "brokers.launcher.local"]
    try:
        subprocess.run([*launcher, "up", "--brokers", "3", "--data-dir", str(data_dir)], check=True, timeout=120,
                       stdout=subprocess.DEVNULL)
        yield _RealCluster((data_dir / "bootstrap").read_text().strip(), data_dir)
    finally:
        subprocess.run([*launcher, "down", "--data-dir", str(data_dir)], timeout=120, stdout=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def spark(log_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The one local SparkSession of the test session, with the Python ``spark-log`` registered
    and, when it was built, the JVM implementation reachable by class name (``fmt``)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")])
    from connectors.session import local_session, unregistered_jvm_jar

    # the JVM connector's classes without its DataSourceRegister: reachable by class name while
    # ``spark-log`` stays the Python data source, so one session tests both
    jar = unregistered_jvm_jar(str(tmp_path_factory.mktemp("jvm-connector")))
    session = local_session(
        log_cluster.bootstrap,
        app_name="spark-log-tests",
        master="local[2]",
        connector="python",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.streaming.stopTimeout": "30s",
            "spark.python.worker.reuse": "true",
            **({"spark.jars": jar} if jar else {}),
        },
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(params=["python", "jvm"])
def fmt(request: pytest.FixtureRequest) -> str:
    """The format name of each implementation of spark-log: the Python data source, and the
    JVM one (``connectors/jvm``, skipped when its jar was not built: no JDK)."""
    if request.param == "python":
        return "spark-log"
    return require_jvm()



_counter = itertools.count()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[], str]:
    """Fresh topic names for one test: ``<test>-<pid>-<n>`` (unique on a reused cluster too)."""
    base = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:40]
    return lambda: f"{base}-{os.getpid()}-{next(_counter)}"


@pytest.fixture
def admin(log_cluster: Any) -> Iterator[Any]:
    client = log_cluster.admin()
    try:
        yield client
    finally:
        client.close()
