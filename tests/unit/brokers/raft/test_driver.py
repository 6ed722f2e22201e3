"""RaftNode end to end in one process: 3 voters (and an observer) on 127.0.0.1 over gRPC.

KIP-595 sections "Leader election", "Fetch" and "Check quorum"; Raft paper section 5.
"""
from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import grpc
import pytest

from brokers.raft.demo_node import ListStateMachine
from brokers.raft.driver import RaftNode
from brokers.net.channels import SERVER_OPTIONS
from spark_log.config import RaftConfig
from spark_log.errors import NotControllerError
from tests.support.ports import free_ports
from tests.support.wait import wait_until

CONFIG = RaftConfig(tick_ms=20, election_ticks=15, heartbeat_ticks=2, fetch_wait_ticks=2, snapshot_every_entries=25)


class Cut:
    """A transport filter: links in ``cut`` (either direction) drop messages."""

    def __init__(self) -> None:
        self.isolated: set[int] = set()

    def __call__(self, src: int, dst: int) -> bool:
        return src not in self.isolated and dst not in self.isolated


class Cluster:
    def __init__(self, root: Path, ids: list[int], observers: list[int]) -> None:
        ports = free_ports(len(ids) + len(observers))
        self.root = root
        self.addresses = {i: f"127.0.0.1:{p}" for i, p in zip(ids + observers, ports)}
        self.voters = {i: self.addresses[i] for i in ids}
        self.observers = observers
        self.cut = Cut()
        self.nodes: dict[int, RaftNode] = {}
        self.machines: dict[int, ListStateMachine] = {}
        self.servers: dict[int, grpc.Server] = {}

    def start(self, node_id: int) -> RaftNode:
        machine = ListStateMachine()
        node = RaftNode(node_id=node_id, voters=self.voters, data_dir=self.root / f"n{node_id}", config=CONFIG,
                        state_machine=machine, observer=node_id in self.observers,
                        rng=random.Random(node_id), transport_filter=self.cut)
        server = grpc.server(ThreadPoolExecutor(max_workers=16), options=SERVER_OPTIONS)
        node.add_to_server(server)
        server.add_insecure_port(self.addresses[node_id])
        server.start()
        node.start()
        self.nodes[node_id], self.machines[node_id], self.servers[node_id] = node, machine, server
        return node

    def stop(self, node_id: int) -> None:
        self.nodes.pop(node_id).stop()
        self.servers.pop(node_id).stop(grace=None).wait()
        self.machines.pop(node_id)

    def leader(self, among: set[int] | None = None) -> RaftNode | None:
        live = [n for i, n in self.nodes.items() if n.is_leader and (among is None or i in among)]
        return live[0] if len(live) == 1 else None

    def wait_leader(self, among: set[int] | None = None) -> RaftNode:
        return wait_until(lambda: self.leader(among), timeout=20, message="no single leader")

    def propose(self, payload: bytes, among: set[int] | None = None) -> int:
        def attempt() -> int | None:
            leader = self.leader(among)
            if leader is None:
                return None
            try:
                offset = leader.propose([payload], timeout_s=2.0)
            except NotControllerError:
                return None
            # propose returns only once the entry is applied locally
            assert payload in self.machines[leader.node_id].values()
            return offset + 1
        return wait_until(attempt, timeout=20, message=f"could not commit {payload!r}") - 1


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, [1, 2, 3], [4])
    try:
        for node_id in (1, 2, 3, 4):
            c.start(node_id)
        yield c
    finally:
        for node_id in list(c.nodes):
            c.stop(node_id)


def test_elects_replicates_and_applies_everywhere(cluster: Cluster) -> None:
    """Paper 5.2/5.3, KIP-595: one leader; committed entries reach voters and observers."""
    cluster.wait_leader()
    values = [b"v%d" % i for i in range(40)]
    for value in values:
        cluster.propose(value)
    wait_until(lambda: all(m.values() == values for m in cluster.machines.values()),
               timeout=20, message="not every node applied every value")
    leader = cluster.wait_leader()
    wait_until(lambda: all(n.leader_id == leader.node_id for n in cluster.nodes.values()),
               timeout=10, message="not every node knows the leader")


def test_non_leader_propose_names_the_leader(cluster: Cluster) -> None:
    leader = cluster.wait_leader()
    follower = next(n for n in cluster.nodes.values() if n is not leader and n.node_id in cluster.voters)
    wait_until(lambda: follower.leader_id == leader.node_id, timeout=10, message="follower does not know leader")
    with pytest.raises(NotControllerError) as info:
        follower.propose([b"x"], timeout_s=2)
    assert info.value.leader_address == cluster.addresses[leader.node_id]


def test_survives_stop_and_restart_of_a_node(cluster: Cluster) -> None:
    """Restart recovers the log, quorum state and snapshot from disk (paper 5.1, KIP-630)."""
    leader = cluster.wait_leader()
    first = [b"a%d" % i for i in range(30)]
    for value in first:
        cluster.propose(value)
    victim = leader.node_id
    cluster.stop(victim)
    cluster.wait_leader()
    second = [b"b%d" % i for i in range(30)]
    for value in second:
        cluster.propose(value)
    cluster.start(victim)
    wait_until(lambda: all(m.values() == first + second for m in cluster.machines.values()),
               timeout=20, message="restarted node did not catch up")


def test_partitioned_leader_is_replaced_and_rejoins(cluster: Cluster) -> None:
    """Check-quorum (KIP-595): an isolated leader resigns; the majority elects a new one;
    after healing, the old leader follows and converges (paper 5.4)."""
    old = cluster.wait_leader()
    cluster.propose(b"before")
    cluster.cut.isolated.add(old.node_id)
    majority = {i for i in cluster.voters if i != old.node_id} | {4}
    new = cluster.wait_leader(majority)
    assert new.node_id != old.node_id
    wait_until(lambda: not old.is_leader, timeout=10, message="isolated leader did not resign")
    cluster.propose(b"during", among=majority)
    cluster.cut.isolated.clear()
    wait_until(lambda: all(m.values() == [b"before", b"during"] for m in cluster.machines.values()),
               timeout=20, message="did not converge after healing")


def test_answers_still_arrive_when_calls_give_up_waiting(tmp_path: Path) -> None:
    """A call that stops waiting (a slow, loaded process) must not swallow its answer: the
    answer goes out as a new call to the voter.  Regression: answers were handed to calls
    that had already returned, so a follower at a fixed offset never heard back."""
    cluster = Cluster(tmp_path, [1, 2, 3], [])
    try:
        for node_id in (1, 2, 3):
            cluster.start(node_id)._wait_answer_s = 0.0  # every call returns before its answer
        cluster.wait_leader()
        values = [b"w%d" % i for i in range(10)]
        for value in values:
            cluster.propose(value)
        wait_until(lambda: all(m.values() == values for m in cluster.machines.values()),
                   timeout=20, message="answers were lost")
    finally:
        for node_id in list(cluster.nodes):
            cluster.stop(node_id)
