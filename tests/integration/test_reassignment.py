"""Partition reassignment (KIP-455) on a real 4-node cluster: grow RF, move under acks=all
writes, cancel, refusals, and the CLI.

The move test writes keyed records with acks=all while both partitions move from
replicas {a, b, c} to {b, c, d} (their leader is among the removed ones), records every
acknowledgement, and afterwards checks with ``tests.checkers.log_history`` that nothing
acknowledged was lost or moved, that every new replica's log on disk equals the final
read, and that the removed broker deleted its replica directory.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer
from spark_log.cli import main
from spark_log.errors import (
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)
from tests.checkers.log_history import FinalRead, Send, check
from tests.support.acked_writer import AckedWriter
from tests.support.replica_logs import read_replica, replica_dir
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

FAST = {"heartbeat_interval_ms": 200, "session_timeout_ms": 2000, "replica_lag_time_max_ms": 3000}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("reassign"), brokers=4, extra_config=FAST)
    try:
        cluster.up(timeout_s=60)
        yield cluster
    finally:
        cluster.down(timeout_s=15)


@pytest.fixture()
def admin(cluster4: LocalCluster) -> Iterator[Admin]:
    with Admin(cluster4.bootstrap) as client:
        yield client


def node_dir(cluster: LocalCluster, broker: int, topic: str, partition: int) -> Path:
    return replica_dir(cluster.node_dir(broker), topic, partition)


def settled(admin: Admin, topic: str, partition: int, target: list[int]) -> bool:
    p = admin.describe_topic(topic).partitions[partition]
    return list(p.replicas) == target and sorted(p.isr) == sorted(target) and p.leader in target \
        and not admin.list_partition_reassignments(topic)


def test_grow_replication_factor_1_to_3(cluster4: LocalCluster, admin: Admin, topic_name: str) -> None:
    (only,) = admin.create_topic(topic_name, partitions=1, replication_factor=1).partitions[0].replicas
    with Producer(cluster4.bootstrap, acks="all", linger_ms=2) as producer:
        acks = [producer.send(topic_name, f"v{i}".encode(), partition=0) for i in range(200)]
        expected = sorted((f.result(timeout=30)[1], f"v{i}".encode()) for i, f in enumerate(acks))
    others = [b for b in sorted(n.node_id for n in cluster4.nodes) if b != only][:2]
    target = [only, *others]
    result = admin.alter_partition_reassignments({(topic_name, 0): target}, wait=True, timeout_s=60)
    assert result[(topic_name, 0)].target == tuple(target)
    wait_until(lambda: settled(admin, topic_name, 0, target), timeout=30, message="describe shows the new replicas")
    wait_until(lambda: all(read_replica(node_dir(cluster4, b, topic_name, 0)) == expected for b in target),
               timeout=30, message="both new replicas copied the whole log")
    assert admin.describe_topic(topic_name).partitions[0].leader == only  # the leader stayed


def test_move_under_acks_all_writes_loses_nothing(cluster4: LocalCluster, admin: Admin, topic_name: str) -> None:
    brokers = sorted(n.node_id for n in cluster4.nodes)
    created = admin.create_topic(topic_name, partitions=2, replication_factor=3)
    moves: dict[tuple[str, int], list[int]] = {}
    removed: dict[int, int] = {}
    for index, info in created.partitions.items():
        spare = next(b for b in brokers if b not in info.replicas)
        moves[(topic_name, index)] = [*info.replicas[1:], spare]  # {a, b, c} -> {b, c, d}: a leads and goes
        removed[index] = info.replicas[0]
        assert info.leader == info.replicas[0]
    writer = AckedWriter(cluster4.bootstrap, topic_name)
    writer.thread.start()
    try:
        wait_until(lambda: writer.acked() > 100, timeout=30, message="first acknowledgements")
        started = admin.alter_partition_reassignments(moves)
        assert all(s.pending or s.target == tuple(moves[tp]) for tp, s in started.items())
        admin.wait_for_reassignments(list(moves), timeout_s=60)
        before = writer.acked()
        wait_until(lambda: writer.acked() > before + 100, timeout=30, message="writes go on after the move")
    finally:
        writer.stop.set()
        writer.thread.join(timeout=90)
    for (topic, index), target in moves.items():
        wait_until(lambda: settled(admin, topic, index, target), timeout=30,
                   message=f"{topic}-{index}: describe shows {target} and no pending reassignment")
    ends = admin.list_offsets(topic_name, "latest")
    finals: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    with Consumer(cluster4.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, 0), (topic_name, 1)])

        def read_all() -> bool:
            for r in consumer.poll(0.5):
                finals[r.partition].append((r.offset, r.value))
            return all(ends[p] == 0 or (finals[p] and finals[p][-1][0] >= ends[p] - 1) for p in finals)

        wait_until(read_all, timeout=60, message="final read reaches the end of both partitions")
    history = list(writer.history) + [FinalRead(p, tuple(recs)) for p, recs in finals.items()]
    anomalies = check(history, ignore_unseen=True)
    assert not anomalies, str(anomalies)
    assert sum(1 for op in history if isinstance(op, Send) and op.ok) > 200

    def new_replicas_hold_the_log() -> bool:
        return all(read_replica(node_dir(cluster4, b, topic_name, index)) == finals[index]
                   for (_, index), target in moves.items() for b in target)

    wait_until(new_replicas_hold_the_log, timeout=30, message="every new replica's log equals the final read")
    for index, gone in removed.items():
        wait_until(lambda: not node_dir(cluster4, gone, topic_name, index).exists(), timeout=30,
                   message=f"broker {gone} deleted its replica of {topic_name}-{index}")


def test_cancel_returns_to_the_original_replicas(cluster4: LocalCluster, admin: Admin, topic_name: str) -> None:
    info = admin.create_topic(topic_name, partitions=1, replication_factor=2).partitions[0]
    spare = next(n for n in cluster4.nodes if n.node_id not in info.replicas)
    cluster4.stop_node(spare)  # the added replica cannot catch up: the move stays pending
    try:
        target = [info.replicas[0], spare.node_id]
        admin.alter_partition_reassignments({(topic_name, 0): target})
        pending: dict = {}
        wait_until(lambda: pending.update(admin.list_partition_reassignments(topic_name)) or (topic_name, 0) in pending,
                   timeout=10, message="the move is listed as pending")
        assert pending[(topic_name, 0)].adding == (spare.node_id,)
        assert pending[(topic_name, 0)].removing == (info.replicas[1],)
        described = admin.describe_topic(topic_name, live=False).partitions[0]
        assert (described.adding_replicas, described.removing_replicas) == ((spare.node_id,), (info.replicas[1],))
        assert len(described.replicas) == 3 and sorted(described.isr) == sorted(info.replicas)
        assert not described.under_replicated, "a replica being added does not count until the move completes"
        cancelled = admin.alter_partition_reassignments({(topic_name, 0): None})[(topic_name, 0)]
        assert not cancelled.pending and sorted(cancelled.replicas) == sorted(info.replicas)
        wait_until(lambda: not admin.list_partition_reassignments(topic_name), timeout=10, message="no move pending")
        assert admin.alter_partition_reassignments({(topic_name, 0): None})[(topic_name, 0)] == cancelled  # no-op
        with Producer(cluster4.bootstrap, acks="all") as producer:
            assert producer.send(topic_name, b"still-served", partition=0).result(timeout=30)[0] == 0
    finally:
        cluster4.start_node(spare)
    cluster4.wait_healthy(timeout_s=60)
    wait_until(lambda: not node_dir(cluster4, spare.node_id, topic_name, 0).exists(), timeout=30,
               message="the restarted spare holds no replica of the cancelled move")


def test_refusals_are_typed(admin: Admin, topic_name: str) -> None:
    admin.create_topic(topic_name, partitions=1, replication_factor=1)
    tp = (topic_name, 0)
    with pytest.raises(InvalidRequestError, match="not registered"):
        admin.alter_partition_reassignments({tp: [1, 99]})
    with pytest.raises(InvalidRequestError, match="more than once"):
        admin.alter_partition_reassignments({tp: [1, 2, 1]})
    with pytest.raises(InvalidRequestError, match="use None to cancel"):
        admin.alter_partition_reassignments({tp: []})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.alter_partition_reassignments({(topic_name, 7): [1]})
    assert not admin.list_partition_reassignments(topic_name)  # nothing was changed


def _cli(*args: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOG_BOOTSTRAP=bootstrap)
    return subprocess.run([sys.executable, "-m", "spark_log.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=REPO)


def test_cli_reassign(cluster4: LocalCluster, admin: Admin, topic_name: str, capsys: pytest.CaptureFixture[str],
                      monkeypatch: pytest.MonkeyPatch) -> None:
    (only,) = admin.create_topic(topic_name, partitions=1, replication_factor=1).partitions[0].replicas
    with Producer(cluster4.bootstrap) as producer:
        for i in range(30):
            producer.send(topic_name, b"r%d" % i)
    other = next(n.node_id for n in cluster4.nodes if n.node_id != only)
    done = _cli("topics", "reassign", "--topic", topic_name, "--partition", "0", "--replicas", f"{other},{only}",
                "--wait", "--progress", bootstrap=cluster4.bootstrap)  # one end-to-end run as a process
    assert done.returncode == 0, done.stderr
    assert f"replicas [{other}, {only}]  (reassignment complete)" in done.stdout
    # the bar: 30 offsets copied to the one new replica + 1 once it joined the ISR, on stderr
    assert f"reassigning {topic_name}-0" in done.stderr and "31/31" in done.stderr and "100%" in done.stderr
    monkeypatch.setenv("SPARK_LOG_BOOTSTRAP", cluster4.bootstrap)
    assert main(["topics", "reassign", "--topic", topic_name, "--partition", "0", "--replicas", f"{other},{only}",
                 "--wait", "--no-progress"]) == 0
    assert "reassigning" not in capsys.readouterr().err
    assert main(["topics", "reassign", "--list", "--topic", topic_name]) == 0
    assert "no reassignment pending" in capsys.readouterr().out
    assert main(["topics", "reassign", "--topic", topic_name, "--partition", "0", "--replicas", "1,1"]) == 1
    err = capsys.readouterr().err
    assert "INVALID_REQUEST" in err and "more than once" in err
    assert main(["topics", "reassign", "--topic", topic_name, "--partition", "0"]) == 1
    assert "--replicas" in capsys.readouterr().err
    assert main(["topics", "reassign", "--topic", topic_name, "--partition", "0", "--replicas", f"{other},{only}",
                 "--progress"]) == 1
    assert "add --wait" in capsys.readouterr().err
    wait_until(lambda: list(admin.describe_topic(topic_name).partitions[0].replicas) == [other, only], timeout=10,
               message="describe shows the CLI's target")


def test_wait_reports_the_offsets_the_new_replicas_copied(cluster4: LocalCluster, admin: Admin,
                                                          topic_name: str) -> None:
    info = admin.create_topic(topic_name, partitions=1, replication_factor=1).partitions[0]
    with Producer(cluster4.bootstrap) as producer:
        for i in range(200):
            producer.send(topic_name, b"v%d" % i)
    spares = [n.node_id for n in cluster4.nodes if n.node_id not in info.replicas][:2]
    calls: list[tuple[int, int]] = []
    admin.alter_partition_reassignments({(topic_name, 0): [*spares, *info.replicas]}, wait=True, timeout_s=60,
                                        on_progress=lambda done, total: calls.append((done, total)))
    # two replicas added: (200 offsets + 1 for joining the ISR) each; measured at the first look
    assert calls and calls[0][1] == 2 * 201 and calls[-1] == (402, 402), calls
    assert all(0 <= done <= total for done, total in calls)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls), "progress never goes back"


@pytest.mark.slow
def test_replace_a_dead_leader_while_writes_go_on(cluster4: LocalCluster, admin: Admin, topic_name: str) -> None:
    """The usual reason to reassign: broker ``a`` died (kill -9, its leadership already moved
    within the ISR); its replica moves to the spare ``d`` while an acks=all producer writes.
    Nothing acknowledged is lost, every replica of the target holds the log, and the dead
    broker, once back, deletes its stray copy.  (Runs last: it restarts the killed node.)"""
    brokers = sorted(n.node_id for n in cluster4.nodes)
    info = admin.create_topic(topic_name, partitions=1, replication_factor=3).partitions[0]
    dead = info.replicas[0]
    target = [*info.replicas[1:], next(b for b in brokers if b not in info.replicas)]
    node = next(n for n in cluster4.nodes if n.node_id == dead)
    writer = AckedWriter(cluster4.bootstrap, topic_name)
    writer.thread.start()
    try:
        wait_until(lambda: writer.acked() > 50, timeout=30, message="first acknowledgements")
        cluster4.stop_node(node, kill=True)
        wait_until(lambda: admin.describe_topic(topic_name).partitions[0].leader not in (None, dead), timeout=30,
                   message=f"a new leader after killing {dead}")
        admin.alter_partition_reassignments({(topic_name, 0): target}, wait=True, timeout_s=60)
        wait_until(lambda: settled(admin, topic_name, 0, target), timeout=30, message=f"replicas {target}")
        before = writer.acked()
        wait_until(lambda: writer.acked() > before + 50, timeout=30, message="writes go on after the move")
    finally:
        writer.stop.set()
        writer.thread.join(timeout=90)
        cluster4.start_node(node)
    end = admin.list_offsets(topic_name, "latest")[0]
    final: list[tuple[int, bytes]] = []
    with Consumer(cluster4.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic_name, 0)])
        wait_until(lambda: final.extend((r.offset, r.value) for r in consumer.poll(0.5)) or len(final) >= end,
                   timeout=60, message="final read reaches the end")
    anomalies = check([*writer.history, FinalRead(0, tuple(final))], ignore_unseen=True)
    assert not anomalies, str(anomalies)
    wait_until(lambda: all(read_replica(node_dir(cluster4, b, topic_name, 0)) == final for b in target), timeout=30,
               message="every target replica's log equals the final read")
    cluster4.wait_healthy(timeout_s=60)
    wait_until(lambda: not node_dir(cluster4, dead, topic_name, 0).exists(), timeout=60,
               message=f"broker {dead}, back, deletes the stray replica it held when it died")
