"""On-demand preferred-leader election (``Admin.elect_leaders``, ``spark-log topics
elect-leaders``) on a real 3-node cluster whose preferred leader is killed and restarted.

While the preferred replica is down the election reports why it cannot lead and changes
nothing; once it is back in the ISR (and, with the periodic election switched off, still
not leading) the election gives it the leadership.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Producer
from spark_log.cli import main
from spark_log.errors import InvalidRequestError, UnknownTopicOrPartitionError
from tests.support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# auto_leader_rebalance_enable off: only the on-demand election can move the leader back,
# so the test shows that it does (with the periodic one on, either could win the race).
FAST = {"heartbeat_interval_ms": 200, "session_timeout_ms": 2000, "replica_lag_time_max_ms": 3000,
        "auto_leader_rebalance_enable": False}
REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOG_BOOTSTRAP=bootstrap)
    return subprocess.run([sys.executable, "-m", "spark_log.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=REPO)


def test_elect_leaders_after_the_preferred_leader_returns(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = LocalCluster(tmp_path / "cluster", brokers=3, extra_config=FAST)
    try:
        cluster.up(timeout_s=60)
        topic = "elect"
        with Admin(cluster.bootstrap) as admin:
            created = admin.create_topic(topic, partitions=1, replication_factor=3).partitions[0]
            preferred = created.replicas[0]
            assert created.leader == preferred
            unchanged = admin.elect_leaders(topic)[(topic, 0)]
            assert (unchanged.leader, unchanged.ok) == (preferred, True)
            with Producer(cluster.bootstrap, acks="all") as producer:
                producer.send(topic, b"before", partition=0).result(timeout=30)
            node = next(n for n in cluster.nodes if n.node_id == preferred)
            cluster.stop_node(node, kill=True)
            wait_until(lambda: admin.describe_topic(topic).partitions[0].leader not in (None, preferred), timeout=30,
                       message="a new leader after killing the preferred one")
            wait_until(lambda: preferred not in admin.describe_topic(topic).partitions[0].isr, timeout=30,
                       message="the killed broker leaves the ISR")
            stand_in = admin.describe_topic(topic).partitions[0].leader
            refused = admin.elect_leaders(topic, [0])[(topic, 0)]
            assert not refused.ok and refused.leader == stand_in and refused.preferred == preferred
            assert refused.reason is not None and "not live" in refused.reason
            monkeypatch.setenv("SPARK_LOG_BOOTSTRAP", cluster.bootstrap)
            assert main(["topics", "elect-leaders", "--topic", topic, "--partition", "0"]) == 0  # in-process
            assert f"{topic}-0  leader {stand_in}  preferred {preferred}  (not moved:" in capsys.readouterr().out
            with Producer(cluster.bootstrap, acks="all") as producer:
                producer.send(topic, b"during", partition=0).result(timeout=30)
            cluster.start_node(node)
            wait_until(lambda: preferred in admin.describe_topic(topic).partitions[0].isr, timeout=45,
                       message="the restarted broker catches up and rejoins the ISR")
            assert admin.describe_topic(topic).partitions[0].leader == stand_in, "nothing moved it back on its own"
            moved = admin.elect_leaders()[(topic, 0)]
            assert (moved.leader, moved.ok, moved.reason) == (preferred, True, None)
            wait_until(lambda: admin.describe_topic(topic).partitions[0].leader == preferred, timeout=10,
                       message="describe shows the preferred leader")
            with Producer(cluster.bootstrap, acks="all") as producer:
                assert producer.send(topic, b"after", partition=0).result(timeout=30) == (0, 2)
            cli = _cli("topics", "elect-leaders", bootstrap=cluster.bootstrap)
            assert cli.returncode == 0 and f"{topic}-0  leader {preferred}  preferred {preferred}\n" in cli.stdout
            with pytest.raises(UnknownTopicOrPartitionError):
                admin.elect_leaders(topic, [5])
            with pytest.raises(InvalidRequestError, match="need a topic"):
                admin.elect_leaders(None, [0])
    finally:
        cluster.down(timeout_s=15)
