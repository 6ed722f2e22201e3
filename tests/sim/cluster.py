"""``SimCluster``: N ``RaftCore`` nodes, each in a tiny in-memory shell, on a ``SimNetwork``.

The shell follows ``Ready``'s contract (``brokers/raft/core.py``): when a Ready carries
disk work (a hard state, or a ``flush_to_offset`` the log is not flushed to) it completes
after a seeded disk delay, as a separate event, and the node takes no other input
meanwhile (inputs queue).  A crash in between loses the unflushed entries
(``SimDisk.crash``), so "persist before send" is really exercised: the shell flushes only
when the Ready asks, and ``check_persisted`` then asserts on what the disk holds.
The state machine of a node is the list of entries it applied; its snapshot is that
list.  Every identity comes from the root seed: ``random.Random(f"{seed}:network")``,
``f"{seed}:node{n}:{incarnation}"``...
"""
from __future__ import annotations

import json
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from brokers.raft.core import RaftCore
from brokers.raft.messages import Entry, Message
from brokers.raft.ready import Ready
from spark_log.config import RaftConfig
from spark_log.errors import NotControllerError

from .clock import SimClock
from .disk import SimDisk
from .network import SimNetwork
from .scheduler import Scheduler

__all__ = ["SimCluster", "SimNode", "SimSettings"]

Applied = tuple[int, int, bytes]  # offset, epoch, payload


@dataclass(frozen=True, slots=True, kw_only=True)
class SimSettings:
    voters: int = 3
    observers: int = 0
    raft: RaftConfig = field(default_factory=lambda: RaftConfig(
        tick_ms=10, election_ticks=5, heartbeat_ticks=1, fetch_wait_ticks=2, fetch_max_entries=8, snapshot_every_entries=1))
    snapshot_every: int = 0  # 0: never snapshot
    disk_delay_ms: tuple[int, int] = (0, 3)
    tear_rate: float = 0.3


class SimNode:
    def __init__(self, cluster: "SimCluster", node_id: int, is_voter: bool) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.is_voter = is_voter
        self.disk = SimDisk(cluster.settings.tear_rate)
        self.incarnation = 0
        self.core: RaftCore | None = None
        self.applied: list[Applied] = []
        self.inflight: Ready | None = None
        self.queue: deque[Callable[[], None]] = deque()
        self.disk_rng = random.Random(f"{cluster.seed}:disk{node_id}")

    @property
    def up(self) -> bool:
        return self.core is not None

    def start(self) -> None:
        self.incarnation += 1
        self.applied = []
        self.inflight = None
        self.queue.clear()
        rng = random.Random(f"{self.cluster.seed}:node{self.node_id}:{self.incarnation}")
        self.core = RaftCore(node_id=self.node_id, voters=self.cluster.voter_ids, log=self.disk.log,
                             config=self.cluster.settings.raft, rng=rng, hard_state=self.disk.hard_state)
        self.cluster.on_start(self)
        self._pump()
        tick_ms = self.cluster.settings.raft.tick_ms
        incarnation = self.incarnation
        self.cluster.scheduler.schedule(rng.randint(1, tick_ms), f"tick{self.node_id}", lambda: self._tick(incarnation))

    def crash(self) -> None:
        self.core = None
        self.inflight = None
        self.queue.clear()
        self.disk.crash(self.disk_rng)

    # --- inputs ----------------------------------------------------------------------
    def _tick(self, incarnation: int) -> None:
        if self.core is None or incarnation != self.incarnation:
            return
        self.cluster.scheduler.schedule(self.cluster.settings.raft.tick_ms, f"tick{self.node_id}",
                                        lambda: self._tick(incarnation))
        self.input(lambda core: core.tick())

    def input(self, action: Callable[[RaftCore], Any]) -> None:
        if self.core is None:
            return
        core = self.core
        if self.inflight is not None:
            self.queue.append(lambda: action(core))
            return
        action(core)
        self._pump()

    def propose(self, payload: bytes) -> int | None:
        if self.core is None or self.inflight is not None or not self.core.is_leader:
            return None
        try:
            offset = self.core.propose([payload])
        except NotControllerError:
            return None
        self._pump()
        return offset

    # --- the shell loop --------------------------------------------------------------
    def _pump(self) -> None:
        core = self.core
        while core is not None and self.inflight is None and core.has_ready():
            ready = core.ready()
            self.inflight = ready
            if ready.must_persist:
                low, high = self.cluster.settings.disk_delay_ms
                incarnation = self.incarnation
                self.cluster.scheduler.schedule(self.disk_rng.randint(low, high), f"disk{self.node_id}",
                                                lambda: self._disk_done(ready, incarnation))
                return
            self._finish(ready, self.incarnation)
            core = self.core
        while core is not None and self.inflight is None and self.queue:
            self.queue.popleft()()
            self._pump()
            core = self.core

    def _disk_done(self, ready: Ready, incarnation: int) -> None:
        if self.core is None or incarnation != self.incarnation or self.inflight is not ready:
            return  # crashed while the disk was busy: this Ready never happened
        self._finish(ready, incarnation)
        self._pump()

    def _finish(self, ready: Ready, incarnation: int) -> None:
        core = self.core
        assert core is not None
        log = self.disk.log
        if ready.hard_state is not None:
            self.disk.persist_hard_state(ready.hard_state)
        durable_before = log.flushed_end_offset
        if ready.flush_to_offset is not None:
            log.flush()
        ready.check_persisted(log.flushed_end_offset, self.disk.hard_state)
        # Exactly the entries this flush made durable (a truncation lowers the flushed end).
        flushed = log.read(durable_before, log.flushed_end_offset - durable_before)
        self.cluster.on_persisted(self, ready, flushed)
        for message in ready.messages:
            self.cluster.network.send(message)
        if ready.snapshot is not None:
            restored = [(o, e, bytes.fromhex(p)) for o, e, p in json.loads(ready.snapshot.data)]
            self.cluster.on_restore(self, ready.snapshot.snapshot_id.end_offset, restored)
            self.applied = restored
        for entry in ready.committed:
            self.cluster.on_apply(self, entry)
            self.applied.append((entry.offset, entry.epoch, entry.payload))
        core.advance(ready)
        self.inflight = None
        every = self.cluster.settings.snapshot_every
        if every and core.applied - core.log.start_offset >= every and self.disk_rng.random() < 0.5:
            data = json.dumps([(o, e, p.hex()) for o, e, p in self.applied]).encode()
            core.create_snapshot(core.applied, data)


