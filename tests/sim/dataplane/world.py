"""The data-plane simulation: brokers, the controller and clients on one seeded network.

``run(seed, scenario, replay)`` plays one story: a topic (``partitions``, RF
``replication_factor``, ``min.insync.replicas``) on ``brokers`` brokers; idempotent acks=all
producers and a consumer run while a seeded nemesis strikes for ``fault_ms`` (kills,
power losses, pauses, partitions of brokers, of the controller, of clients from leaders,
clogged links); then everything heals and restarts, the producers stop, the cluster must
converge (every replica holds the same log, every partition has its whole ISR) within
``liveness_ms``, and a final reader reads every partition up to "latest".  Invariants run
after every event (``invariants.py``); the history goes through the shared checker.

Every random choice comes from ``random.Random(f"{seed}:<part>")`` (network, nemesis,
each broker, each client), so a seed replays exactly (``--sim-seed S``).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from brokers.partition.messages import LeaderAndIsr  # noqa: F401 - re-exported for readers of the story
from tests.checkers.log_history import FinalRead, Op

from ..clock import SimClock
from ..network import SimNetwork
from ..scheduler import Scheduler
from .broker import SimBroker
from .clients import FinalReader, SimConsumer, SimProducer
from .controller import TOPIC, SimController
from .invariants import Invariants
from .messages import CONTROLLER

__all__ = ["Scenario", "Settings", "World", "run", "FAULTS"]

FAULTS = ("kill", "power", "pause", "isolate", "cut_controller", "cut_link", "cut_client", "clog", "heal")


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    brokers: int = 3
    partitions: int = 1
    replication_factor: int = 3
    min_isr: int = 2
    flush_messages: int = 0        # flush.messages: 1 = fsync every append
    tear_rate: float = 0.5
    producers: int = 2
    max_in_flight: int = 2
    send_every_ms: int = 7
    poll_every_ms: int = 15
    request_timeout_ms: int = 150
    delivery_timeout_ms: int = 900
    session_timeout_ms: int = 180
    heartbeat_ms: int = 40
    lag_ms: int = 120
    metadata_ms: int = 100                      # a metadata fetch lost in a partition is asked again
    metadata_lag_ms: tuple[int, int] = (0, 25)  # after an image, the next fetch (how far a broker lags)
    fetch_poll_ms: int = 20
    fetch_wait_ms: int = 40
    fetch_max_frames: int = 3
    preferred_every_ms: int = 250
    lost_answer_rate: float = 0.1


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    settings: Settings = field(default_factory=Settings)
    faults: tuple[str, ...] = FAULTS
    fault_ms: int = 1200
    fault_every_ms: tuple[int, int] = (40, 160)
    liveness_ms: int = 4000
    delay_ms: tuple[int, int] = (1, 6)
    drop_rate: float = 0.0
    durable: bool = True   # the settings promise that nothing acknowledged is lost under these faults
    max_power_losses: int = 1_000   # power losses per run (then a "power" fault is a kill -9)


class World:
    def __init__(self, seed: int, scenario: Scenario, replay: str) -> None:
        self.seed = seed
        self.scenario = scenario
        self.settings = scenario.settings
        self.clock = SimClock()
        self.scheduler = Scheduler(self.clock)
        self.network = SimNetwork(self.rng("network"), self.scheduler, min_delay_ms=scenario.delay_ms[0],
                                  max_delay_ms=scenario.delay_ms[1], drop_rate=scenario.drop_rate)
        self.network.deliver = self._deliver
        self.history: list[Op] = []
        self.dirty: set[tuple[int, int]] = set()   # (broker, partition) replicas an event touched
        self.final_reads: list[FinalRead] = []
        self.faults: list[str] = []
        self.controller = SimController(self, rng=self.rng("controller"),
                                        session_timeout_ms=self.settings.session_timeout_ms,
                                        lost_answer_rate=self.settings.lost_answer_rate)
        self.broker_ids = list(range(1, self.settings.brokers + 1))
        self.brokers = {b: SimBroker(self, b) for b in self.broker_ids}
        self.producers = [SimProducer(self, 100 + i, f"p{i}") for i in range(self.settings.producers)]
        self.consumer = SimConsumer(self, 150, "c")
        self.clients: dict[int, Any] = {c.node_id: c for c in [*self.producers, self.consumer]}
        self.invariants = Invariants(self, replay, durable=scenario.durable)
        self.scheduler.after_event = self.invariants.after_event

    def rng(self, part: str) -> random.Random:
        return random.Random(f"{self.seed}:{part}")

    def now(self) -> int:
        return self.clock.now_ms

    @property
    def all_ids(self) -> list[int]:
        return [CONTROLLER, *self.broker_ids, *self.clients]

    def replicas_of(self, partition: int) -> tuple[int, ...]:
        return tuple(self.controller.image.topics[TOPIC].partitions[partition].replicas)

    # -- the network --------------------------------------------------------------------------

    def send(self, message: Any) -> None:
        self.network.send(message)

    def network_ok(self, src: int, dst: int) -> bool:
        return (src, dst) not in self.network.cut_links

    def _deliver(self, message: Any) -> None:
        dst = message.dst
        if dst == CONTROLLER:
            self.controller.on_message(message)
            return
        broker = self.brokers.get(dst)
        if broker is not None:
            if not broker.up:
                return
            if broker.paused_until > self.clock.now_ms:   # SIGSTOP: the socket buffers it
                self.scheduler.schedule(broker.paused_until - self.clock.now_ms, "deliver", lambda: self._deliver(message))
                return
            broker.on_message(message)
            return
        client = self.clients.get(dst)
        if client is not None:
            client.on_message(message)

    def record(self, op: Op) -> None:
        self.history.append(op)

    # -- the story ----------------------------------------------------------------------------

    def start(self) -> None:
        s = self.settings
        self.controller.bootstrap(self.broker_ids, partitions=s.partitions, replication_factor=s.replication_factor,
                                  min_isr=s.min_isr, flush_messages=s.flush_messages)
        for broker in self.brokers.values():
            broker.start()
        for client in self.clients.values():
            client.start()

        def controller_loop() -> None:
            self.scheduler.schedule(50, "controller", controller_loop)
            self.controller.check_leases()

        def preferred_loop() -> None:
            self.scheduler.schedule(s.preferred_every_ms, "preferred", preferred_loop)
            self.controller.elect_preferred_leaders()

        self.scheduler.schedule(50, "controller", controller_loop)
        self.scheduler.schedule(s.preferred_every_ms, "preferred", preferred_loop)

    def heal(self) -> None:
        self.network.heal()
        now = self.clock.now_ms
        for broker in self.brokers.values():
            broker.paused_until = min(broker.paused_until, now)
            if not broker.up:
                broker.start()

    def converged(self) -> bool:
        for p in range(self.settings.partitions):
            info = self.controller.image.topics[TOPIC].partitions[p]
            if info.leader is None or len(info.isr) != len(info.replicas):
                return False
            logs = [self.brokers[b].disks[p] for b in info.replicas]
            ends = {(log.leo, log.latest_epoch) for log in logs}
            if len(ends) != 1:
                return False
            leader = self.brokers[info.leader]
            replica = leader.replicas.get(p)
            if replica is None or not replica.is_leader or replica.high_watermark != logs[0].leo:
                return False
            if any(self.brokers[b].image.offset < self.controller.image.offset for b in info.replicas):
                return False
        return True


class Nemesis:
    def __init__(self, world: World, kinds: tuple[str, ...]) -> None:
        self.world = world
        self.rng = world.rng("nemesis")
        self.kinds = kinds
        self.power_losses = 0

    def note(self, text: str) -> None:
        self.world.faults.append(f"{self.world.clock.now_ms}: {text}")

    def strike(self) -> None:
        getattr(self, f"_{self.rng.choice(self.kinds)}")()

    def _victim(self) -> Any:
        return self.world.brokers[self.rng.choice(self.world.broker_ids)]

    def _crash(self, power: bool) -> None:
        world = self.world
        up = [b for b in world.brokers.values() if b.up]
        if len(up) <= 1:
            return
        victim = self.rng.choice(up)
        victim.crash(power=power)
        delay = self.rng.randint(20, 400)
        self.note(f"{'power loss' if power else 'kill -9'} broker {victim.node_id}, restart in {delay}ms")
        world.scheduler.schedule(delay, "restart", lambda: victim.start() if not victim.up else None)

    def _kill(self) -> None:
        self._crash(power=False)

    def _power(self) -> None:
        if self.world.scenario.max_power_losses <= self.power_losses:
            return self._crash(power=False)
        self.power_losses += 1
        self._crash(power=True)

    def _pause(self) -> None:
        victim = self._victim()
        ms = self.rng.randint(30, 400)
        victim.paused_until = max(victim.paused_until, self.world.clock.now_ms + ms)
        self.note(f"SIGSTOP broker {victim.node_id} for {ms}ms")

    def _isolate(self) -> None:
        victim = self._victim().node_id
        self.world.network.isolate(victim, self.world.all_ids)
        self.note(f"isolate broker {victim}")

    def _cut_controller(self) -> None:
        victim = self._victim().node_id
        self.world.network.partition([[victim], [CONTROLLER]])
        self.note(f"cut broker {victim} from the controller")

    def _cut_link(self) -> None:
        a, b = self.rng.sample(self.world.broker_ids, 2)
        if self.rng.random() < 0.5:
            self.world.network.partition([[a], [b]])
            self.note(f"cut {a}<->{b}")
        else:
            self.world.network.cut(a, b)
            self.note(f"cut {a}->{b}")

    def _cut_client(self) -> None:
        client = self.rng.choice(list(self.world.clients))
        broker = self._victim().node_id
        self.world.network.partition([[client], [broker]])
        self.note(f"cut client {client} from broker {broker}")

    def _clog(self) -> None:
        a, b = self.rng.sample([CONTROLLER, *self.world.broker_ids], 2)
        ms = self.rng.randint(20, 200)
        self.world.network.clog(a, b, ms)
        self.note(f"clog {a}->{b} +{ms}ms")

    def _heal(self) -> None:
        self.world.network.heal()
        self.note("heal")


def run(seed: int, scenario: Scenario, replay: str) -> World:
    world = World(seed, scenario, replay)
    nemesis = Nemesis(world, scenario.faults)
    rng = world.rng("scenario")
    world.start()

    def strike() -> None:
        if world.clock.now_ms < scenario.fault_ms:
            nemesis.strike()
            world.scheduler.schedule(rng.randint(*scenario.fault_every_ms), "fault", strike)

    if scenario.faults:
        world.scheduler.schedule(rng.randint(*scenario.fault_every_ms), "fault", strike)
    world.scheduler.run_until(scenario.fault_ms)
    world.heal()
    world.faults.append(f"{world.clock.now_ms}: heal all, restart the dead")
    healed = world.clock.now_ms
    # the producers stop once every send they started is settled (acknowledged or failed)
    for producer in world.producers:
        producer.running = False
    deadline = healed + scenario.liveness_ms
    settled = world.scheduler.run_until(deadline, stop=lambda: all(p.settled for p in world.producers)
                                        and world.converged())
    if not settled:
        world.invariants.fail(f"liveness: not converged within {scenario.liveness_ms}ms after healing at {healed}ms: "
                              f"{_state(world)}")
    world.consumer.running = False
    reader = FinalReader(world, 199)
    world.clients[reader.node_id] = reader
    reader.start()
    if not world.scheduler.run_until(world.clock.now_ms + scenario.liveness_ms, stop=lambda: reader.done):
        world.invariants.fail(f"liveness: the final read did not finish: ends {reader.ends}, positions "
                              f"{reader.positions}; {_state(world)}")
    world.final_reads = reader.finals()
    world.invariants.validate_end()
    return world


def _state(world: World) -> str:
    parts = []
    for p in range(world.settings.partitions):
        info = world.controller.image.topics[TOPIC].partitions[p]
        logs = {b: (world.brokers[b].disks[p].leo, world.brokers[b].up) for b in info.replicas}
        parts.append(f"p{p}: leader {info.leader} epoch {info.leader_epoch} isr {list(info.isr)} logs {logs}")
    pending = {p.name: (len(p.pending), len(p.retries), p.in_flight, sum(map(len, p.held.values())))
               for p in world.producers}
    return "; ".join(parts) + f"; producers {pending}"
