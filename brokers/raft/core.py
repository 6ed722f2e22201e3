"""``RaftCore``: the metadata quorum's Raft as a pure state machine.

Integer ticks and messages go in; a ``Ready`` (hard state and log entries to persist,
messages to send, committed entries to apply) comes out.  There are no sockets,
threads, clocks or module-level randomness here: the election timeout is drawn from an
injected ``random.Random``, and the log is the injected ``RaftLog`` whose appends are
buffered until the shell flushes them (see ``Ready`` for the ordering contract).

The protocol is KRaft's (KIP-595) on top of the Raft paper:

- Roles and their transition table: ``states.py``.  Elections (section 5.2) with
  pre-vote (thesis 9.6, KIP-996): ``election.py``.
- Pull replication (KIP-595 "Fetch"): followers and observers send
  ``FetchRequest(fetch_offset, last_fetched_epoch)``; the leader answers with entries,
  a diverging-epoch hint, or a snapshot id, and advances the high watermark to what a
  majority of voters have fetched, only once that covers an entry of its own epoch
  (paper 5.4.2): ``replication.py``.
- Each new leader appends a control entry (KRaft's LeaderChangeMessage) so that it can
  commit in its epoch at once.
- Check-quorum: a leader that has not received fetches from a majority of voters within
  1.5 x ``election_ticks`` resigns (KIP-595 "check quorum", thesis 6.2).
- Snapshots: the shell hands ``create_snapshot(end_offset, data)`` the state machine's
  bytes; the log drops entries below it; lagging followers fetch it (KIP-630).
"""
from __future__ import annotations

import random
from typing import Iterable, Sequence

from spark_log.config import RaftConfig
from spark_log.errors import NotControllerError

from . import election, replication
from .log import RaftLog
from .messages import (
    BeginQuorumEpoch, Entry, FetchRequest, FetchResponse, FetchSnapshotRequest,
    FetchSnapshotResponse, HardState, Message, Snapshot, SnapshotId, VoteRequest, VoteResponse,
)
from .ready import LeaderChange, Ready
from .states import Follower, Leader, RoleState, Unattached, initial_state, transition

__all__ = ["RaftCore", "CONTROL_LEADER_CHANGE"]

CONTROL_LEADER_CHANGE = b"leader-change"
_MAX_COMMITTED_PER_READY = 4096


