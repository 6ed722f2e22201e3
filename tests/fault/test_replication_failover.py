"""Kill -9 the leader of an RF=3 topic under acks=all producers; nothing acknowledged is lost.

Several producers write keyed records with acks=all and record every acknowledgement
(partition, offset); a consumer polls all along.  In a loop the test kills the leader of
partition 0 with SIGKILL, waits until writes succeed again on a new leader, and restarts
the killed node.  Preferred-leader election then gives every partition back to its first
replica.  After everything settles, ``tests.checkers.log_history`` checks the
history against the final read (no lost write, no duplicate, no inconsistent offset, no
poll that saw a record later lost), and every replica's log on disk is identical to it.

Parametrised with TLS: the same story (one kill round instead of three, for suite time) on
a cluster with mutual TLS on every listener and link (clients, replica fetches, Raft,
controller calls), as ``spark-log dev up --tls --mtls``.
"""
from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import pytest

from brokers.launcher.local import LocalCluster
from brokers.launcher.secure import DevSecurity
from spark_log import Admin, ClientSecurity, Consumer, Producer
from spark_log.errors import SparkLogError
from tests.checkers.log_history import FinalRead, Op, Poll, Send, check
from tests.support.replica_logs import read_replica, replica_dir
from tests.support.wait import wait_until

pytestmark = [pytest.mark.fault, pytest.mark.slow]

FAST_FAILOVER: dict[str, object] = {"heartbeat_interval_ms": 200, "session_timeout_ms": 2000, "replica_lag_time_max_ms": 3000}
PARTITIONS = 2


def start_fast_cluster(root: Path, attempts: int = 3, security: DevSecurity | None = None) -> LocalCluster:
    error: Exception | None = None
    for attempt in range(attempts):
        cluster = LocalCluster(root / f"attempt-{attempt}", brokers=3, extra_config=FAST_FAILOVER, security=security)
        try:
            cluster.up(timeout_s=45)
            return cluster
        except (TimeoutError, RuntimeError) as exc:
            error = exc
            cluster.down(timeout_s=10)
    assert error is not None
    raise error


class Workload:
    """Producers and one consumer recording a ``log_history`` history."""

    def __init__(self, bootstrap: str, topic: str, producers: int = 3, security: ClientSecurity | None = None) -> None:
        self.bootstrap, self.topic, self.security = bootstrap, topic, security
        self.history: list[Op] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.acked = 0
        self.threads = [threading.Thread(target=self._produce, args=(i,), daemon=True) for i in range(producers)]
        self.threads.append(threading.Thread(target=self._consume, daemon=True))

    def record(self, op: Op) -> None:
        with self.lock:
            self.history.append(op)
            if isinstance(op, Send) and op.ok:
                self.acked += 1

    def _produce(self, index: int) -> None:
        counter = itertools.count()
        with Producer(self.bootstrap, acks="all", linger_ms=2, delivery_timeout_ms=30_000,
                      security=self.security) as producer:
            # a bounded rate (10 records per 0.2 s per producer) keeps the history small
            # enough for the checker's quadratic poll-order pass
            while not self.stop.wait(0.2):
                batch = []
                for _ in range(10):
                    n = next(counter)
                    value = f"p{index}-{n}".encode()
                    batch.append((value, producer.send(self.topic, value, key=f"key-{n % 11}".encode())))
                for value, future in batch:
                    n = int(value.split(b"-")[1])
                    try:
                        partition, offset = future.result(timeout=60)
                        self.record(Send(partition, value, True, offset, producer=index, index=n))
                    except SparkLogError as exc:  # keyed: the partition is not known here
                        self.record(Send(None, value, False, definite=not exc.maybe_written, producer=index, index=n))
                    except TimeoutError:
                        self.record(Send(None, value, False, definite=False, producer=index, index=n))

    def _consume(self) -> None:
        with Consumer(self.bootstrap, auto_offset_reset="earliest", security=self.security) as consumer:
            consumer.assign([(self.topic, p) for p in range(PARTITIONS)])
            first = True
            while not self.stop.is_set():
                try:
                    records = consumer.poll(0.3)
                except SparkLogError:
                    continue
                by_partition: dict[int, list[tuple[int, bytes]]] = {}
                for r in records:
                    by_partition.setdefault(r.partition, []).append((r.offset, r.value))
                for partition, recs in by_partition.items():
                    self.record(Poll("c", partition, tuple(recs), after_seek=first))
                first = False if records else first

    def acks_now(self) -> int:
        with self.lock:
            return self.acked


