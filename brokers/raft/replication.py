"""Pull replication (KIP-595 Fetch, KIP-630 FetchSnapshot): the leader's and the follower's side.

Leader side (``LeaderReplication``): validate each ``FetchRequest(fetch_offset,
last_fetched_epoch)`` against the log (``end_offset_for_epoch``): a fetch below the log
start gets the snapshot id; a fetch whose epoch or offset does not match gets a
diverging hint (the follower truncates, paper 5.3 "log matching", KIP-595
"DivergingEpoch"); a valid fetch tells the leader that the replica holds the log up to
``fetch_offset`` and gets entries (or is parked until there are some, at most
``fetch_wait_ticks``: KIP-595's long poll).  The high watermark is the majority of voters'
fetch offsets (the leader counts its flushed end), and only moves once it covers this
leader's first entry (paper 5.4.2).  Check-quorum: a leader that has not had fetches
from a majority of voters in the last 1.5 x ``election_ticks`` resigns (KIP-595 "check
quorum"; Kafka's LeaderState timer).

Follower side (``FollowerReplication``): one fetch in flight, resent after
``fetch_wait_ticks + 2 * heartbeat_ticks`` without an answer; any answer from the leader resets the fetch
timeout (``election_ticks``, randomised); when it fires a voter campaigns (the core
calls ``election``) and an observer forgets the leader.

Both classes own only their bookkeeping (progress, parked fetches, fetch timers).  They
read the core through ``CoreView`` and return ``effects`` for ``RaftCore`` to apply;
epoch bookkeeping of incoming messages (a higher epoch, a new leader) is done by the
core before it hands a message here.
"""
from __future__ import annotations

from .effects import (
    AppendAsFollower, AppendAsLeader, Become, CoreView, Effect, InstallSnapshot, RaiseHighWatermark,
    ResetElectionTimer, Send, TruncateLog,
)
from .messages import (
    BeginQuorumEpoch, Entry, FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, Message,
    SnapshotId,
)
from .quorum import majority, majority_offset
from .quorum_info import FetchWatch, QuorumInfo
from .states import Follower, Leader, Resigned, Unattached

__all__ = ["LeaderReplication", "FollowerReplication"]

_NEVER = -(10**9)


class _Out:
    """The effects of one leader handler, and the high watermark as they leave it."""

    __slots__ = ("effects", "high_watermark")

    def __init__(self, view: CoreView) -> None:
        self.effects: list[Effect] = []
        self.high_watermark = view.high_watermark

    def send(self, message: Message) -> None:
        self.effects.append(Send(message))

    def raise_high_watermark(self, offset: int) -> None:
        self.high_watermark = offset
        self.effects.append(RaiseHighWatermark(offset))


def _fetch_response(view: CoreView, request: FetchRequest, high_watermark: int, *,
                    entries: tuple[Entry, ...] = (), diverging: SnapshotId | None = None,
                    snapshot_id: SnapshotId | None = None) -> FetchResponse:
    """The leader's answer to ``request`` (echoing its offset and epoch, so that the
    follower can discard stale answers)."""
    return FetchResponse(view.node_id, request.src, view.state.epoch, view.node_id, request.fetch_offset,
                         request.last_fetched_epoch, entries=entries, high_watermark=high_watermark,
                         diverging=diverging, snapshot_id=snapshot_id)