class SimCluster:
    def __init__(self, seed: int, settings: SimSettings, *, network: dict[str, Any] | None = None) -> None:
        self.seed = seed
        self.settings = settings
        self.clock = SimClock()
        self.scheduler = Scheduler(self.clock)
        self.voter_ids = list(range(1, settings.voters + 1))
        self.observer_ids = list(range(settings.voters + 1, settings.voters + settings.observers + 1))
        self.network = SimNetwork(random.Random(f"{seed}:network"), self.scheduler, **(network or {}))
        self.network.deliver = self._deliver
        self.nodes = {n: SimNode(self, n, n in self.voter_ids) for n in self.voter_ids + self.observer_ids}
        self.listeners: list[Any] = []  # objects with on_start/on_persisted/on_apply/on_restore

    @property
    def all_ids(self) -> list[int]:
        return list(self.nodes)

    def start(self) -> None:
        for node in self.nodes.values():
            node.start()

    def _deliver(self, message: Message) -> None:
        self.nodes[message.dst].input(lambda core: core.step(message))

    def leaders(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]

    # --- listener fan-out (invariants, history) ----------------------------------------
    def invariants_forget(self, node_id: int) -> None:
        """A node's disk was wiped: its durable history starts over."""
        for listener in self.listeners:
            if hasattr(listener, "forget"):
                listener.forget(node_id)

    def on_start(self, node: SimNode) -> None:
        for listener in self.listeners:
            listener.on_start(node)

    def on_persisted(self, node: SimNode, ready: Ready, flushed: list[Entry]) -> None:
        for listener in self.listeners:
            listener.on_persisted(node, ready, flushed)

    def on_apply(self, node: SimNode, entry: Entry) -> None:
        for listener in self.listeners:
            listener.on_apply(node, entry)

    def on_restore(self, node: SimNode, end_offset: int, restored: list[Applied]) -> None:
        for listener in self.listeners:
            listener.on_restore(node, end_offset, restored)