class RaftCore:
    """One node of the quorum.  Thread-safety: none; one caller drives it.

    ``voters`` is the fixed voter set; a ``node_id`` not in it is an observer (fetches
    only, never votes or campaigns).  ``hard_state`` is what the node last persisted.
    """

    def __init__(self, *, node_id: int, voters: Iterable[int], log: RaftLog, config: RaftConfig,
                 rng: random.Random, hard_state: HardState | None = None) -> None:
        self.node_id = node_id
        self.voters: tuple[int, ...] = tuple(sorted(set(voters)))
        if not self.voters:
            raise ValueError("a quorum needs at least one voter")
        self.is_voter = node_id in self.voters
        self.config = config
        self.rng = rng
        self.log = log
        hard = hard_state or HardState()
        self.state: RoleState = initial_state(hard, node_id, is_voter=self.is_voter)
        self._hard = hard  # as last persisted (or handed out in a Ready)
        self._dirty_hard = False
        self.now = 0
        self.election_deadline = 0
        self.high_watermark = log.start_offset
        self.applied = log.start_offset  # next offset to hand to the state machine
        self.outbox: list[Message] = []
        self.appended: list[Entry] = []
        self.restore: Snapshot | None = log.latest_snapshot()
        self._announced: LeaderChange | None = None
        self._in_ready: Ready | None = None
        self.repl = replication.Replication(self)
        self.reset_election_timer()
        if isinstance(self.state, Follower):
            self.repl.on_become_follower(contact=False)

    # --- read-only view ------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int | None:
        return self.state.leader_id

    @property
    def is_leader(self) -> bool:
        return isinstance(self.state, Leader)

    @property
    def hard_state(self) -> HardState:
        return HardState(self.state.epoch, self.state.voted_for, self.state.leader_id)

    # --- inputs --------------------------------------------------------------------
    def tick(self) -> None:
        """Advance logical time by one tick (``RaftConfig.tick_ms`` in a real shell)."""
        self._check_not_in_ready()
        self.now += 1
        if isinstance(self.state, Leader):
            self.repl.leader_tick()
        elif isinstance(self.state, Follower):
            if self.now >= self.election_deadline:
                self.repl.on_fetch_timeout()
            else:
                self.repl.follower_tick()
        elif self.is_voter:
            if self.now >= self.election_deadline:
                election.on_election_timeout(self)
        else:
            self.repl.observer_discovery_tick()

    def step(self, message: Message) -> None:
        """Handle one message addressed to this node (others are ignored)."""
        self._check_not_in_ready()
        if getattr(message, "dst", None) != self.node_id:
            return
        match message:
            case VoteRequest():
                election.on_vote_request(self, message)
            case VoteResponse():
                election.on_vote_response(self, message)
            case BeginQuorumEpoch():
                self.observe(message.epoch, message.leader_id)
            case FetchRequest():
                self.repl.on_fetch_request(message)
            case FetchResponse():
                self.repl.on_fetch_response(message)
            case FetchSnapshotRequest():
                self.repl.on_fetch_snapshot_request(message)
            case FetchSnapshotResponse():
                self.repl.on_fetch_snapshot_response(message)
            case _:
                raise TypeError(f"not a Raft message: {message!r}")

    def propose(self, payloads: Sequence[bytes]) -> int:
        """Append ``payloads`` as entries of the current epoch; returns the last offset.

        Raises ``NotControllerError`` (detail ``leader_id``) unless this node leads.
        The entries are committed once the high watermark passes them.
        """
        self._check_not_in_ready()
        if not isinstance(self.state, Leader):
            raise NotControllerError(f"node {self.node_id} is not the leader", leader_id=self.leader_id)
        if not payloads:
            raise ValueError("propose needs at least one payload")
        return self.repl.append_as_leader([bytes(p) for p in payloads], control=False)

    def create_snapshot(self, end_offset: int, data: bytes) -> SnapshotId:
        """Store the state machine's ``data`` as the snapshot of every entry below
        ``end_offset`` (which must be applied already) and drop those entries."""
        self._check_not_in_ready()
        if not self.log.start_offset < end_offset <= self.applied:
            raise ValueError(f"snapshot end {end_offset} outside ({self.log.start_offset}, {self.applied}]")
        snapshot_id = SnapshotId(end_offset, self.log.epoch_at(end_offset - 1))
        self.log.create_snapshot(Snapshot(snapshot_id, bytes(data)))
        self.appended = [e for e in self.appended if e.offset >= end_offset]
        return snapshot_id

    # --- outputs -------------------------------------------------------------------
    def has_ready(self) -> bool:
        return bool(
            self.outbox or self.appended or self.hard_state != self._hard or self.restore is not None
            or self.applied < self.high_watermark or self._leader_change() is not None
            or self.log.flushed_end_offset < self.log.end_offset
        )

    def ready(self) -> Ready:
        """Collect the pending work; see ``Ready`` for what the caller must do with it."""
        self._check_not_in_ready()
        hard = self.hard_state
        committed: tuple[Entry, ...] = ()
        start = self.applied
        if self.restore is not None:
            start = self.restore.snapshot_id.end_offset
        if start < self.high_watermark:
            count = min(self.high_watermark - start, _MAX_COMMITTED_PER_READY)
            committed = tuple(self.log.read(start, count))
        ready = Ready(
            hard_state=hard if hard != self._hard else None,
            entries=tuple(self.appended),
            flush_offset=self.log.end_offset,
            messages=tuple(self.outbox),
            snapshot=self.restore,
            committed=committed,
            leader_change=self._leader_change(),
            high_watermark=self.high_watermark,
        )
        self.outbox.clear()
        self.appended.clear()
        self._in_ready = ready
        return ready

    def advance(self, ready: Ready) -> None:
        """The shell has done everything ``ready`` asked for."""
        if ready is not self._in_ready:
            raise RuntimeError("advance() must get the Ready that ready() returned last")
        self._in_ready = None
        if ready.hard_state is not None:
            self._hard = ready.hard_state
        if ready.snapshot is not None:
            self.applied = max(self.applied, ready.snapshot.snapshot_id.end_offset)
            if self.restore is ready.snapshot:
                self.restore = None
        if ready.committed:
            self.applied = max(self.applied, ready.committed[-1].offset + 1)
        if ready.leader_change is not None:
            self._announced = ready.leader_change
        if isinstance(self.state, Leader):
            self.repl.maybe_advance_high_watermark()

    # --- helpers for election.py / replication.py ----------------------------------
    def become(self, new: RoleState) -> None:
        old = self.state
        self.state = transition(old, new, is_voter=self.is_voter, pre_vote=self.config.pre_vote)
        if isinstance(new, Leader):
            self.repl.on_become_leader()
        elif isinstance(new, Follower):
            self.reset_election_timer()
            self.repl.on_become_follower()
        elif isinstance(old, Leader):
            self.repl.on_stop_leading()

    def observe(self, epoch: int, leader_id: int | None) -> None:
        """Learn about ``epoch`` (and its leader) from any message (paper 5.1: a larger
        term makes a node step down; KIP-595: a known leader makes it a follower)."""
        state = self.state
        if leader_id == self.node_id and not isinstance(state, Leader):
            leader_id = None  # a stale hint about our own past leadership (we restarted Resigned)
        if epoch > state.epoch:
            self.become(Follower(epoch, leader_id) if leader_id is not None else Unattached(epoch))
        elif epoch == state.epoch and leader_id is not None and state.leader_id != leader_id:
            if isinstance(state, Leader) or (isinstance(state, Follower)):
                raise RuntimeError(f"two leaders in epoch {epoch}: {state.leader_id} and {leader_id}")
            self.become(Follower(epoch, leader_id, state.voted_for if self.is_voter else None))

    def send(self, message: Message) -> None:
        self.outbox.append(message)

    def reset_election_timer(self) -> None:
        ticks = self.config.election_ticks
        self.election_deadline = self.now + self.rng.randrange(ticks, 2 * ticks)

    def _leader_change(self) -> LeaderChange | None:
        current = LeaderChange(self.state.leader_id, self.state.epoch)
        if self._announced is None or self._announced != current:
            if self._announced is None and current.leader_id is None:
                return None
            return current
        return None

    def _check_not_in_ready(self) -> None:
        if self._in_ready is not None:
            raise RuntimeError("call advance(ready) before touching the core again")
