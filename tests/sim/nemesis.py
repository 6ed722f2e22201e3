"""Seeded fault strategies and the scenario runner shared by the scenario and stateful tests.

A scenario: start the cluster; for ``fault_ms`` inject seeded faults of the allowed kinds
(network partitions in VOPR's three modes, asymmetric cuts, clogged links, leader
isolation, crash/restart with unflushed-tail loss, wiping an observer) while a client
proposes every ``propose_every_ms`` to whoever leads; then heal everything and require
liveness: within ``liveness_ms`` a proposal made after the heal is committed and
applied by every node.  Invariants run after every event (``invariants.py``); the end validates log
matching pairwise.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from brokers.raft.messages import Entry

from .cluster import Applied, SimCluster, SimNode, SimSettings
from .invariants import Invariants

__all__ = ["FAULTS", "Scenario", "Result", "run_scenario", "replay_command", "Nemesis"]

FAULTS = ("partition", "asymmetric", "clog", "isolate_leader", "crash", "heal", "wipe_observer")


def replay_command(nodeid: str, seed: int) -> str:
    return f".venv/bin/python -m pytest '{nodeid.split('[')[0]}' --sim-seed {seed} -q"


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    settings: SimSettings = field(default_factory=SimSettings)
    faults: tuple[str, ...] = FAULTS
    fault_ms: int = 400
    fault_every_ms: tuple[int, int] = (20, 80)
    liveness_ms: int = 1500
    propose_every_ms: int = 15
    drop_rate: tuple[float, float] = (0.0, 0.1)
    duplicate_rate: tuple[float, float] = (0.0, 0.05)
    delay_ms: tuple[int, int] = (1, 6)
    start_spread_ms: int = 0  # nodes start at seeded times in [0, start_spread_ms] (slow process starts)


@dataclass(slots=True)
class Result:
    cluster: SimCluster
    invariants: Invariants
    healed_at: int = 0
    live_at: int | None = None
    proposals: int = 0
    faults: list[str] = field(default_factory=list)


class Nemesis:
    """Applies one seeded fault at a time to ``cluster``."""

    def __init__(self, cluster: SimCluster, rng: random.Random, kinds: tuple[str, ...]) -> None:
        self.cluster = cluster
        self.rng = rng
        self.kinds = kinds
        self.log: list[str] = []

    def strike(self) -> None:
        kind = self.rng.choice(self.kinds)
        getattr(self, f"_{kind}")()

    def _partition(self) -> None:
        ids = self.cluster.all_ids
        mode = self.rng.choice(("isolate_single", "uniform_size", "uniform_partition"))
        if mode == "isolate_single":
            victim = self.rng.choice(ids)
            groups = [[victim], [n for n in ids if n != victim]]
        elif mode == "uniform_size":
            size = self.rng.randint(1, len(ids) - 1)
            left = self.rng.sample(ids, size)
            groups = [left, [n for n in ids if n not in left]]
        else:
            left = [n for n in ids if self.rng.random() < 0.5]
            groups = [left, [n for n in ids if n not in left]]
        self.cluster.network.heal()
        self.cluster.network.partition(groups)
        self.log.append(f"{self.cluster.clock.now_ms}: partition {mode} {groups}")

    def _asymmetric(self) -> None:
        ids = self.cluster.all_ids
        a, b = self.rng.sample(ids, 2)
        self.cluster.network.cut(a, b)
        self.log.append(f"{self.cluster.clock.now_ms}: cut {a}->{b}")

    def _clog(self) -> None:
        a, b = self.rng.sample(self.cluster.all_ids, 2)
        ms = self.rng.randint(20, 150)
        self.cluster.network.clog(a, b, ms)
        self.log.append(f"{self.cluster.clock.now_ms}: clog {a}->{b} +{ms}ms")

    def _isolate_leader(self) -> None:
        leaders = self.cluster.leaders()
        if leaders:
            victim = leaders[0].node_id
            self.cluster.network.isolate(victim, self.cluster.all_ids)
            self.log.append(f"{self.cluster.clock.now_ms}: isolate leader {victim}")

    def _crash(self) -> None:
        up = [n for n in self.cluster.nodes.values() if n.up]
        if len(up) <= 1:
            return
        victim = self.rng.choice(up)
        victim.crash()
        delay = self.rng.randint(10, 200)
        self.log.append(f"{self.cluster.clock.now_ms}: crash {victim.node_id}, restart in {delay}ms")
        self.cluster.scheduler.schedule(delay, f"restart{victim.node_id}", lambda: self._restart(victim))

    def _restart(self, node: SimNode) -> None:
        if not node.up:
            node.start()

    def _heal(self) -> None:
        self.cluster.network.heal()
        self.log.append(f"{self.cluster.clock.now_ms}: heal")

    def _wipe_observer(self) -> None:
        observers = [self.cluster.nodes[n] for n in self.cluster.observer_ids]
        if observers:
            victim = self.rng.choice(observers)
            if victim.up:
                victim.crash()
            victim.disk.wipe()
            self.cluster.invariants_forget(victim.node_id)
            victim.start()
            self.log.append(f"{self.cluster.clock.now_ms}: wipe observer {victim.node_id}")


class _LivenessProbe:
    """Done once EVERY node (voters and observers) applied a proposal made after the
    heal: a leader that commits with a majority while one follower is stuck (say, in a
    truncation loop) is not live enough."""

    def __init__(self, nodes: int) -> None:
        self.wanted: set[bytes] = set()
        self.reached: dict[bytes, set[int]] = {}
        self.nodes = nodes
        self.done = False

    def on_start(self, node: SimNode) -> None: ...
    def on_persisted(self, node: SimNode, ready: Any, flushed: list[Entry]) -> None: ...

    def on_apply(self, node: SimNode, entry: Entry) -> None:
        if entry.payload in self.wanted:
            reached = self.reached.setdefault(entry.payload, set())
            reached.add(node.node_id)
            self.done = self.done or len(reached) == self.nodes

    def on_restore(self, node: SimNode, end_offset: int, restored: list[Applied]) -> None:
        for _, _, payload in restored:
            if payload in self.wanted:
                reached = self.reached.setdefault(payload, set())
                reached.add(node.node_id)
                self.done = self.done or len(reached) == self.nodes


def run_scenario(seed: int, scenario: Scenario, replay: str) -> Result:
    rng = random.Random(f"{seed}:scenario")
    network = dict(
        min_delay_ms=scenario.delay_ms[0], max_delay_ms=rng.randint(*scenario.delay_ms),
        drop_rate=rng.uniform(*scenario.drop_rate), duplicate_rate=rng.uniform(*scenario.duplicate_rate),
    )
    cluster = SimCluster(seed, scenario.settings, network=network)
    invariants = Invariants(cluster, replay)
    probe = _LivenessProbe(len(cluster.nodes))
    cluster.listeners.append(probe)
    result = Result(cluster, invariants)
    nemesis = Nemesis(cluster, random.Random(f"{seed}:nemesis"), scenario.faults)
    client = random.Random(f"{seed}:client")
    healed = False

    def propose() -> None:
        cluster.scheduler.schedule(scenario.propose_every_ms, "propose", propose)
        leaders = cluster.leaders()
        if not leaders:
            return
        payload = b"p%d" % result.proposals
        if client.choice(leaders).propose(payload) is not None:
            result.proposals += 1
            if healed:
                probe.wanted.add(payload)

    def strike() -> None:
        if cluster.clock.now_ms < scenario.fault_ms:
            nemesis.strike()
            cluster.scheduler.schedule(rng.randint(*scenario.fault_every_ms), "fault", strike)

    if scenario.start_spread_ms:
        for node in cluster.nodes.values():
            cluster.scheduler.schedule(rng.randint(0, scenario.start_spread_ms), f"start{node.node_id}",
                                       lambda n=node: n.start() if not n.up else None)
    else:
        cluster.start()
    if scenario.faults:
        cluster.scheduler.schedule(rng.randint(*scenario.fault_every_ms), "fault", strike)
    cluster.scheduler.schedule(1, "propose", propose)
    cluster.scheduler.run_until(scenario.fault_ms)
    cluster.network.heal()
    for node in cluster.nodes.values():
        if not node.up:
            node.start()
    healed = True
    result.healed_at = cluster.clock.now_ms
    result.faults = nemesis.log
    deadline = result.healed_at + scenario.liveness_ms
    if not cluster.scheduler.run_until(deadline, stop=lambda: probe.done):
        invariants.fail(
            f"liveness: no proposal applied by every node within {scenario.liveness_ms}ms after healing at "
            f"{result.healed_at}ms "
            f"(leaders: {[n.node_id for n in cluster.leaders()]}, states: "
            f"{ {n: (node.core.state if node.core else None) for n, node in cluster.nodes.items()} }); "
            f"faults: {nemesis.log[-10:]}"
        )
    result.live_at = cluster.clock.now_ms
    invariants.validate_end()
    return result
