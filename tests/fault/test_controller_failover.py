"""kill -9 the active controller in a loop while clients create topics (issue 3 section 4).

Three controller-only node processes on 127.0.0.1.  Three fake brokers registered from
the test process (``BrokerHeartbeater``) keep leases so that topics can be placed.  Two
client threads create topics without pause.  Each round kills the active controller
with SIGKILL, measures the time until a surviving voter reports itself active, and
restarts the killed node on the same data directory before the next round.

Asserted: after every kill a surviving voter becomes active within ``WORST_BOUND``
election timeouts (a liveness deadline that tolerates a loaded 2-core machine, not a
speed figure: how fast failover is belongs to ``bench/failover_bench.py``, which prints
it against the election timeout); afterwards every create that returned success is in
every node's image, the images agree, and no topic appears that no client asked for.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from brokers.controller.client import ControllerClient
from brokers.controller.heartbeater import BrokerHeartbeater
from spark_log.errors import SparkLogError
from tests.support.node_cluster import NodeCluster
from tests.support.wait import wait_until

pytestmark = [pytest.mark.fault, pytest.mark.slow]

ROUNDS = 3
WORST_BOUND = 30  # election timeouts: the liveness deadline of any single failover


class Creators:
    """Client threads that create uniquely named topics until stopped."""

    def __init__(self, addresses: list[str], threads: int = 2) -> None:
        self.addresses = addresses
        self.ok: list[str] = []
        self.attempted: set[str] = set()
        self.failures: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(k,), daemon=True) for k in range(threads)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def count(self) -> int:
        with self._lock:
            return len(self.ok)

    def _run(self, k: int) -> None:
        with ControllerClient(self.addresses, timeout_s=10.0, rpc_timeout_s=2.0) as client:
            n = 0
            while not self._stop.is_set():
                name = f"t{k}-{n}"
                n += 1
                with self._lock:
                    self.attempted.add(name)
                try:
                    client.create_topic(name, partitions=2, replication_factor=2)
                except SparkLogError as exc:
                    with self._lock:
                        self.failures[type(exc).__name__] += 1
                    continue
                with self._lock:
                    self.ok.append(name)


def test_kill_the_active_controller_in_a_loop(tmp_path: Path) -> None:
    with NodeCluster(tmp_path, size=3, roles=("controller",), session_timeout_ms=3000) as cluster:
        cluster.start_all()
        addresses = list(cluster.addresses.values())
        cluster.wait_for_active_controller()
        brokers = [
            BrokerHeartbeater(ControllerClient(addresses, timeout_s=1.0, rpc_timeout_s=0.5), broker_id=100 + b,
                              address=f"127.0.0.1:{20000 + b}", interval_ms=100)
            for b in range(3)
        ]
        creators = Creators(addresses)
        try:
            for broker in brokers:
                broker.start()
            wait_until(lambda: len(cluster.image(cluster.wait_for_active_controller()).live_brokers()) == 3,
                       timeout=20, message="fake brokers did not register")
            creators.start()
            failovers_ms: list[float] = []
            for round_ in range(ROUNDS):
                target = creators.count() + 5
                wait_until(lambda: creators.count() >= target, timeout=30,
                           message=lambda: f"round {round_}: creates stalled ({creators.failures})")
                leader = cluster.wait_for_active_controller()
                start = time.monotonic()
                cluster.kill(leader)
                cluster.wait_for_active_controller(exclude=leader,
                                                   timeout=WORST_BOUND * cluster.election_timeout_ms / 1000)
                failovers_ms.append((time.monotonic() - start) * 1000)
                cluster.start(leader)
                done = set(creators.ok)
                wait_until(lambda: done <= set(cluster.image(leader).topics), timeout=30,
                           message=f"round {round_}: restarted node {leader} did not catch up")
            target = creators.count() + 5
            wait_until(lambda: creators.count() >= target, timeout=30, message="creates stalled after the last round")
        finally:
            creators.stop()
            for broker in brokers:
                broker.stop()
                broker.client.close()

        created = set(creators.ok)
        assert len(created) == len(creators.ok), "a create succeeded twice"
        cluster.wait_for_images(lambda image: created <= set(image.topics))
        # One read of every image, all at the same offset, compared with itself: records keep
        # landing (the stopped fake brokers get fenced, moving leaders), so images read at
        # two moments may differ without any node being wrong.
        def converged() -> dict | None:
            snapshot = cluster.images()
            return snapshot if len({img.offset for img in snapshot.values()}) == 1 else None

        images = wait_until(converged, timeout=30, message="nodes did not converge on one metadata offset")
        topics = [img.topics for img in images.values()]
        assert all(t == topics[0] for t in topics), "nodes disagree on the topics"
        assert set(topics[0]) <= creators.attempted, "a topic appeared that no client created"
        election_ms = cluster.election_timeout_ms
        print(f"failover ms: {[round(f) for f in failovers_ms]} (election timeout {election_ms} ms); "
              f"{len(created)} creates ok, failures {dict(creators.failures)}")
