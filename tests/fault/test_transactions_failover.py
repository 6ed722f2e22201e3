"""Transactions against real broker processes under kill -9 (issue 14), checked by the one
history checker (``tests/checkers/log_history.py``, ``check_transactions``: no aborted read,
no read of an open transaction, no lost committed write, all or nothing for a transaction
whose outcome the client does not know, no duplicate).

1. Two transactional producers commit or abort (seeded) transactions over three
   partitions while a ``read_committed`` consumer polls; the nemesis kills -9 the broker
   coordinating the first producer's transactions, then a partition leader, restarting
   each, and the producers carry on (a producer whose call failed closes, and a new one
   with the same transactional id takes over: it aborts what was left open).
2. A producer process is killed -9 in the middle of a transaction; a new producer with
   its transactional id takes over; the killed one's open transaction never becomes visible.

Adds about 60 s (cluster start included).
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Consumer, Producer
from spark_log.errors import SparkLogError
from tests.checkers.log_history import FinalRead, Op, Poll, Txn, check_transactions
from tests.support.wait import wait_until

pytestmark = [pytest.mark.fault, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    running = LocalCluster(tmp_path_factory.mktemp("txn-cluster"), brokers=3,
                           extra_config={"heartbeat_interval_ms": 200, "session_timeout_ms": 2000,
                                         "replica_lag_time_max_ms": 3000,
                                         "transaction_state_log_num_partitions": 3})
    try:
        running.up(timeout_s=60)
        yield running
    finally:
        running.down(timeout_s=15)


class History:
    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.lock = threading.Lock()

    def add(self, op: Op) -> None:
        with self.lock:
            self.ops.append(op)

    def committed(self) -> int:
        with self.lock:
            return sum(1 for op in self.ops if isinstance(op, Txn) and op.outcome == "committed")


class Writer(threading.Thread):
    """Transactions of two values per partition, committed (3 in 4) or aborted, until stopped."""

    def __init__(self, bootstrap: str, topic: str, transactional_id: str, history: History, seed: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.transactional_id, self.history = bootstrap, topic, transactional_id, history
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.errors: list[str] = []

    def _producer(self) -> Producer:
        deadline = time.monotonic() + 90
        while True:
            producer = Producer(self.bootstrap, transactional_id=self.transactional_id, delivery_timeout_ms=30_000,
                                request_timeout_ms=10_000)
            try:
                producer.init_transactions()
                return producer
            except SparkLogError as exc:
                producer.close(timeout=5)
                if time.monotonic() > deadline:
                    raise
                self.errors.append(f"init: {exc}")

    def run(self) -> None:
        producer = self._producer()
        txn = 0
        try:
            while not self.stop.is_set():
                values = tuple((p, f"{self.transactional_id}-{txn}-{p}-{i}".encode())
                               for p in range(PARTITIONS) for i in range(2))
                commit = self.rng.random() < 0.75
                called: float | None = None
                try:
                    producer.begin_transaction()
                    for partition, value in values:
                        producer.send(self.topic, value, partition=partition)
                    if commit:
                        called = time.monotonic()
                        producer.commit_transaction()
                        self.history.add(Txn((self.transactional_id, txn), values, "committed", called))
                    else:
                        producer.abort_transaction()
                        self.history.add(Txn((self.transactional_id, txn), values, "aborted"))
                except SparkLogError as exc:
                    self.errors.append(f"txn {txn}: {exc}")
                    # commit called and failed: unknown; otherwise the next producer's init aborts it
                    self.history.add(Txn((self.transactional_id, txn), values,
                                         "unknown" if called is not None else "aborted", called))
                    producer.close(timeout=5)
                    producer = self._producer()
                txn += 1
        finally:
            producer.close(timeout=5)


class Reader(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, history: History) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest")
        self.consumer.assign([(topic, p) for p in range(PARTITIONS)])
        self.topic, self.history = topic, history
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                try:
                    records = self.consumer.poll(0.2)
                except SparkLogError:
                    continue  # a leader moving; the next poll goes on from the same position
                at = time.monotonic()
                by_partition: dict[int, list[tuple[int, bytes]]] = {}
                for r in records:
                    by_partition.setdefault(r.partition, []).append((r.offset, r.value))
                for partition, got in by_partition.items():
                    self.history.add(Poll("reader", (self.topic, partition), tuple(got), at=at))
        finally:
            self.consumer.close()


def _final_reads(bootstrap: str, topic: str) -> list[FinalRead]:
    with Admin(bootstrap) as admin:
        wait_until(lambda: admin.list_offsets(topic, "latest", isolation_level="read_committed")
                   == admin.list_offsets(topic, "latest"), timeout=60, message="transactions left undecided")
        ends = admin.list_offsets(topic, "latest", isolation_level="read_committed")
    records: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in range(PARTITIONS)])

        def done() -> bool:
            for r in consumer.poll(0.2):
                records[r.partition].append((r.offset, r.value))
            return all(consumer.position(topic, p) >= ends[p] for p in range(PARTITIONS))

        wait_until(done, timeout=60, message="the final read did not reach the end")
    return [FinalRead((topic, p), tuple(records[p])) for p in range(PARTITIONS)]


def _keyed(history: list[Op], topic: str) -> list[Op]:
    """Txn writes keyed like the reads: (topic, partition)."""
    return [Txn(op.txn, tuple(((topic, p), v) for p, v in op.writes), op.outcome, op.commit_called)
            if isinstance(op, Txn) else op for op in history]


def test_broker_kills_lose_no_committed_transaction_and_show_no_aborted_one(cluster: LocalCluster) -> None:
    topic = "txn-broker-kills"
    bootstrap = cluster.bootstrap
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"})
    history = History()
    writers = [Writer(bootstrap, topic, f"w{k}-{os.getpid()}", history, seed=k) for k in range(2)]
    reader = Reader(bootstrap, topic, history)
    for thread in (*writers, reader):
        thread.start()
    try:
        with Admin(bootstrap) as admin:
            for round_ in range(2):
                floor = history.committed() + 4
                wait_until(lambda: history.committed() >= floor, timeout=90,
                           message=lambda: f"no progress before kill {round_}: {writers[0].errors[-3:]}")
                if round_ == 0:
                    victim_id = int(str(admin.describe_transaction(writers[0].transactional_id)["coordinator_id"]))
                else:
                    leader = admin.describe_topic(topic, live=False).partitions[0].leader
                    assert leader is not None
                    victim_id = leader
                victim = next(n for n in cluster.nodes if n.node_id == victim_id)
                cluster.stop_node(victim, kill=True)
                floor = history.committed() + 4
                wait_until(lambda: history.committed() >= floor, timeout=120,
                           message=lambda: f"no progress after kill {round_}: {writers[0].errors[-3:]}")
                cluster.start_node(victim)
                cluster.wait_healthy(timeout_s=60)
    finally:
        for thread in writers:
            thread.stop.set()
        for thread in writers:
            thread.join(timeout=120)
        reader.stop.set()
        reader.join(timeout=30)
    ops = _keyed(history.ops, topic) + list(_final_reads(bootstrap, topic))
    anomalies = check_transactions(ops)
    assert not anomalies, str(anomalies)
    outcomes = [op.outcome for op in ops if isinstance(op, Txn)]
    print(f"outcomes: {[(o, outcomes.count(o)) for o in ('committed', 'aborted', 'unknown')]}; "
          f"producer errors: {sum(len(w.errors) for w in writers)} (e.g. {[e for w in writers for e in w.errors][:3]})")
    assert outcomes.count("committed") >= 8 and outcomes.count("aborted") >= 1, outcomes


HELD_TXN = 3  # the transaction the killed producer holds open (three committed before it)


def test_a_producer_killed_mid_transaction_is_aborted_by_its_successor(cluster: LocalCluster, tmp_path: Path) -> None:
    topic = "txn-producer-kill"
    bootstrap = cluster.bootstrap
    transactional_id = f"killed-{os.getpid()}"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    out = tmp_path / "producer.jsonl"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(tmp_path / "producer.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "tests.fault.txn_producer", bootstrap, topic, str(PARTITIONS),
                                 transactional_id, str(out), str(HELD_TXN)], stdout=log, stderr=subprocess.STDOUT,
                                env=env, cwd=ROOT)

    def lines() -> list[dict[str, object]]:
        parsed = []
        for line in out.read_text().splitlines() if out.exists() else []:
            try:
                parsed.append(json.loads(line))
            except ValueError:
                break
        return parsed

    try:
        # some transactions committed, and one sent and flushed but not committed: the producer
        # holds there (txn_producer's HOLD) until it is killed
        wait_until(lambda: bool(lines()) and lines()[-1]["phase"] == "held", timeout=90,
                   message=lambda: (tmp_path / "producer.log").read_text()[-2000:])
        assert sum(1 for x in lines() if x["phase"] == "committed") == HELD_TXN
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    with Producer(bootstrap, transactional_id=transactional_id) as successor:
        successor.init_transactions()  # fences the dead producer and aborts its open transaction
    txns: dict[int, Txn] = {}
    for line in lines():
        k = int(str(line["txn"]))
        if line["phase"] == "begin":
            writes = tuple(((topic, int(p)), str(v).encode()) for p, v in line["values"])  # type: ignore[union-attr]
            txns[k] = Txn(k, writes, "aborted")
        elif line["phase"] == "commit-called":
            txns[k] = Txn(k, txns[k].writes, "unknown", 0.0)
        elif line["phase"] == "committed":
            txns[k] = Txn(k, txns[k].writes, "committed", 0.0)
    assert txns[HELD_TXN].outcome == "aborted" and all(t.outcome == "committed" for k, t in txns.items() if k != HELD_TXN)
    ops: list[Op] = [*txns.values(), *_final_reads(bootstrap, topic)]
    anomalies = check_transactions(ops)
    assert not anomalies, str(anomalies)


def test_a_new_coordinator_finishes_a_commit_its_predecessor_prepared(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The coordinator dies (kill -9, a named crash point) right after making a commit
    durable (PrepareCommit) and before writing any marker; the producer's commit goes on to
    the new coordinator, which finds the prepared transaction in its replay and writes every
    marker: the whole transaction becomes visible, exactly once."""
    once = tmp_path / "crashed"
    monkeypatch.setenv("SPARK_LOG_TXN_CRASH_AT", "txn-prepared")
    monkeypatch.setenv("SPARK_LOG_TXN_CRASH_ONCE", str(once))
    cluster = LocalCluster(tmp_path / "cluster", brokers=3,
                           extra_config={"heartbeat_interval_ms": 200, "session_timeout_ms": 2000,
                                         "transaction_state_log_num_partitions": 1})
    try:
        cluster.up(timeout_s=60)
        topic, bootstrap = "txn-prepared-crash", cluster.bootstrap
        with Admin(bootstrap) as admin:
            admin.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
            with Producer(bootstrap, transactional_id="survives-its-coordinator") as producer:
                producer.init_transactions()
                producer.begin_transaction()
                values = [f"v{p}-{i}".encode() for p in range(PARTITIONS) for i in range(5)]
                for n, value in enumerate(values):
                    producer.send(topic, value, partition=n // 5)
                before = admin.describe_transaction("survives-its-coordinator")["coordinator_id"]
                producer.commit_transaction()  # its first coordinator dies on the way
            assert once.read_text() == "txn-prepared\n"
            after = admin.describe_transaction("survives-its-coordinator")
            assert after["coordinator_id"] != before and after["state"] == "CompleteCommit"
        final = _final_reads(bootstrap, topic)
        assert sorted(v for read in final for _, v in read.records) == sorted(values)
    finally:
        cluster.down(timeout_s=15)