class LeaderReplication:
    """The leader's progress of each replica.  Thread-safety: none (the core's caller)."""

    def __init__(self) -> None:
        self.progress: dict[int, int] = {}  # replica -> last valid fetch offset
        self.last_fetch: dict[int, int] = {}  # replica -> tick of its last fetch
        self.parked: dict[int, tuple[int, FetchRequest]] = {}  # replica -> (tick, request)
        self.hw_sent: dict[int, int] = {}  # replica -> high watermark it was last sent
        self.watch = FetchWatch()  # what DescribeQuorum reports (quorum_info.py)

    # --- role changes --------------------------------------------------------------
    def on_become_leader(self, view: CoreView) -> list[Effect]:
        """Fresh progress; append the leader-change control entry (KRaft's
        LeaderChangeMessage) and announce the epoch to the voters."""
        self.progress, self.parked, self.hw_sent = {}, {}, {}
        self.last_fetch = {v: view.now for v in view.voters}
        self.watch = FetchWatch()
        return [AppendAsLeader((b"",), control=True), *self._announce(view)]

    def on_stop_leading(self) -> None:
        self.progress, self.parked, self.last_fetch, self.hw_sent = {}, {}, {}, {}
        self.watch = FetchWatch()

    def describe(self, view: CoreView) -> QuorumInfo:
        """The leader's view of every replica (the caller checks that this node leads)."""
        return self.watch.describe(leader_id=view.node_id, epoch=view.state.epoch, voters=view.voters,
                                   high_watermark=view.high_watermark, leader_end=view.log.end_offset,
                                   now=view.now, tick_ms=view.config.tick_ms)

    # --- events --------------------------------------------------------------------
    def on_appended(self, view: CoreView) -> list[Effect]:
        """The core appended entries as leader: answer parked fetches; a single voter
        may commit at once."""
        out = _Out(view)
        self._answer_parked(view, out, force=False)
        if len(view.voters) == 1:
            self._maybe_advance_high_watermark(view, out)
        return out.effects

    def maybe_advance_high_watermark(self, view: CoreView) -> list[Effect]:
        """After the leader's own log was flushed (the core calls this on ``advance``)."""
        out = _Out(view)
        self._maybe_advance_high_watermark(view, out)
        return out.effects

    def on_tick(self, view: CoreView) -> list[Effect]:
        """Check quorum, re-announce every ``heartbeat_ticks``, answer fetches parked
        ``fetch_wait_ticks``."""
        now, config, state = view.now, view.config, view.state
        if config.check_quorum:
            since = now - self.check_quorum_ticks(view)
            alive = sum(1 for v in view.voters if v == view.node_id or self.last_fetch.get(v, -1) >= since)
            if alive < majority(len(view.voters)):
                return [Become(Resigned(state.epoch, view.node_id)), ResetElectionTimer()]
        out = _Out(view)
        hb = config.heartbeat_ticks
        if now % hb == 0:
            out.effects += self._announce(view)
        stale = [r for r, (at, _) in self.parked.items() if now - at >= config.fetch_wait_ticks]
        for replica in stale:
            _, request = self.parked.pop(replica)
            self._answer(view, out, request, may_park=False)
        return out.effects

    @staticmethod
    def check_quorum_ticks(view: CoreView) -> int:
        """How long a leader may go without fetches from a majority: 1.5 election
        timeouts, as Kafka's ``LeaderState`` check-quorum timer."""
        return view.config.election_ticks * 3 // 2

    def on_fetch_request(self, view: CoreView, request: FetchRequest) -> list[Effect]:
        state = view.state
        if not isinstance(state, Leader) or request.epoch < state.epoch:
            return [Send(FetchResponse(view.node_id, request.src, state.epoch, state.leader_id,
                                       request.fetch_offset, request.last_fetched_epoch, not_leader=True))]
        self.last_fetch[request.src] = view.now
        self.parked.pop(request.src, None)
        out = _Out(view)
        self._answer(view, out, request, may_park=True)
        return out.effects

    def on_fetch_snapshot_request(self, view: CoreView, request: FetchSnapshotRequest) -> list[Effect]:
        state = view.state
        leading = isinstance(state, Leader) and request.epoch == state.epoch
        snapshot = view.log.latest_snapshot() if leading else None
        if leading:
            self.last_fetch[request.src] = view.now
        return [Send(FetchSnapshotResponse(view.node_id, request.src, state.epoch, state.leader_id, snapshot))]

    # --- internals -----------------------------------------------------------------
    def _announce(self, view: CoreView) -> list[Effect]:
        epoch = view.state.epoch
        return [Send(BeginQuorumEpoch(view.node_id, voter, epoch, view.node_id))
                for voter in view.voters if voter != view.node_id and voter not in self.progress]

    def _maybe_advance_high_watermark(self, view: CoreView, out: _Out) -> None:
        state = view.state
        if not isinstance(state, Leader):
            return
        offsets = {v: self.progress.get(v, 0) for v in view.voters}
        offsets[view.node_id] = view.log.flushed_end_offset
        candidate = majority_offset(view.voters, offsets)
        if candidate > state.epoch_start_offset and candidate > out.high_watermark:
            out.raise_high_watermark(candidate)
            self._answer_parked(view, out, force=True)

    def _answer(self, view: CoreView, out: _Out, request: FetchRequest, *, may_park: bool) -> None:
        log = view.log
        offset, last_epoch = request.fetch_offset, request.last_fetched_epoch
        snapshot = log.latest_snapshot()
        if snapshot is not None and (
            offset < log.start_offset
            or (offset == log.start_offset and last_epoch != snapshot.snapshot_id.epoch)
        ):
            out.send(_fetch_response(view, request, out.high_watermark, snapshot_id=snapshot.snapshot_id))
            return
        found = log.end_offset_for_epoch(last_epoch)
        if offset > log.end_offset or found.epoch != last_epoch or found.end_offset < offset:
            out.send(_fetch_response(view, request, out.high_watermark, diverging=found))
            return
        self.watch.on_valid_fetch(request.src, offset, leader_end=log.end_offset, now=view.now)
        if request.src in view.voters:
            previous = self.progress.get(request.src, 0)
            self.progress[request.src] = max(previous, offset)
            if offset > previous:
                self._maybe_advance_high_watermark(view, out)
        else:
            self.progress[request.src] = offset
        entries = tuple(log.read(offset, view.config.fetch_max_entries))
        if not entries and may_park and self.hw_sent.get(request.src) == out.high_watermark:
            self.parked[request.src] = (view.now, request)
            return
        self.hw_sent[request.src] = out.high_watermark
        out.send(_fetch_response(view, request, out.high_watermark, entries=entries))

    def _answer_parked(self, view: CoreView, out: _Out, *, force: bool) -> None:
        parked, self.parked = self.parked, {}
        for _, request in parked.values():
            self._answer(view, out, request, may_park=not force)


