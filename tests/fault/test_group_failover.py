"""Consumer groups against real broker processes and real member processes (issue 13).

One 3-broker cluster for the module (broker sessions of 2 s, so a killed coordinator's
partitions move quickly).  Members are ``tests/fault/group_member.py`` processes that
process (write down) every polled record, then commit it.

1. Three members over six partitions: after every membership change (three joins, a
   kill -9, a fourth join) the coordinator's assignment and what every live member says
   it owns converge to one live owner per partition; the killed member's partitions move
   within its session timeout + one heartbeat interval + a stated margin; with
   commit-after-processing no acknowledged record is skipped by the group (checked with
   ``tests/checkers/log_history.py``: no anomaly in the whole history, and no ``unseen``
   record when only the members' polls count).
2. A static member killed with kill -9 and restarted within its session timeout gets its
   partitions back; the group epoch and every other member's partitions do not change.
3. kill -9 of the group's coordinator broker keeps every committed offset, and a member
   goes on committing through the new coordinator.

Adds about 60 s (cluster start included).
"""
from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer
from spark_log.errors import SparkLogError
from tests.checkers.log_history import FinalRead, Op, Poll, Send, check
from tests.support.wait import wait_until

pytestmark = [pytest.mark.fault, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SESSION_MS = 3000
HEARTBEAT_MS = 1000  # the brokers' group_consumer_heartbeat_interval_ms (a third of the session here)
MARGIN_S = 3.0  # the coordinator's 100 ms session ticker, the survivors' next poll and reports,
                # and scheduling delay on a loaded 2-core machine
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    running = LocalCluster(tmp_path_factory.mktemp("groups-cluster"), brokers=3,
                           extra_config={"heartbeat_interval_ms": 200, "session_timeout_ms": 2000,
                                         "replica_lag_time_max_ms": 3000})
    try:
        running.up(timeout_s=60)
        yield running
    finally:
        running.down(timeout_s=15)


class Members:
    """Member processes and their output files."""

    def __init__(self, directory: Path, bootstrap: str, group: str, topic: str) -> None:
        self.directory, self.bootstrap, self.group, self.topic = directory, bootstrap, group, topic
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.files: dict[str, list[Path]] = {}

    def start(self, name: str, *, instance: str | None = None, session_ms: int = SESSION_MS) -> None:
        path = self.directory / f"{name}-{len(self.files.get(name, []))}.jsonl"
        self.files.setdefault(name, []).append(path)
        command = [sys.executable, "-m", "tests.fault.group_member", "--bootstrap", self.bootstrap, "--group",
                   self.group, "--topic", self.topic, "--out", str(path), "--session-ms", str(session_ms)]
        if instance:
            command += ["--instance", instance]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        log = open(self.directory / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        log.close()

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.send_signal(signal.SIGTERM)
        for name, proc in list(self.procs.items()):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            del self.procs[name]

    def lines(self, name: str, generation: int = -1) -> list[dict[str, Any]]:
        path = self.files[name][generation]
        if not path.exists():
            return []
        out: list[dict[str, Any]] = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:  # a line being written
                break
        return out

    def member_id(self, name: str) -> str | None:
        for line in self.lines(name):
            if "member_id" in line:
                return str(line["member_id"])
        return None

    def owned(self, name: str) -> tuple[tuple[str, int], ...] | None:
        last = None
        for line in self.lines(name):
            if "owned" in line:
                last = tuple((t, p) for t, p in line["owned"])
        return last

    def polls(self) -> list[Poll]:
        out = []
        for name, paths in self.files.items():
            for generation, path in enumerate(paths):
                consumer = f"{name}#{generation}"
                for line in self.lines(name, generation):
                    if "poll" not in line:
                        continue
                    fresh = set(line["fresh"])
                    by_partition: dict[int, list[tuple[int, bytes]]] = {}
                    for p, offset, value in line["poll"]:
                        by_partition.setdefault(p, []).append((offset, bytes.fromhex(value)))
                    for p, records in by_partition.items():
                        out.append(Poll(consumer, p, tuple(records), after_seek=p in fresh))
        return out

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            assert proc.poll() is None, f"member {name} exited with {proc.returncode}; see {self.directory / name}.log"


def converged(admin: Admin, members: Members, group: str, live: list[str]) -> str | None:
    """None once the coordinator is stable with one live owner per partition and every
    live member owns exactly what the coordinator says; else why not."""
    members.check_alive()
    ids = {members.member_id(name): name for name in live}
    if None in ids:
        return "a member has not started"
    d = admin.describe_group(group)
    if d.state != "Stable" or {m.member_id for m in d.members} != set(ids):
        return f"coordinator: {d.state}, members {sorted(m.member_id[:6] for m in d.members)}"
    owners: dict[tuple[str, int], str] = {}
    for m in d.members:
        for tp in m.assignment:
            assert tp not in owners, f"{tp} assigned to two members"
            owners[tp] = ids[m.member_id]
        if members.owned(ids[m.member_id]) != tuple(m.assignment):
            return f"{ids[m.member_id]} owns {members.owned(ids[m.member_id])}, coordinator says {m.assignment}"
    if len(owners) != PARTITIONS:
        return f"only {len(owners)} partitions owned"
    return None


class Sender:
    """Acked sends into the history, from a background thread."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.history: list[Op] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(bootstrap, topic), daemon=True)
        self.thread.start()

    def _run(self, bootstrap: str, topic: str) -> None:
        with Producer(bootstrap, acks="all", linger_ms=2) as producer:
            for n in itertools.count():
                if self.stop.is_set():
                    return
                value = f"v-{n}".encode()
                try:
                    partition, offset = producer.send(topic, value, key=str(n).encode()).result(timeout=30)
                    self.history.append(Send(partition, value, True, offset))
                except SparkLogError:
                    self.history.append(Send(-1, value, False, definite=False))
                self.stop.wait(0.004)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


def final_read(bootstrap: str, topic: str) -> list[FinalRead]:
    with Admin(bootstrap) as admin:
        ends = admin.list_offsets(topic, "latest")
    out = []
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in range(PARTITIONS)])
        records: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 60
        while any(consumer.position(topic, p) < ends[p] for p in range(PARTITIONS)) and time.monotonic() < deadline:
            for record in consumer.poll(0.5):
                records[record.partition].append((record.offset, record.value))
    for p in range(PARTITIONS):
        out.append(FinalRead(p, tuple(records[p])))
    return out


def test_members_converge_after_every_change_and_nothing_is_skipped(cluster: LocalCluster, tmp_path: Path) -> None:
    bootstrap, group, topic = cluster.bootstrap, "g-kill", "group-kill"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
        sender = Sender(bootstrap, topic)
        members = Members(tmp_path, bootstrap, group, topic)
        try:
            for name in ("m1", "m2", "m3"):
                members.start(name)
            wait_until(lambda: converged(admin, members, group, ["m1", "m2", "m3"]) is None, timeout=60,
                       message=lambda: f"three members: {converged(admin, members, group, ['m1', 'm2', 'm3'])}")
            killed_at = time.monotonic()
            members.kill("m2")
            wait_until(lambda: converged(admin, members, group, ["m1", "m3"]) is None, timeout=60,
                       message=lambda: f"after the kill: {converged(admin, members, group, ['m1', 'm3'])}")
            moved_s = time.monotonic() - killed_at
            bound_s = SESSION_MS / 1000 + HEARTBEAT_MS / 1000 + MARGIN_S
            print(f"the killed member's partitions moved after {moved_s:.2f} s (bound {bound_s:.1f} s)")
            assert moved_s <= bound_s, f"the killed member's partitions moved after {moved_s:.1f}s > {bound_s:.1f}s"
            members.start("m4")
            wait_until(lambda: converged(admin, members, group, ["m1", "m3", "m4"]) is None, timeout=60,
                       message=lambda: f"after m4 joined: {converged(admin, members, group, ['m1', 'm3', 'm4'])}")
            sender.finish()
            assert sum(isinstance(op, Send) and op.ok for op in sender.history) > 0
            wait_until(lambda: admin.describe_group(group).total_lag == 0 and all(
                p.committed_offset is not None for p in admin.describe_group(group).partitions.values()),
                timeout=60, message="the group never caught up")
        finally:
            sender.finish()
            members.stop_all()
    history: list[Op] = [*sender.history, *members.polls()]
    finals = final_read(bootstrap, topic)
    anomalies = check([*history, *finals])
    assert not anomalies, str(anomalies)
    skipped = check(history).of("unseen")  # without the final read: what no member ever polled
    assert not skipped, "records the group skipped: " + "; ".join(str(a) for a in skipped[:5])
    assert any(line.get("closed") for line in members.lines("m1"))


def test_static_member_killed_and_restarted_keeps_its_partitions(cluster: LocalCluster, tmp_path: Path) -> None:
    bootstrap, group, topic = cluster.bootstrap, "g-static", "group-static"
    session_ms = 20_000  # far longer than a restart: the old member must never expire here
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
        members = Members(tmp_path, bootstrap, group, topic)
        try:
            members.start("s1", instance="static-1", session_ms=session_ms)
            members.start("s2", instance="static-2", session_ms=session_ms)
            members.start("d3", session_ms=session_ms)
            names = ["s1", "s2", "d3"]
            wait_until(lambda: converged(admin, members, group, names) is None, timeout=60,
                       message=lambda: f"three members: {converged(admin, members, group, names)}")
            before = admin.describe_group(group)
            mine = members.owned("s1")
            others = {n: (members.owned(n), len(members.lines(n))) for n in ("s2", "d3")}
            killed_at = time.monotonic()
            members.kill("s1")
            members.start("s1", instance="static-1", session_ms=session_ms)
            wait_until(lambda: members.owned("s1") == mine, timeout=session_ms / 1000,
                       message=lambda: f"restarted s1 owns {members.owned('s1')}, had {mine}")
            assert time.monotonic() - killed_at < session_ms / 1000
            wait_until(lambda: converged(admin, members, group, names) is None, timeout=30,
                       message=lambda: f"after the restart: {converged(admin, members, group, names)}")
            after = admin.describe_group(group)
            assert after.group_epoch == before.group_epoch, "the restart caused a new target assignment"
            for name, (owned, count) in others.items():
                assert members.owned(name) == owned
                changes = [line for line in members.lines(name)[count:]
                           if "owned" in line and tuple((t, p) for t, p in line["owned"]) != owned]
                assert not changes, f"{name}'s partitions changed during the restart: {changes}"
        finally:
            members.stop_all()


def test_coordinator_kill9_keeps_committed_offsets(cluster: LocalCluster) -> None:
    bootstrap, group, topic = cluster.bootstrap, "g-coordinator", "group-coordinator"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
        with Producer(bootstrap) as producer:
            for n in range(600):
                producer.send(topic, f"r-{n}".encode(), key=str(n).encode())
            producer.flush()
        consumer = Consumer(bootstrap, group_id=group, session_timeout_ms=10_000, auto_offset_reset="earliest",
                            enable_auto_commit=False)
        try:
            consumer.subscribe([topic])
            seen = 0
            deadline = time.monotonic() + 60
            while seen < 600 and time.monotonic() < deadline:
                seen += len(consumer.poll(0.5))
            assert seen == 600
            consumer.commit(metadata="before the kill")
            committed = {tp: o.offset for tp, o in admin.list_group_offsets(group).items()}
            assert sum(committed.values()) == 600
            coordinator = admin.describe_group(group).coordinator_id
            node = next(n for n in cluster.nodes if n.node_id == coordinator)
            cluster.stop_node(node, kill=True)
            with Admin(",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes if n is not node)) as survivor:
                after = wait_until(lambda: survivor.list_group_offsets(group), timeout=60,
                                   message="the new coordinator never answered")
                assert {tp: o.offset for tp, o in after.items()} == committed
                assert {o.metadata for o in after.values()} == {"before the kill"}
                assert survivor.describe_group(group).coordinator_id != coordinator
                # the member goes on through the new coordinator
                consumer.commit({(topic, 0): committed[(topic, 0)]}, metadata="after the kill")
                assert survivor.list_group_offsets(group)[(topic, 0)].metadata == "after the kill"
        finally:
            consumer.close()
