"""Describe shows each partition's live replication state (issue 5), on real 3-node clusters.

``Admin.describe_topic`` asks every partition's leader (``Broker.DescribePartitions``) for its
high watermark and the log end offset of each replica; ``spark-log topics describe`` prints
them, with ``--under-replicated`` and ``--json``.  The values are checked against the
replicas' segment files on disk, the consumers' view (``list_offsets``) and what the
producers had acknowledged.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, PartitionDescription, Producer, TopicDescription
from spark_log._client import Cluster
from spark_log._live_state import live_states
from spark_log.errors import UnknownTopicOrPartitionError
from tests.support.replica_logs import read_replica, replica_dir
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
# A follower that stops fetching leaves the ISR after 1.5 s; a dead broker is fenced after 2 s.
FAST = {"heartbeat_interval_ms": 200, "session_timeout_ms": 2000, "replica_lag_time_max_ms": 1500}


def _cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOG_BOOTSTRAP=bootstrap)
    return subprocess.run([sys.executable, "-m", "spark_log.cli", "topics", "describe", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=REPO)


def _write(bootstrap: str, topic: str, count: int, *, partition: int | None = None, tag: str = "v") -> None:
    with Producer(bootstrap, acks="all", linger_ms=2) as producer:
        futures = [producer.send(topic, f"{tag}{i}".encode(), key=f"k{i % 7}".encode(), partition=partition)
                   for i in range(count)]
        for future in futures:
            future.result(timeout=60)


def _consistent(p: PartitionDescription, end: int) -> bool:
    """HW and every replica's LEO at ``end``, the ISR full."""
    return (p.high_watermark == end and p.log_end_offsets is not None
            and all(p.log_end_offsets.get(r) == end for r in p.replicas)
            and not p.under_replicated and not p.offline and set(p.isr) == set(p.replicas))


