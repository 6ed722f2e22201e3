"""``python -m jobs.spark_cluster start|status|stop`` as an operator (and the ``spark-log
spark-cluster`` CLI) runs it: subprocesses, the hosting application in the background."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.spark_cluster import control
from jobs.spark_cluster.layout import ClusterState, broker_dir
from spark_log import Admin, Consumer, Producer
from tests.jobs.procs import broker_pid, executor_of
from tests.support.wait import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.filterwarnings("ignore::FutureWarning")]

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    return subprocess.run([sys.executable, "-m", "jobs.spark_cluster", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_start_status_stop(tmp_path: Path) -> None:
    root = tmp_path / "hosted"
    try:
        started = _cli("start", "--master", "local-cluster[2,1,1024]", "--brokers", "2", "--controllers", "1",
                       "--data-dir", str(root), "--conf", "spark.executor.memory=512m",
                       "--broker-config", "num_io_threads=4", "--timeout", "280")
        assert started.returncode == 0, started.stderr[-3000:] + (root / "application.log").read_text()[-3000:]
        bootstrap = started.stdout.strip()
        assert bootstrap == (root / "bootstrap").read_text().strip() and len(bootstrap.split(",")) == 2
        for broker_id in (1, 2):
            pid = broker_pid(broker_dir(root, broker_id) / "node.toml")
            assert pid is not None and executor_of(pid) is not None

        status = _cli("status", "--data-dir", str(root))
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.startswith("state ready")
        assert "broker 1  " in status.stdout and "broker 2  " in status.stdout and "absent" not in status.stdout

        Admin(bootstrap).create_topic("cli-hosted", partitions=2)
        with Producer(bootstrap) as producer:
            producer.send("cli-hosted", b"hello", partition=1).result(timeout=60)
        with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([("cli-hosted", 1)])
            seen: list[bytes | None] = []

            def read() -> bool:
                seen.extend(r.value for r in consumer.poll(1.0))
                return bool(seen)

            wait_until(read, timeout=60, message="the record written through the hosted cluster was not read back")
            assert seen == [b"hello"] and consumer.poll(0.5) == []

        again = _cli("start", "--master", "local-cluster[2,1,1024]", "--brokers", "2", "--data-dir", str(root))
        assert again.returncode == 0 and again.stdout.strip() == bootstrap  # already running: same answer
    finally:
        stopped = _cli("stop", "--data-dir", str(root), timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    state = ClusterState.load(root)
    assert state is not None and state.state == "stopped" and not control.pid_alive(state.app_pid)
    assert broker_pid(broker_dir(root, 1) / "node.toml") is None
    assert broker_pid(broker_dir(root, 2) / "node.toml") is None
    after = _cli("status", "--data-dir", str(root))
    assert after.returncode == 1 and after.stdout.startswith("state stopped")
