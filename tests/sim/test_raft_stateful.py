"""Hypothesis stateful testing over the simulation harness: shrinkable fault schedules.

Rules drive the same ``SimCluster`` as the seeded scenarios (run for a while, propose,
partition, cut a link, heal, crash, restart); the invariants of ``invariants.py`` run
after every simulated event, and teardown demands liveness once everything is healed
(Raft paper 5.2-5.4, KIP-595).  A failure is shrunk to a minimal sequence of rules,
which Hypothesis prints.  CI settings are bounded and ``derandomize=True``
(reproducible); set ``SPARK_LOG_HYPOTHESIS=dev`` to explore with random draws.
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from .cluster import SimCluster, SimSettings
from .invariants import Invariants

_DEV = os.environ.get("SPARK_LOG_HYPOTHESIS") == "dev"
NODES = st.integers(min_value=1, max_value=4)


class RaftMachine(RuleBasedStateMachine):
    cluster: SimCluster
    checker: Invariants

    @initialize(seed=st.integers(min_value=0, max_value=2**20))
    def start(self, seed: int) -> None:
        self.cluster = SimCluster(seed, SimSettings(voters=3, observers=1, snapshot_every=5),
                                  network={"drop_rate": 0.02, "duplicate_rate": 0.02})
        self.checker = Invariants(self.cluster, "see the falsifying example Hypothesis printed")
        self.proposed = 0
        self.cluster.start()

    @rule(ms=st.integers(min_value=1, max_value=150))
    def run(self, ms: int) -> None:
        self.cluster.scheduler.run_until(self.cluster.clock.now_ms + ms)

    @rule()
    def propose(self) -> None:
        leaders = self.cluster.leaders()
        if leaders and leaders[0].propose(b"h%d" % self.proposed) is not None:
            self.proposed += 1

    @rule(left=st.sets(NODES, min_size=1, max_size=3))
    def partition(self, left: set[int]) -> None:
        ids = self.cluster.all_ids
        self.cluster.network.partition([sorted(left), [n for n in ids if n not in left]])

    @rule(a=NODES, b=NODES)
    def cut(self, a: int, b: int) -> None:
        if a != b:
            self.cluster.network.cut(a, b)

    @rule()
    def heal(self) -> None:
        self.cluster.network.heal()

    @precondition(lambda self: sum(n.up for n in self.cluster.nodes.values()) > 2)
    @rule(node=NODES)
    def crash(self, node: int) -> None:
        if self.cluster.nodes[node].up:
            self.cluster.nodes[node].crash()

    @rule(node=NODES)
    def restart(self, node: int) -> None:
        if not self.cluster.nodes[node].up:
            self.cluster.nodes[node].start()

    def teardown(self) -> None:
        cluster = getattr(self, "cluster", None)
        if cluster is None:
            return
        cluster.network.heal()
        for node in cluster.nodes.values():
            if not node.up:
                node.start()
        committed = len(self.checker.committed)

        def progressed() -> bool:
            leaders = cluster.leaders()
            if leaders and leaders[0].inflight is None:
                leaders[0].propose(b"final")
            return len(self.checker.committed) > committed and any(
                b"final" == payload for node in cluster.nodes.values() for _, _, payload in node.applied)

        deadline = cluster.clock.now_ms + 2000
        while cluster.clock.now_ms < deadline and not progressed():
            cluster.scheduler.run_until(cluster.clock.now_ms + 10)
        if not progressed():
            self.checker.fail("liveness: nothing committed within 2s after healing everything")
        self.checker.validate_end()


RaftMachine.TestCase.settings = settings(
    max_examples=200 if _DEV else 30,
    stateful_step_count=40 if _DEV else 25,
    derandomize=not _DEV,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestRaftStateful = RaftMachine.TestCase