def test_after_acks_all_writes_every_replica_is_at_the_high_watermark(cluster: LocalCluster, bootstrap: str,
                                                                      topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=2, replication_factor=3)
        _write(bootstrap, topic_name, 300)
        ends = admin.list_offsets(topic_name, "latest")
        assert sum(ends.values()) == 300
        # acks=all returned, so every ISR member has fetched past the writes; the followers'
        # LEOs reach the leader with their next fetch
        def settled() -> TopicDescription | None:
            d = admin.describe_topic(topic_name)
            return d if all(_consistent(d.partitions[p], ends[p]) for p in ends) else None

        described = wait_until(settled, timeout=30, message=lambda: f"HW == LEO on every replica: "
                                                                    f"{admin.describe_topic(topic_name).partitions}")
    for index, p in described.partitions.items():
        assert p.log_start_offset == 0 and p.last_stable_offset == ends[index]
        assert list(p.log_end_offsets) == list(p.replicas)
        for replica in p.replicas:   # what each broker holds on disk is what the leader reports
            on_disk = read_replica(replica_dir(cluster.node_dir(replica), topic_name, index))
            assert [offset for offset, _ in on_disk] == list(range(ends[index]))

    table = _cli(bootstrap, topic_name)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if "PARTITION" in line)
    assert lines[header].split()[:6] == ["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "HW"]
    for index, p in described.partitions.items():
        row = lines[header + 1 + index].split()
        assert row[0] == str(index) and row[5] == str(ends[index])
        assert row[6:9] == [f"{r}:{ends[index]}" for r in p.replicas]
        assert "UNDER-REPLICATED" not in lines[header + 1 + index]
    answer = _cli(bootstrap, topic_name, "--json")
    assert answer.returncode == 0, answer.stderr
    parsed = json.loads(answer.stdout)
    assert parsed["name"] == topic_name and parsed["replication_factor"] == 3
    assert [(p["partition"], p["high_watermark"], p["under_replicated"]) for p in parsed["partitions"]] == [
        (0, ends[0], False), (1, ends[1], False)]
    assert parsed["partitions"][0]["log_end_offsets"] == {str(r): ends[0] for r in described.partitions[0].replicas}


def test_a_missing_topic_is_an_error_and_no_topic_needs_a_flag(bootstrap: str) -> None:
    with Admin(bootstrap) as admin:
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_topics(["no-such-topic-describe"])
    bare = _cli(bootstrap)
    assert bare.returncode == 1 and "--under-replicated" in bare.stderr and "Traceback" not in bare.stderr


def test_a_stale_view_is_refreshed_and_asked_again(bootstrap: str, topic_name: str) -> None:
    """``live_states`` given a view that names a follower as leader, or an old leader epoch:
    the follower answers NOT_LEADER / the leader answers in another epoch, so the view is
    described again and the real leader asked; answers only count in the view's epoch."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=2, replication_factor=3)
        _write(bootstrap, topic_name, 40, partition=0)
        current = admin.describe_topic(topic_name, live=False).partitions
        follower = next(r for r in current[0].replicas if r != current[0].leader)
        stale = {(topic_name, 0): dataclasses.replace(current[0], leader=follower),
                 (topic_name, 1): dataclasses.replace(current[1], leader_epoch=current[1].leader_epoch + 5)}
        asked: list[list[str]] = []

        def describe(names: Sequence[str]) -> dict[tuple[str, int], PartitionDescription]:
            asked.append(list(names))
            fresh = admin.describe_topic(topic_name, live=False).partitions
            return {(topic_name, i): p for i, p in fresh.items()}

        cluster = Cluster(bootstrap)
        try:
            states, views = live_states(cluster, stale, describe=describe, deadline_s=10)
        finally:
            cluster.close()
    assert asked and asked[0] == [topic_name]
    assert views[(topic_name, 0)] == current[0] and views[(topic_name, 1)] == current[1]
    assert states[(topic_name, 0)].leader == current[0].leader and states[(topic_name, 0)].high_watermark == 40
    assert states[(topic_name, 1)].leader_epoch == current[1].leader_epoch


def test_live_false_is_the_committed_view_only(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=3)
        committed = admin.describe_topic(topic_name, live=False).partitions[0]
        assert committed.high_watermark is None and committed.log_end_offsets is None
        live = admin.describe_topic(topic_name).partitions[0]
    assert live.high_watermark == 0 and live.log_start_offset == 0
    assert (live.leader, live.replicas) == (committed.leader, committed.replicas)


@pytest.fixture()
def fast_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """This module's own cluster (its nodes get killed), with fast ISR shrink and fencing."""
    cluster = LocalCluster(tmp_path / "cluster", brokers=3, extra_config=FAST)
    try:
        cluster.up(timeout_s=60)
        yield cluster
    finally:
        cluster.down(timeout_s=15)


@pytest.mark.slow
def test_a_killed_follower_shows_under_replicated_then_catches_up(fast_cluster: LocalCluster) -> None:
    cluster = fast_cluster
    bootstrap = cluster.bootstrap
    with Admin(bootstrap) as admin:
        solo = admin.create_topic("solo", partitions=3, replication_factor=1)   # one partition per broker
        topic = admin.create_topic("rf3", partitions=1, replication_factor=3).partitions[0]
        leader = topic.leader
        # the follower to kill is neither the leader nor the preferred leader, so leadership stays put
        victim = next(r for r in topic.replicas if r not in (leader, topic.replicas[0]))
        orphan = next(i for i, p in solo.partitions.items() if p.replicas == (victim,))
        _write(bootstrap, "rf3", 100, partition=0, tag="a")
        wait_until(lambda: _consistent(admin.describe_topic("rf3").partitions[0], 100), timeout=30,
                   message="every replica at 100 before the kill")

        cluster.stop_node(next(n for n in cluster.nodes if n.node_id == victim), kill=True)
        _write(bootstrap, "rf3", 50, partition=0, tag="b")     # acks=all completes once the ISR shrank

        def shrunk() -> PartitionDescription | None:
            p = admin.describe_topic("rf3").partitions[0]
            return p if p.under_replicated and victim not in p.isr and p.high_watermark == 150 else None

        after = wait_until(shrunk, timeout=30, message=f"broker {victim} leaves the ISR of rf3-0")
        assert after.leader == leader and not after.offline and after.log_end_offsets is not None
        stuck = after.log_end_offsets[victim]
        assert stuck == 100
        assert all(after.log_end_offsets[r] == 150 for r in after.replicas if r != victim)

        _write(bootstrap, "rf3", 30, partition=0, tag="c")
        later = admin.describe_topic("rf3").partitions[0]
        assert later.high_watermark == 180 and later.log_end_offsets is not None
        assert later.log_end_offsets[victim] == stuck, "a dead follower's log end offset must not advance"
        assert all(later.log_end_offsets[r] == 180 for r in later.replicas if r != victim)

        wait_until(lambda: admin.describe_topic("solo").partitions[orphan].offline, timeout=30,
                   message=f"solo-{orphan} (only on broker {victim}) goes offline once {victim} is fenced")
        listed = _cli(bootstrap, "--under-replicated", "--json")
        assert listed.returncode == 0, listed.stderr
        rows = {(r["topic"], r["partition"]): r for r in json.loads(listed.stdout)}
        assert rows[("rf3", 0)]["under_replicated"] and not rows[("rf3", 0)]["offline"]
        assert rows[("solo", orphan)]["offline"] and rows[("solo", orphan)]["high_watermark"] is None
        assert set(rows) == {("rf3", 0), ("solo", orphan)}, "healthy partitions are not listed"
        table = _cli(bootstrap, "--under-replicated")
        assert table.returncode == 0
        marked = {line.split()[0] + "-" + line.split()[1]: line for line in table.stdout.splitlines()[1:]}
        assert "UNDER-REPLICATED" in marked["rf3-0"] and "OFFLINE" in marked[f"solo-{orphan}"]

        cluster.start_node(next(n for n in cluster.nodes if n.node_id == victim))
        cluster.wait_healthy(timeout_s=45)   # raises at once if the restarted node exits
        wait_until(lambda: _consistent(admin.describe_topic("rf3").partitions[0], 180), timeout=45,
                   message=lambda: f"broker {victim} catches up to 180 and rejoins the ISR: "
                                   f"{admin.describe_topic('rf3').partitions[0]}")
        wait_until(lambda: not admin.under_replicated_partitions(), timeout=45,
                   message=lambda: f"nothing under-replicated: {admin.under_replicated_partitions()}")
        healthy = _cli(bootstrap, "--under-replicated", "--json")
        assert healthy.returncode == 0 and json.loads(healthy.stdout) == []

        # A leader that cannot be reached: describe still answers, without live fields for it.
        # SIGSTOP a follower, then kill -9 the leader: the one node left has no quorum, so its
        # metadata keeps naming the dead leader (no fencing can be committed meanwhile).
        leader = admin.describe_topic("rf3").partitions[0].leader
        stopped = next(n for n in cluster.nodes if n.node_id != leader)
        alone = next(n for n in cluster.nodes if n.node_id not in (leader, stopped.node_id))
        os.kill(stopped.pid, signal.SIGSTOP)
        try:
            cluster.stop_node(next(n for n in cluster.nodes if n.node_id == leader), kill=True)
            # fresh clients: one that learnt every broker's address would try the stopped one
            # first for its next call (Cluster.call_any) and wait out the request timeout
            with Admin(f"127.0.0.1:{alone.port}") as last:
                committed = last.describe_topic("rf3", live=False).partitions[0]
            with Admin(f"127.0.0.1:{alone.port}") as last:
                p = last.describe_topic("rf3").partitions[0]
            assert p.leader == leader and not p.offline, "no quorum: the metadata still names the dead leader"
            assert p.high_watermark is None and p.log_end_offsets is None and p.log_start_offset is None
            assert p == committed
        finally:
            os.kill(stopped.pid, signal.SIGCONT)
        with Admin(f"127.0.0.1:{alone.port},127.0.0.1:{stopped.port}") as survivors:
            def failed_over() -> PartitionDescription | None:
                q = survivors.describe_topic("rf3").partitions[0]
                return q if q.leader not in (None, leader) and q.high_watermark is not None else None

            moved = wait_until(failed_over, timeout=45, message="once the quorum is back, a new leader answers")
            assert moved.high_watermark is not None and moved.high_watermark >= 180, "acknowledged records lost"
            assert moved.log_end_offsets is not None and moved.log_end_offsets[moved.leader] >= 180
            assert moved.under_replicated and leader not in moved.isr