class FollowerReplication:
    """A follower's (or observer's) fetch bookkeeping.  Thread-safety: none."""

    def __init__(self) -> None:
        self.fetch_sent_at: int | None = None
        self.snapshot_pending = False
        self.last_contact = _NEVER

    def heard_from_leader_recently(self, view: CoreView) -> bool:
        return view.now - self.last_contact < view.config.election_ticks

    # --- role changes --------------------------------------------------------------
    def on_become_follower(self, view: CoreView, *, contact: bool = True) -> list[Effect]:
        """``contact``: the leader was just heard from (False when restarting from the
        persisted quorum state, which proves nothing about the leader being alive)."""
        self.fetch_sent_at = None
        self.snapshot_pending = False
        self.last_contact = view.now if contact else _NEVER
        return self._fetch(view, view.log.end_offset, view.log.last_epoch)

    # --- ticks ---------------------------------------------------------------------
    def on_tick(self, view: CoreView) -> list[Effect]:
        """Resend the fetch after ``fetch_wait_ticks + 2 * heartbeat_ticks`` without an answer
        (the leader holds an answer up to ``fetch_wait_ticks``)."""
        retry = view.config.fetch_wait_ticks + 2 * view.config.heartbeat_ticks
        if self.fetch_sent_at is None or view.now - self.fetch_sent_at >= retry:
            self.snapshot_pending = False
            return self._fetch(view, view.log.end_offset, view.log.last_epoch)
        return []

    @staticmethod
    def on_observer_fetch_timeout(view: CoreView) -> list[Effect]:
        """An observer whose leader went silent forgets it and rediscovers one."""
        return [Become(Unattached(view.state.epoch)), ResetElectionTimer()]

    @staticmethod
    def on_discovery_tick(view: CoreView) -> list[Effect]:
        """An observer without a leader asks a random voter every ``heartbeat_ticks``."""
        if view.now % view.config.heartbeat_ticks != 0:
            return []
        target = view.rng.choice(view.voters)
        log = view.log
        return [Send(FetchRequest(view.node_id, target, view.state.epoch, log.end_offset, log.last_epoch))]

    # --- answers from the leader ---------------------------------------------------
    def on_fetch_response(self, view: CoreView, response: FetchResponse) -> list[Effect]:
        state = view.state
        if not isinstance(state, Follower) or response.epoch != state.epoch or response.src != state.leader_id:
            return []
        if response.not_leader:
            return []
        self.last_contact = view.now
        effects: list[Effect] = [ResetElectionTimer()]
        log = view.log
        if response.fetch_offset != log.end_offset or response.last_fetched_epoch != log.last_epoch:
            return effects  # stale (duplicate or answered after we moved on)
        self.fetch_sent_at = None
        if response.snapshot_id is not None:
            self.snapshot_pending = True
            self.fetch_sent_at = view.now
            effects.append(Send(FetchSnapshotRequest(view.node_id, state.leader_id, state.epoch,
                                                     response.snapshot_id)))
            return effects
        # The log as these effects leave it: the next fetch continues from there.
        end, last_epoch = log.end_offset, log.last_epoch
        if response.diverging is not None:
            end = self._truncation_target(view, response, response.diverging)
            last_epoch = log.epoch_at(end - 1)
            effects.append(TruncateLog(end))
        else:
            if response.entries:
                effects.append(AppendAsFollower(response.entries))
                end, last_epoch = response.entries[-1].offset + 1, response.entries[-1].epoch
            effects.append(RaiseHighWatermark(min(response.high_watermark, end)))
        effects += self._fetch(view, end, last_epoch)
        return effects

    @staticmethod
    def _truncation_target(view: CoreView, response: FetchResponse, hint: SnapshotId) -> int:
        """KIP-595: truncate to the hint, but no further than where our own copy of the
        hint's epoch ends (our entries there may be from a later, different epoch).  Epoch
        0 means "older than anything the leader holds outside its snapshot": the hint's
        offset is then the leader's log start, and a snapshot fetch follows."""
        log = view.log
        target = min(hint.end_offset, log.end_offset)
        if hint.epoch > 0:
            target = min(target, log.end_offset_for_epoch(hint.epoch).end_offset)
        if target < view.high_watermark:
            raise RuntimeError(
                f"node {view.node_id}: leader {response.src} asks to truncate to {target}, "
                f"below the high watermark {view.high_watermark}"
            )
        if target < log.start_offset:
            raise RuntimeError(f"node {view.node_id}: truncation to {target} below log start")
        return target

    def on_fetch_snapshot_response(self, view: CoreView, response: FetchSnapshotResponse) -> list[Effect]:
        state = view.state
        if not isinstance(state, Follower) or response.src != state.leader_id or response.epoch != state.epoch:
            return []
        self.last_contact = view.now
        effects: list[Effect] = [ResetElectionTimer()]
        snapshot = response.snapshot
        self.snapshot_pending = False
        self.fetch_sent_at = None
        log = view.log
        end, last_epoch = log.end_offset, log.last_epoch
        if snapshot is not None and snapshot.snapshot_id.end_offset >= log.end_offset:
            end, last_epoch = snapshot.snapshot_id.end_offset, snapshot.snapshot_id.epoch
            effects += [InstallSnapshot(snapshot), RaiseHighWatermark(end)]
        effects += self._fetch(view, end, last_epoch)
        return effects

    def _fetch(self, view: CoreView, end_offset: int, last_epoch: int) -> list[Effect]:
        """The next fetch from the leader, for a log ending at ``end_offset`` in ``last_epoch``."""
        state = view.state
        leader = state.leader_id
        if leader is None or leader == view.node_id:
            return []
        self.fetch_sent_at = view.now
        return [Send(FetchRequest(view.node_id, leader, state.epoch, end_offset, last_epoch))]