def leader_of(admin: Admin, topic: str, partition: int) -> tuple[int | None, tuple[int, ...]]:
    info = admin.describe_topic(topic).partitions[partition]
    return info.leader, tuple(info.isr)


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "mtls"])
def test_kill_leader_loop_loses_no_acknowledged_record(tmp_path: Path, tls: bool) -> None:
    started = time.monotonic()
    cluster = start_fast_cluster(tmp_path, security=DevSecurity(tls=True, mtls=True) if tls else None)
    security = ClientSecurity.from_file(cluster.client_properties) if tls else None
    topic = "failover"
    try:
        with Admin(cluster.bootstrap, security=security) as admin:
            admin.create_topic(topic, partitions=PARTITIONS, replication_factor=3,
                               config={"min.insync.replicas": "2"})
            workload = Workload(cluster.bootstrap, topic, security=security)
            for thread in workload.threads:
                thread.start()
            wait_until(lambda: workload.acks_now() > 100, timeout=30, message="first acknowledgements")
            for round_ in range(1 if tls else 3):  # the TLS run: one kill round (suite time)
                leader, _ = leader_of(admin, topic, 0)
                assert leader is not None
                node = next(n for n in cluster.nodes if n.node_id == leader)
                cluster.stop_node(node, kill=True)
                wait_until(lambda: leader_of(admin, topic, 0)[0] not in (None, leader), timeout=30,
                           message=f"round {round_}: a new leader after killing {leader}")
                before = workload.acks_now()
                wait_until(lambda: workload.acks_now() > before + 60, timeout=30,
                           message=f"round {round_}: writes succeed again")
                cluster.start_node(node)
                wait_until(lambda: all(len(leader_of(admin, topic, p)[1]) == 3 for p in range(PARTITIONS)),
                           timeout=45, message=f"round {round_}: broker {leader} back in every ISR")

            def balanced() -> bool:
                parts = admin.describe_topic(topic).partitions.values()
                return all(p.leader == p.replicas[0] for p in parts)

            wait_until(balanced, timeout=30, message="preferred-leader election restores the leader spread")
            workload.stop.set()
            for thread in workload.threads:
                thread.join(timeout=90)
            # final read through a fresh consumer, up to the end of each partition
            ends = admin.list_offsets(topic, "latest")
        finals: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        with Consumer(cluster.bootstrap, auto_offset_reset="earliest", security=security) as consumer:
            consumer.assign([(topic, p) for p in range(PARTITIONS)])

            def read_all() -> bool:
                for r in consumer.poll(0.5):
                    finals[r.partition].append((r.offset, r.value))
                return all(len(finals[p]) and finals[p][-1][0] >= ends[p] - 1 or ends[p] == 0
                           for p in range(PARTITIONS))

            wait_until(read_all, timeout=60, message="final read reaches the end of every partition")
        history = list(workload.history) + [FinalRead(p, tuple(finals[p])) for p in range(PARTITIONS)]
        anomalies = check(history)
        assert not anomalies, str(anomalies)
        assert sum(1 for op in history if isinstance(op, Send) and op.ok) > 300

        def replicas_identical() -> bool:
            return all(read_replica(replica_dir(cluster.node_dir(n.node_id), topic, p)) == finals[p]
                       for n in cluster.nodes for p in range(PARTITIONS))

        wait_until(replicas_identical, timeout=30, message="every replica's log equals the final read")
    finally:
        cluster.down(timeout_s=15)
    assert time.monotonic() - started < 180
