"""A seeded simulation of the KIP-848 protocol on the pure coordinator: random joins,
leaves, deaths (session expiry), static restarts, subscription and partition-count
changes, and clients that act on answers late.

Safety, after every step: no partition has two owners at the coordinator (assigned or
pending revocation), and no two live clients consume one partition at the same time.
Liveness: once the changes stop and every live client keeps heartbeating, the group
converges (Stable, every subscribed partition owned by exactly one member, each client
consuming exactly its assignment) within a bounded number of heartbeat rounds.

The suite runs ``GROUP_SWEEP_SEEDS`` seeds (default 12, ~2 s); ``make group-sweep`` runs
2,000 (``GROUP_SWEEP_START=N`` begins at seed N).  A failure names its seed;
``GROUP_SWEEP_SEED=N`` replays one.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

import pytest

from brokers.groups.core import GroupShard
from brokers.groups.messages import JOIN, LEAVE, STATIC_LEAVE, Heartbeat
from brokers.groups.model import GroupConfig, GroupState, Subscription, TopicPartition
from spark_log.errors import FencedMemberEpochError

_START = int(os.environ.get("GROUP_SWEEP_START", "0"))
SEEDS = [int(os.environ["GROUP_SWEEP_SEED"])] if "GROUP_SWEEP_SEED" in os.environ else range(
    _START, _START + int(os.environ.get("GROUP_SWEEP_SEEDS", "12")))
SESSION_MS = 3000
TOPICS = ["a", "b", "c"]


@dataclass
class Client:
    """A consumer: what it consumes (``owned``), its epoch, and an answer it has not acted on yet."""

    member_id: str
    instance: str = ""
    topics: tuple[str, ...] = ("a",)
    epoch: int = JOIN
    owned: frozenset[TopicPartition] = frozenset()
    pending: frozenset[TopicPartition] | None = None  # the last assignment, not applied yet
    alive: bool = True
    history: list[str] = field(default_factory=list)


class Sim:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.shard = GroupShard(config=GroupConfig(min_session_timeout_ms=100))
        self.topics = {t: (f"id-{t}", self.rng.randint(1, 6)) for t in TOPICS}
        self.now = 0
        self.clients: dict[str, Client] = {}
        self.serial = 0

    def fail(self, text: str) -> str:
        return f"seed {self.seed} (replay: GROUP_SWEEP_SEED={self.seed}): {text}"

    def new_client(self, instance: str = "") -> Client:
        self.serial += 1
        client = Client(f"m{self.serial}", instance=instance, topics=tuple(sorted(self.rng.sample(TOPICS, 2))))
        self.clients[client.member_id] = client
        return client

    def act(self, client: Client) -> None:
        """Apply the last answer: revoke first, then take (a client never owns what it was not given)."""
        if client.pending is not None:
            client.owned = client.pending
            client.pending = None

    def heartbeat(self, client: Client, *, lazy: bool = False) -> None:
        if not lazy:
            self.act(client)
        hb = Heartbeat(group_id="g", member_id=client.member_id, member_epoch=client.epoch, instance_id=client.instance,
                       subscription=Subscription(client.topics), owned=client.owned, session_timeout_ms=SESSION_MS)
        try:
            outcome = self.shard.heartbeat(hb, self.now, self.topics)
        except FencedMemberEpochError:
            client.owned, client.pending, client.epoch = frozenset(), None, JOIN  # drops everything, rejoins
            return
        self.shard.finish(outcome, self.now)
        client.epoch = outcome.answer.member_epoch
        client.pending = outcome.answer.assignment  # acted on (revoke, then take) at its next poll

    def leave(self, client: Client, epoch: int) -> None:
        hb = Heartbeat(group_id="g", member_id=client.member_id, member_epoch=epoch, instance_id=client.instance)
        self.shard.finish(self.shard.heartbeat(hb, self.now, self.topics), self.now)
        client.alive = False
        client.owned = frozenset()

    def tick(self, advance_ms: int) -> None:
        self.now += advance_ms
        self.shard.finish(self.shard.tick(self.now), self.now)
        group = self.shard.group("g")
        members = set(group.members) if group is not None else set()
        for client in self.clients.values():
            if client.alive and client.epoch != JOIN and client.member_id not in members:
                client.alive = False  # expired: the process is gone as far as anyone can tell
                client.owned = frozenset()

    def check_safety(self) -> None:
        group = self.shard.group("g")
        if group is not None:
            seen: dict[TopicPartition, str] = {}
            for member in group.members.values():
                for tp in member.owns:
                    assert tp not in seen, self.fail(f"{tp} owned by {seen[tp]} and {member.member_id}")
                    seen[tp] = member.member_id
        consuming: dict[TopicPartition, str] = {}
        for client in self.clients.values():
            if not client.alive:
                continue
            for tp in client.owned:
                assert tp not in consuming, self.fail(f"{tp} consumed by {consuming[tp]} and {client.member_id}")
                consuming[tp] = client.member_id

    def step(self) -> None:
        live = [c for c in self.clients.values() if c.alive]
        roll = self.rng.random()
        if roll < 0.12 or not live:
            self.new_client(instance=f"i{self.serial}" if self.rng.random() < 0.3 else "")
        elif roll < 0.17:
            self.leave(self.rng.choice(live), LEAVE)
        elif roll < 0.22:  # a crash: it stops heartbeating; its session expires later
            victim = self.rng.choice(live)
            victim.alive = False
            victim.owned = frozenset()
        elif roll < 0.27:  # a static member restarts: a new process, the same instance id
            statics = [c for c in live if c.instance]
            if statics:
                old = self.rng.choice(statics)
                if self.rng.random() < 0.5:
                    self.leave(old, STATIC_LEAVE)
                else:
                    old.alive, old.owned = False, frozenset()
                restarted = self.new_client(instance=old.instance)
                restarted.topics = old.topics
        elif roll < 0.32:
            self.rng.choice(live).topics = tuple(sorted(self.rng.sample(TOPICS, self.rng.randint(1, 3))))
        elif roll < 0.35:  # a topic re-created with another partition count
            topic = self.rng.choice(TOPICS)
            self.topics[topic] = (f"id-{topic}-{self.serial}-{self.now}", self.rng.randint(1, 6))
        elif roll < 0.5:
            self.tick(self.rng.choice([100, 1000, 2500]))
        for client in [c for c in self.clients.values() if c.alive]:
            if self.rng.random() < 0.6:
                self.heartbeat(client, lazy=self.rng.random() < 0.3)
        self.check_safety()

    def converged(self) -> bool:
        group = self.shard.group("g")
        live = [c for c in self.clients.values() if c.alive]
        if not live:
            return group is None or not group.members
        if group is None or group.state is not GroupState.STABLE or {c.member_id for c in live} != set(group.members):
            return False
        wanted = {(t, p) for c in live for t in c.topics if t in self.topics for p in range(self.topics[t][1])}
        owned = [tp for c in live for tp in c.owned]
        return (len(owned) == len(set(owned)) and set(owned) == wanted
                and all(c.owned == group.members[c.member_id].assigned for c in live))


@pytest.mark.parametrize("seed", SEEDS)
def test_random_membership_is_safe_and_converges(seed: int) -> None:
    sim = Sim(seed)
    for _ in range(80):
        sim.step()
    sim.tick(SESSION_MS + 1)  # the crashed ones expire
    for round_ in range(12):
        for client in [c for c in sim.clients.values() if c.alive]:
            sim.heartbeat(client)
            sim.check_safety()
        sim.tick(100)
        if sim.converged():
            break
    else:
        group = sim.shard.group("g")
        pytest.fail(sim.fail(f"not converged after 12 heartbeat rounds: {group}"))
    assert round_ <= 4, sim.fail(f"converged only after {round_ + 1} rounds")
