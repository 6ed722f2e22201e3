"""Safety invariants, checked after EVERY simulation event (Raft paper figure 3, KIP-595).

- Election safety: at most one leader per epoch, over the whole run (paper 5.2).
- Epochs and votes: a node's epoch never decreases (in memory within an incarnation,
  durably across restarts); a durable vote never changes within its epoch, and the
  in-memory vote agrees with the durable one (paper 5.2, figure 2 "persistent state").
- High watermark: never decreases on a node within an incarnation (KIP-595), and a
  majority of voters hold the log up to the largest high watermark ever reported, in
  their *durable* state (flushed entries or a snapshot): committed means survives.
- Log matching (paper 5.3): an (offset, epoch) pair names one entry everywhere, with
  one predecessor epoch, so equal pairs imply equal prefixes.
- Leader completeness (paper 5.4): every leader holds every committed entry.
- State-machine safety (paper 5.4.3, Kafka's ConsistentCommittedData): no two nodes apply
  different entries at one offset; applies are in offset order; a snapshot restored
  agrees with what was committed.

A violation raises ``SimViolation`` whose message starts with the seed and the replay
command, then the recent event trace.
"""
from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from brokers.raft.messages import Entry
from brokers.raft.quorum import majority
from brokers.raft.ready import Ready

if TYPE_CHECKING:
    from .cluster import Applied, SimCluster, SimNode

__all__ = ["SimViolation", "Invariants"]


class SimViolation(AssertionError):
    pass


