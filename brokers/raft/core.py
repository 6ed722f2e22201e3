"""``RaftCore``: the metadata quorum's Raft as a pure state machine.

Integer ticks and messages go in; a ``Ready`` (hard state to persist, how far to flush
the log, messages to send, committed entries to apply) comes out.  There are no
sockets, threads, clocks or module-level randomness here: the election timeout is drawn
from an injected ``random.Random``, and the log is the injected ``RaftLog``.

The Ready contract
------------------
Storage follows KRaft, not etcd: ``RaftLog`` appends *write* the entries at once (they
are readable by the core, e.g. to answer fetches, and sit in the page cache or in memory)
but they are durable only after ``flush()``; truncation and snapshots are durable on
return.  So a ``Ready`` carries no entries for the shell to write.  It carries
``flush_to_offset``, the log end the core has acted upon, and the shell's only log
duty is to flush up to it.  (etcd instead hands the shell unstable entries to write;
that would keep a second copy of the tail in the core, and both our logs already write
on append.)  Per ``Ready``, the shell does, in this order:

1. **persist**: ``hard_state`` (when set) durably (``quorum_state.py``: tmp file, fsync,
   rename, directory fsync), and ``log.flush()`` when ``flush_to_offset`` is set;
2. **send** ``messages``, after asserting step 1 with
   ``ready.check_persisted(log.flushed_end_offset, persisted_hard_state)`` (a vote, a
   fetch offset or an acknowledged append is a promise about durable state: paper
   figure 2);
3. **apply**: ``snapshot`` (restore), then ``committed`` in offset order (control
   entries skipped), then ``leader_change``;
4. **advance**: ``core.advance(ready)``.

Nothing else may call the core between ``ready()`` and ``advance()`` (it raises
``RuntimeError``), and ``advance`` itself checks the log part of step 1 (the log is
flushed to ``flush_to_offset``); the hard state it cannot see, so the shells assert it
(``driver.RaftNode._process_ready`` and the simulation's ``tests/sim/cluster.py``).
A leader counts only its *flushed* end towards the high watermark, so an entry is
committed only once a majority holds it durably.

The closed core
---------------
Only this class changes the node's state: role, timers, high watermark, log, outbox.
The role logic lives in ``election.py`` (timeouts, pre-vote, vote) and ``replication.py``
(``LeaderReplication``, ``FollowerReplication``: KIP-595 pull replication); those
handlers read a ``CoreView`` (read-only) and return ``effects`` that ``_apply``
carries out in order.  The role modules never import each other; ``step`` and ``tick``
dispatch to them.  Epoch bookkeeping of fetch-family messages (a higher epoch or a new
leader seen in a message) is done here before the role logic runs, as etcd's ``Step``
does for terms.

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
from typing import Iterable, Sequence, assert_never

from spark_log.config import RaftConfig
from spark_log.errors import NotControllerError

from . import election
from .effects import (
    AppendAsFollower, AppendAsLeader, Become, Effect, InstallSnapshot, Observe, RaiseHighWatermark, RecordVote,
    ResetElectionTimer, Send, TruncateLog,
)
from .log import RaftLog
from .messages import (
    BeginQuorumEpoch, BeginQuorumEpochResponse, Entry, FetchRequest, FetchResponse, FetchSnapshotRequest,
    FetchSnapshotResponse, HardState, Message, Snapshot, SnapshotId, VoteRequest, VoteResponse,
)
from .quorum_info import QuorumInfo
from .ready import LeaderChange, Ready
from .replication import FollowerReplication, LeaderReplication
from .states import (
    Candidate, Follower, IllegalStateTransition, Leader, Prospective, RoleState, Unattached, initial_state,
    record_vote, transition,
)

__all__ = ["RaftCore", "CONTROL_LEADER_CHANGE"]

CONTROL_LEADER_CHANGE = b"leader-change"
_MAX_COMMITTED_PER_READY = 4096


class RaftCore:
    """One node of the quorum.  Thread-safety: none; one caller drives it.

    ``voters`` is the fixed voter set; a ``node_id`` not in it is an observer (fetches
    only, never votes or campaigns).  ``hard_state`` is what the node last persisted.
    Every public attribute is read-only; the inputs are ``tick``, ``step``, ``propose``,
    ``create_snapshot`` and ``advance``.
    """

    def __init__(self, *, node_id: int, voters: Iterable[int], log: RaftLog, config: RaftConfig,
                 rng: random.Random, hard_state: HardState | None = None) -> None:
        self._node_id = node_id
        self._voters: tuple[int, ...] = tuple(sorted(set(voters)))
        if not self._voters:
            raise ValueError("a quorum needs at least one voter")
        self._is_voter = node_id in self._voters
        self._config = config
        self._rng = rng
        self._log = log
        hard = hard_state or HardState()
        self._state: RoleState = initial_state(hard, node_id, is_voter=self._is_voter)
        self._hard = hard  # as last persisted (or handed out in a Ready)
        self._now = 0
        self._election_deadline = 0
        self._high_watermark = log.start_offset
        self._applied = log.start_offset  # next offset to hand to the state machine
        self._outbox: list[Message] = []
        self._restore: Snapshot | None = log.latest_snapshot()
        self._announced: LeaderChange | None = None
        self._in_ready: Ready | None = None
        self._leader = LeaderReplication()
        self._follower = FollowerReplication()
        self._reset_election_timer()
        if isinstance(self._state, Follower):
            self._apply(self._follower.on_become_follower(self, contact=False))

    # --- read-only view (``effects.CoreView``) ---------------------------------------
    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def voters(self) -> tuple[int, ...]:
        return self._voters

    @property
    def is_voter(self) -> bool:
        return self._is_voter

    @property
    def config(self) -> RaftConfig:
        return self._config

    @property
    def rng(self) -> random.Random:
        return self._rng

    @property
    def log(self) -> RaftLog:
        return self._log

    @property
    def now(self) -> int:
        """Ticks since this core was created."""
        return self._now

    @property
    def election_deadline(self) -> int:
        """Tick at which the election (or fetch) timeout fires."""
        return self._election_deadline

    @property
    def state(self) -> RoleState:
        return self._state

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def applied(self) -> int:
        """Next offset to hand to the state machine (everything below is applied or in a Ready)."""
        return self._applied

    @property
    def epoch(self) -> int:
        return self._state.epoch

    @property
    def leader_id(self) -> int | None:
        return self._state.leader_id

    @property
    def is_leader(self) -> bool:
        return isinstance(self._state, Leader)

    @property
    def hard_state(self) -> HardState:
        return HardState(self._state.epoch, self._state.voted_for, self._state.leader_id)

    def describe_quorum(self) -> QuorumInfo:
        """The leader's view of each voter and observer (``quorum_info.py``); raises
        ``NotControllerError`` (detail ``leader_id``) unless this node leads."""
        if not isinstance(self._state, Leader):
            raise NotControllerError(f"node {self._node_id} is not the leader", leader_id=self.leader_id)
        return self._leader.describe(self)

    # --- inputs --------------------------------------------------------------------
    def tick(self) -> None:
        """Advance logical time by one tick (``RaftConfig.tick_ms`` in a real shell)."""
        self._check_not_in_ready()
        self._now += 1
        state = self._state
        expired = self._now >= self._election_deadline
        effects: list[Effect]
        if isinstance(state, Leader):
            effects = self._leader.on_tick(self)
        elif isinstance(state, Follower) and not expired:
            effects = self._follower.on_tick(self)
        elif isinstance(state, Follower):  # the leader went silent
            effects = (election.on_election_timeout(self) if self._is_voter
                       else self._follower.on_observer_fetch_timeout(self))
        elif self._is_voter:
            effects = election.on_election_timeout(self) if expired else []
        else:
            effects = self._follower.on_discovery_tick(self)
        self._apply(effects)

    def step(self, message: Message) -> None:
        """Handle one message addressed to this node (others are ignored)."""
        self._check_not_in_ready()
        if getattr(message, "dst", None) != self._node_id:
            return
        effects: list[Effect]
        match message:
            case VoteRequest():
                heard = self._follower.heard_from_leader_recently(self)
                effects = election.on_vote_request(self, message, leader_heard_recently=heard)
            case VoteResponse():
                effects = election.on_vote_response(self, message)
            case BeginQuorumEpoch():
                if message.epoch < self.epoch and self._is_voter:  # a stale leader: tell it our epoch
                    effects = [Send(BeginQuorumEpochResponse(self._node_id, message.src, self.epoch,
                                                             self._state.leader_id))]
                else:
                    effects = [Observe(message.epoch, message.leader_id)]
            case BeginQuorumEpochResponse():
                effects = [Observe(message.epoch, message.leader_id)]
            case FetchRequest():
                if message.epoch > self.epoch:
                    self._observe(message.epoch, None)
                effects = self._leader.on_fetch_request(self, message)
            case FetchResponse():
                self._observe(message.epoch, message.leader_id)
                effects = self._follower.on_fetch_response(self, message)
            case FetchSnapshotRequest():
                if message.epoch > self.epoch:
                    self._observe(message.epoch, None)
                effects = self._leader.on_fetch_snapshot_request(self, message)
            case FetchSnapshotResponse():
                self._observe(message.epoch, message.leader_id)
                effects = self._follower.on_fetch_snapshot_response(self, message)
            case _:
                raise TypeError(f"not a Raft message: {message!r}")
        self._apply(effects)

    def propose(self, payloads: Sequence[bytes]) -> int:
        """Append ``payloads`` as entries of the current epoch; returns the last offset.

        Raises ``NotControllerError`` (detail ``leader_id``) unless this node leads.
        The entries are committed once the high watermark passes them.
        """
        self._check_not_in_ready()
        if not isinstance(self._state, Leader):
            raise NotControllerError(f"node {self._node_id} is not the leader", leader_id=self.leader_id)
        if not payloads:
            raise ValueError("propose needs at least one payload")
        return self._append_as_leader([bytes(p) for p in payloads], control=False)

    def create_snapshot(self, end_offset: int, data: bytes) -> SnapshotId:
        """Store the state machine's ``data`` as the snapshot of every entry below
        ``end_offset`` (which must be applied already) and drop those entries."""
        self._check_not_in_ready()
        if not self._log.start_offset < end_offset <= self._applied:
            raise ValueError(f"snapshot end {end_offset} outside ({self._log.start_offset}, {self._applied}]")
        snapshot_id = SnapshotId(end_offset, self._log.epoch_at(end_offset - 1))
        self._log.create_snapshot(Snapshot(snapshot_id, bytes(data)))
        return snapshot_id

    # --- outputs -------------------------------------------------------------------
    def has_ready(self) -> bool:
        return bool(
            self._outbox or self.hard_state != self._hard or self._restore is not None
            or self._applied < self._high_watermark or self._leader_change() is not None
            or self._log.flushed_end_offset < self._log.end_offset
        )

    def ready(self) -> Ready:
        """Collect the pending work; see the module docstring for what the caller must do."""
        self._check_not_in_ready()
        hard = self.hard_state
        committed: tuple[Entry, ...] = ()
        start = self._applied
        if self._restore is not None:
            start = self._restore.snapshot_id.end_offset
        if start < self._high_watermark:
            count = min(self._high_watermark - start, _MAX_COMMITTED_PER_READY)
            committed = tuple(self._log.read(start, count))
        log_end = self._log.end_offset
        ready = Ready(
            hard_state=hard if hard != self._hard else None,
            flush_to_offset=log_end if self._log.flushed_end_offset < log_end else None,
            messages=tuple(self._outbox),
            snapshot=self._restore,
            committed=committed,
            leader_change=self._leader_change(),
            high_watermark=self._high_watermark,
        )
        self._outbox.clear()
        self._in_ready = ready
        return ready

    def advance(self, ready: Ready) -> None:
        """The shell has done everything ``ready`` asked for.

        Raises ``RuntimeError`` if ``ready`` is not the last one handed out, or if the
        log is not flushed to its ``flush_to_offset``."""
        if ready is not self._in_ready:
            raise RuntimeError("advance() must get the Ready that ready() returned last")
        if ready.flush_to_offset is not None and self._log.flushed_end_offset < ready.flush_to_offset:
            raise RuntimeError(f"advance() before the log was flushed to {ready.flush_to_offset} "
                               f"(flushed to {self._log.flushed_end_offset})")
        self._in_ready = None
        if ready.hard_state is not None:
            self._hard = ready.hard_state
        if ready.snapshot is not None:
            self._applied = max(self._applied, ready.snapshot.snapshot_id.end_offset)
            if self._restore is ready.snapshot:
                self._restore = None
        if ready.committed:
            self._applied = max(self._applied, ready.committed[-1].offset + 1)
        if ready.leader_change is not None:
            self._announced = ready.leader_change
        if isinstance(self._state, Leader):
            self._apply(self._leader.maybe_advance_high_watermark(self))

    # --- the one place that changes state ------------------------------------------
    def _apply(self, effects: Iterable[Effect]) -> None:
        """Carry out ``effects`` in order (a ``Become`` runs its role hooks in place)."""
        for effect in effects:
            match effect:
                case Send(message):
                    self._outbox.append(message)
                case Become(state):
                    self._become(state)
                case RecordVote(voter, granted):
                    self._record_vote(voter, granted)
                case Observe(epoch, leader_id):
                    self._observe(epoch, leader_id)
                case ResetElectionTimer():
                    self._reset_election_timer()
                case AppendAsLeader(payloads, control):
                    self._append_as_leader(payloads, control=control)
                case AppendAsFollower(entries):
                    self._log.append_as_follower(entries)
                case TruncateLog(offset):
                    self._log.truncate_to(offset)
                case InstallSnapshot(snapshot):
                    self._log.install_snapshot(snapshot)
                    self._restore = snapshot
                case RaiseHighWatermark(offset):
                    self._high_watermark = max(self._high_watermark, offset)
                case _:
                    assert_never(effect)

    def _become(self, new: RoleState) -> None:
        old = self._state
        self._state = transition(old, new, is_voter=self._is_voter, pre_vote=self._config.pre_vote)
        if isinstance(new, Leader):
            self._apply(self._leader.on_become_leader(self))
        elif isinstance(new, Follower):
            self._reset_election_timer()
            self._apply(self._follower.on_become_follower(self))
        elif isinstance(old, Leader):
            self._leader.on_stop_leading()

    def _record_vote(self, voter: int, granted: bool) -> None:
        state = self._state
        if not isinstance(state, (Prospective, Candidate)):
            raise IllegalStateTransition(f"{state!r}: a vote is counted only while campaigning")
        self._state = record_vote(state, voter, granted)

    def _append_as_leader(self, payloads: Sequence[bytes], *, control: bool) -> int:
        state = self._state
        if not isinstance(state, Leader):
            raise IllegalStateTransition(f"{state!r}: only a leader appends as leader")
        last = self._log.append_as_leader(payloads, state.epoch, control=control)
        self._apply(self._leader.on_appended(self))
        return last

    def _observe(self, epoch: int, leader_id: int | None) -> None:
        """Learn about ``epoch`` (and its leader) from any message (paper 5.1: a larger
        term makes a node step down; KIP-595: a known leader makes it a follower)."""
        state = self._state
        if leader_id == self._node_id and not isinstance(state, Leader):
            leader_id = None  # a stale hint about our own past leadership (we restarted Resigned)
        if epoch > state.epoch:
            self._become(Follower(epoch, leader_id) if leader_id is not None else Unattached(epoch))
        elif epoch == state.epoch and leader_id is not None and state.leader_id != leader_id:
            if isinstance(state, (Leader, Follower)):
                raise RuntimeError(f"two leaders in epoch {epoch}: {state.leader_id} and {leader_id}")
            self._become(Follower(epoch, leader_id, state.voted_for if self._is_voter else None))

    def _reset_election_timer(self) -> None:
        ticks = self._config.election_ticks
        self._election_deadline = self._now + self._rng.randrange(ticks, 2 * ticks)

    def _leader_change(self) -> LeaderChange | None:
        current = LeaderChange(self._state.leader_id, self._state.epoch)
        if self._announced is None or self._announced != current:
            if self._announced is None and current.leader_id is None:
                return None
            return current
        return None

    def _check_not_in_ready(self) -> None:
        if self._in_ready is not None:
            raise RuntimeError("call advance(ready) before touching the core again")
