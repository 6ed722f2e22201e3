"""Invariants of the data plane, checked after every event of the simulation.

Per partition the checker keeps the *committed log*: the records below the highest high
watermark any leader ever had (a leader's HW only covers records every ISR member holds).

1. **HW monotonic**: a leader's high watermark never goes down while it leads in one epoch.
2. **Committed records never change**: a record below a leader's HW is the committed record
   at that offset, whichever leader, whenever (nothing committed is lost or rewritten).
3. **Committed prefixes equal on every replica**: every replica's log below its own high
   watermark (leader or follower) is the committed log's prefix.
4. **Acknowledged means committed**: an acks=all acknowledgement names a committed record
   (offset and value).
5. **"latest" never hides an acknowledged record**: a ListOffsets answer of the current
   leader (its leader epoch is the controller's) is above every offset acknowledged before
   it (KIP-207: a new leader's lagging HW must not be served).  A deposed leader that has
   not heard of its successor yet (paused, partitioned) still answers from its old state,
   as in Kafka without leader leases: its answers are not checked.

At the end (``validate_end``): the history (sends, polls, final reads) passes the shared
checker (``tests/checkers/log_history.py``: no lost write, duplicate, G1a, send-order,
poll skip, truncated read...), and every replica of every partition holds the same log.

With ``durable=False`` (power loss without fsync, which the default settings do not
promise to survive: ``flush.messages=1`` does) checks 2-5 and the history check are
skipped and the end checks only that the replicas converge and every partition serves
again; ``lost_acknowledged()`` counts what was lost.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from tests.checkers.log_history import Send, check

if TYPE_CHECKING:
    from .world import World

__all__ = ["Invariants", "InvariantError"]


class InvariantError(AssertionError):
    pass


class Invariants:
    def __init__(self, world: World, replay: str, *, durable: bool) -> None:
        self.world = world
        self.replay = replay
        self.durable = durable
        p = world.settings.partitions
        self.committed: dict[int, list[bytes]] = {i: [] for i in range(p)}
        self.leader_hw: dict[tuple[int, int], tuple[int, int]] = {}          # (broker, p) -> (epoch, hw)
        self.checked: dict[tuple[int, int], tuple[int, int, int]] = {}       # (broker, p) -> (log version, upto, incarnation)
        self.acked_max: dict[int, int] = {i: -1 for i in range(p)}
        self.checks = 0

    def fail(self, message: str) -> None:
        world = self.world
        raise InvariantError(
            f"seed={world.seed}: {message}\n  replay: {self.replay}\n  at {world.clock.now_ms}ms; faults: "
            f"{world.faults[-12:]}\n  controller: {world.controller.log[-8:]}")

    # -- after every event ------------------------------------------------------------------

    def after_event(self, _label: str) -> None:
        self.checks += 1
        dirty = self.world.dirty
        if not dirty:
            return
        touched = sorted(dirty)
        dirty.clear()
        for broker_id, p in touched:
            broker = self.world.brokers[broker_id]
            replica = broker.replicas.get(p)
            if not broker.up or replica is None or replica.core.removed:
                continue
            if True:
                log = replica.log
                hw = replica.high_watermark
                key = (broker.node_id, p)
                if replica.is_leader:
                    epoch = replica.core.leader_epoch
                    last = self.leader_hw.get(key)
                    if last is not None and last[0] == epoch and hw < last[1]:
                        self.fail(f"broker {broker.node_id} partition {p}: leader HW went down {last[1]} -> {hw} "
                                  f"in epoch {epoch}")
                    self.leader_hw[key] = (epoch, hw)
                else:
                    self.leader_hw.pop(key, None)
                if not self.durable:
                    continue
                version, upto, incarnation = self.checked.get(key, (-1, 0, -1))
                if version != log.version or incarnation != broker.incarnations:
                    upto = 0  # the log changed (a truncation or power loss may have cut it): check again
                if hw > upto:
                    self._check_prefix(broker.node_id, p, replica.is_leader, list(enumerate(log.values[upto:hw], upto)),
                                       upto)
                self.checked[key] = (log.version, max(upto, hw), broker.incarnations)

    def _check_prefix(self, broker: int, p: int, leader: bool, records: list[tuple[int, bytes]], start: int) -> None:
        committed = self.committed[p]
        for offset, value in records:
            if offset < len(committed):
                if committed[offset] != value:
                    self.fail(f"partition {p} offset {offset}: committed {committed[offset]!r}, but broker {broker}'s "
                              f"log has {value!r} below its HW ({'leader' if leader else 'follower'})")
            elif leader and offset == len(committed):
                committed.append(value)
            elif offset >= len(committed):
                self.fail(f"partition {p}: broker {broker} (follower) has HW past every leader's HW "
                          f"({offset} >= {len(committed)})")

    # -- hooks --------------------------------------------------------------------------------

    def on_ack(self, op: Send) -> None:
        assert isinstance(op.partition, int) and op.offset is not None
        self.acked_max[op.partition] = max(self.acked_max[op.partition], op.offset)
        if not self.durable:
            return
        committed = self.committed[op.partition]
        if op.offset >= len(committed) or committed[op.offset] != op.value:
            found = committed[op.offset] if op.offset < len(committed) else None
            self.fail(f"acknowledged {op.value!r} at {op.partition}/{op.offset}, but the committed log has {found!r} "
                      f"(committed end {len(committed)})")

    def on_latest(self, partition: int, offset: int, broker: int, leader_epoch: int) -> None:
        if not self.durable or leader_epoch != self.world.controller.partition(partition).leader_epoch:
            return  # a deposed leader (module docstring), or losses allowed
        if offset <= self.acked_max[partition]:
            self.fail(f"broker {broker} answered 'latest' = {offset} for partition {partition}, but offset "
                      f"{self.acked_max[partition]} was acknowledged already: a reader stopping there loses it")

    # -- at the end -------------------------------------------------------------------------------

    def validate_end(self) -> None:
        world = self.world
        for p in range(world.settings.partitions):
            logs = {b.node_id: b.disks[p].records() for b in world.brokers.values()
                    if b.node_id in world.replicas_of(p)}
            first = next(iter(logs.values()))
            if any(log != first for log in logs.values()):
                lens = {b: len(log) for b, log in logs.items()}
                self.fail(f"partition {p}: replicas did not converge after healing (lengths {lens})")
        if self.durable:
            anomalies = check([*world.history, *world.final_reads])
            if anomalies:
                self.fail(f"history anomalies: {anomalies}")

    def lost_acknowledged(self) -> int:
        """How many acknowledged records the final read does not hold where acknowledged."""
        held: dict[tuple[object, object], bytes] = {(f.partition, o): v for f in self.world.final_reads
                                                     for o, v in f.records}
        return len([op for op in self.world.history
                    if isinstance(op, Send) and op.ok and held.get((op.partition, op.offset)) != op.value])