class Invariants:
    def __init__(self, cluster: "SimCluster", replay: str) -> None:
        self.cluster = cluster
        self.replay = replay
        self.trace: deque[str] = deque(maxlen=40)
        self.leader_of_epoch: dict[int, int] = {}
        self.memory_epoch: dict[tuple[int, int], int] = {}  # (node, incarnation) -> epoch
        self.durable_epoch: dict[int, int] = {}
        self.vote_of: dict[tuple[int, int], int] = {}  # (node, epoch) -> durable vote
        self.hw_seen: dict[tuple[int, int], int] = {}  # (node, incarnation) -> high watermark
        self.identity: dict[tuple[int, int], tuple[bytes, bool, int]] = {}
        self.committed: dict[int, tuple[int, bytes]] = {}
        self.max_hw = 0
        self.max_hw_epoch = 0
        self.checks = 0
        cluster.listeners.append(self)
        cluster.scheduler.after_event = self.check

    def fail(self, text: str) -> None:
        raise SimViolation(
            f"seed={self.cluster.seed}: {text}\n  replay: {self.replay}\n  at t={self.cluster.clock.now_ms}ms; "
            "recent events:\n    " + "\n    ".join(self.trace)
        )

    # --- listener hooks ----------------------------------------------------------------
    def forget(self, node_id: int) -> None:
        """``node_id``'s disk was wiped (observers only): its durable epoch starts over."""
        if node_id in self.cluster.voter_ids:
            self.fail(f"wiping voter {node_id} is not a fault Raft tolerates")
        self.durable_epoch.pop(node_id, None)

    def on_start(self, node: "SimNode") -> None:
        log = node.disk.log
        for entry in log.read(log.start_offset, log.end_offset - log.start_offset):
            self._register(node, entry, log.epoch_at(entry.offset - 1))

    def on_persisted(self, node: "SimNode", ready: Ready, flushed: list[Entry]) -> None:
        """``flushed``: the entries that step 1 of ``ready`` made durable, in offset order."""
        log = node.disk.log
        for entry in flushed:
            self._register(node, entry, log.epoch_at(entry.offset - 1))
        hard = node.disk.hard_state
        if hard.epoch < self.durable_epoch.get(node.node_id, 0):
            self.fail(f"node {node.node_id}: durable epoch went back to {hard.epoch}")
        self.durable_epoch[node.node_id] = hard.epoch
        if hard.voted_for is not None:
            vote = self.vote_of.setdefault((node.node_id, hard.epoch), hard.voted_for)
            if vote != hard.voted_for:
                self.fail(f"node {node.node_id} voted for {vote} and then {hard.voted_for} in epoch {hard.epoch}")

    def _register(self, node: "SimNode", entry: Entry, prev_epoch: int) -> None:
        key = (entry.offset, entry.epoch)
        value = (entry.payload, entry.control, prev_epoch)
        known = self.identity.setdefault(key, value)
        if known != value:
            self.fail(f"log matching: node {node.node_id} has {key} = {value}, elsewhere {known}")

    def on_apply(self, node: "SimNode", entry: Entry) -> None:
        if node.applied and entry.offset <= node.applied[-1][0]:
            self.fail(f"node {node.node_id} applied offset {entry.offset} after {node.applied[-1][0]}")
        self._commit(node, entry.offset, entry.epoch, entry.payload)

    def on_restore(self, node: "SimNode", end_offset: int, restored: "list[Applied]") -> None:
        for offset, epoch, payload in restored:
            self._commit(node, offset, epoch, payload)

    def _commit(self, node: "SimNode", offset: int, epoch: int, payload: bytes) -> None:
        known = self.committed.setdefault(offset, (epoch, payload))
        if known != (epoch, payload):
            self.fail(f"state-machine safety: node {node.node_id} applied {(offset, epoch, payload)!r}, "
                      f"another node applied {known!r} at that offset")

    # --- after every event -------------------------------------------------------------
    def check(self, label: str) -> None:
        self.checks += 1
        cluster = self.cluster
        self.trace.append(f"{cluster.clock.now_ms}: {label}")
        for node in cluster.nodes.values():
            core = node.core
            if core is None:
                continue
            key = (node.node_id, node.incarnation)
            epoch = core.epoch
            if epoch < self.memory_epoch.get(key, 0):
                self.fail(f"node {node.node_id}: epoch went back from {self.memory_epoch[key]} to {epoch}")
            self.memory_epoch[key] = epoch
            hard = node.disk.hard_state
            voted = core.state.voted_for
            if hard.epoch == epoch and hard.voted_for is not None and voted != hard.voted_for:
                self.fail(f"node {node.node_id}: votes for {voted} in epoch {epoch}, durably for {hard.voted_for}")
            if node.inflight is None:  # between Readies everything acted upon is durable
                state = (epoch, voted, core.state.leader_id)
                if state != (hard.epoch, hard.voted_for, hard.leader_id):
                    self.fail(f"node {node.node_id}: acts on {state} but persisted {hard}")
            hw = core.high_watermark
            if hw < self.hw_seen.get(key, 0):
                self.fail(f"node {node.node_id}: high watermark went back from {self.hw_seen[key]} to {hw}")
            self.hw_seen[key] = hw
            if hw > self.max_hw:
                log = core.log
                if hw - 1 >= log.start_offset - 1 and hw <= log.end_offset:
                    self.max_hw, self.max_hw_epoch = hw, log.epoch_at(hw - 1)
            if core.leader_id == node.node_id and not core.is_leader:
                self.fail(f"node {node.node_id} follows itself in epoch {epoch}")
            if core.is_leader:
                leader = self.leader_of_epoch.setdefault(epoch, node.node_id)
                if leader != node.node_id:
                    self.fail(f"two leaders in epoch {epoch}: {leader} and {node.node_id}")
                # A stale leader of an older epoch may lag; any leader must hold what was
                # committed in its own or earlier epochs (checked from the first event it leads).
                if self.max_hw_epoch <= epoch and not self._holds(node, durable=False):
                    self.fail(f"leader completeness: leader {node.node_id} of epoch {epoch} lacks committed "
                              f"offset {self.max_hw - 1} (epoch {self.max_hw_epoch})")
        if self.max_hw:
            holders = sum(1 for n in cluster.voter_ids if self._holds(cluster.nodes[n], durable=True))
            if holders < majority(len(cluster.voter_ids)):
                self.fail(f"only {holders} voters durably hold the log up to the high watermark {self.max_hw}")

    def _holds(self, node: "SimNode", *, durable: bool) -> bool:
        log = node.disk.log
        high = self.max_hw
        if log.start_offset >= high:
            return True
        end = log.flushed_end_offset if durable else log.end_offset
        return end >= high and log.epoch_at(high - 1) == self.max_hw_epoch

    # --- end of run --------------------------------------------------------------------
    def validate_end(self) -> None:
        """Full log matching over every pair of nodes' current logs: where both hold an
        entry with the same (offset, epoch), the overlapping prefixes are identical."""
        logs = {n: node.disk.log for n, node in self.cluster.nodes.items()}
        contents = {n: {e.offset: e for e in log.read(log.start_offset, log.end_offset - log.start_offset)}
                    for n, log in logs.items()}
        ids = sorted(logs)
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                common = [o for o, e in contents[a].items() if (f := contents[b].get(o)) is not None and f.epoch == e.epoch]
                if not common:
                    continue
                top = max(common)
                low = max(logs[a].start_offset, logs[b].start_offset)
                for offset in range(low, top + 1):
                    if contents[a].get(offset) != contents[b].get(offset):
                        self.fail(f"log matching: nodes {a} and {b} agree at ({top}) but differ at offset {offset}")
