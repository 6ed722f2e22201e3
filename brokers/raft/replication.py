"""Pull replication for ``RaftCore`` (KIP-595 Fetch, KIP-630 FetchSnapshot), delegated.

Leader side: validate each ``FetchRequest(fetch_offset, last_fetched_epoch)`` against
the log (``end_offset_for_epoch``): a fetch below the log start gets the snapshot id; a
fetch whose epoch or offset does not match gets a diverging hint (the follower
truncates, paper 5.3 "log matching", KIP-595 "DivergingEpoch"); a valid fetch tells the
leader that the replica holds the log up to ``fetch_offset`` and gets entries (or is
parked until there are some, at most ``heartbeat_ticks``: KIP-595's long poll).  The
high watermark is the majority of voters' fetch offsets (the leader counts its flushed
end), and only moves once it covers this leader's first entry (paper 5.4.2).

Follower side: one fetch in flight, resent after ``3 * heartbeat_ticks`` without an
answer; any answer from the leader resets the fetch timeout (``election_ticks``,
randomised); when it fires a voter campaigns and an observer forgets the leader.
Check-quorum: a leader that has not had fetches from a majority of voters in the last
1.5 x ``election_ticks`` resigns (KIP-595 "check quorum"; Kafka's LeaderState timer).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .messages import (
    BeginQuorumEpoch, FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse,
)
from .quorum import majority, majority_offset
from .states import Follower, Leader, Resigned, Unattached

if TYPE_CHECKING:
    from .core import RaftCore

__all__ = ["Replication"]


class Replication:
    """Replication state of one core: leader progress or follower fetch bookkeeping."""

    def __init__(self, core: "RaftCore") -> None:
        self.core = core
        # leader
        self.progress: dict[int, int] = {}  # replica -> last valid fetch offset
        self.last_fetch: dict[int, int] = {}  # replica -> tick of its last fetch
        self.parked: dict[int, tuple[int, FetchRequest]] = {}  # replica -> (tick, request)
        self.hw_sent: dict[int, int] = {}  # replica -> high watermark it was last sent
        # follower / observer
        self.fetch_sent_at: int | None = None
        self.snapshot_pending = False
        self.last_contact = -(10**9)

    # --- role changes --------------------------------------------------------------
    def on_become_leader(self) -> None:
        core = self.core
        self.progress = {}
        self.parked = {}
        self.hw_sent = {}
        self.last_fetch = {v: core.now for v in core.voters}
        self.append_as_leader([b""], control=True)  # KRaft LeaderChangeMessage
        self._announce()

    def on_stop_leading(self) -> None:
        self.progress, self.parked, self.last_fetch, self.hw_sent = {}, {}, {}, {}

    def on_become_follower(self, *, contact: bool = True) -> None:
        """``contact``: the leader was just heard from (False when restarting from the
        persisted quorum state, which proves nothing about the leader being alive)."""
        self.fetch_sent_at = None
        self.snapshot_pending = False
        self.last_contact = self.core.now if contact else -(10**9)
        self._send_fetch()

    # --- leader --------------------------------------------------------------------
    def append_as_leader(self, payloads: list[bytes], *, control: bool) -> int:
        core = self.core
        state = core.state
        assert isinstance(state, Leader)
        first = core.log.end_offset
        last = core.log.append_as_leader(payloads, state.epoch, control=control)
        core.appended.extend(core.log.read(first, last - first + 1))
        self._answer_parked(force=False)
        if len(core.voters) == 1:
            self.maybe_advance_high_watermark()
        return last

    def maybe_advance_high_watermark(self) -> None:
        core = self.core
        state = core.state
        if not isinstance(state, Leader):
            return
        offsets = {v: self.progress.get(v, 0) for v in core.voters}
        offsets[core.node_id] = core.log.flushed_end_offset
        candidate = majority_offset(core.voters, offsets)
        if candidate > state.epoch_start_offset and candidate > core.high_watermark:
            core.high_watermark = candidate
            self._answer_parked(force=True)

    def leader_tick(self) -> None:
        core = self.core
        hb = core.config.heartbeat_ticks
        if core.config.check_quorum:
            since = core.now - self.check_quorum_ticks()
            alive = sum(1 for v in core.voters if v == core.node_id or self.last_fetch.get(v, -1) >= since)
            if alive < majority(len(core.voters)):
                core.become(Resigned(core.epoch, core.node_id))
                core.reset_election_timer()
                return
        if core.now % hb == 0:
            self._announce()
        stale = [r for r, (at, _) in self.parked.items() if core.now - at >= hb]
        for replica in stale:
            _, request = self.parked.pop(replica)
            self._answer(request, may_park=False)

    def check_quorum_ticks(self) -> int:
        """How long a leader may go without fetches from a majority: 1.5 election
        timeouts, as Kafka's ``LeaderState`` check-quorum timer."""
        return self.core.config.election_ticks * 3 // 2

    def _announce(self) -> None:
        core = self.core
        for voter in core.voters:
            if voter != core.node_id and voter not in self.progress:
                core.send(BeginQuorumEpoch(core.node_id, voter, core.epoch, core.node_id))

    def on_fetch_request(self, request: FetchRequest) -> None:
        core = self.core
        if request.epoch > core.epoch:
            core.observe(request.epoch, None)
        if not isinstance(core.state, Leader) or request.epoch < core.epoch:
            core.send(FetchResponse(core.node_id, request.src, core.epoch, core.leader_id,
                                    request.fetch_offset, request.last_fetched_epoch, not_leader=True))
            return
        self.last_fetch[request.src] = core.now
        self.parked.pop(request.src, None)
        self._answer(request, may_park=True)

    def _answer(self, request: FetchRequest, *, may_park: bool) -> None:
        core = self.core
        log = core.log
        offset, last_epoch = request.fetch_offset, request.last_fetched_epoch
        reply = dict(src=core.node_id, dst=request.src, epoch=core.epoch, leader_id=core.node_id,
                     fetch_offset=offset, last_fetched_epoch=last_epoch)
        snapshot = log.latest_snapshot()
        if snapshot is not None and (
            offset < log.start_offset
            or (offset == log.start_offset and last_epoch != snapshot.snapshot_id.epoch)
        ):
            core.send(FetchResponse(**reply, high_watermark=core.high_watermark, snapshot_id=snapshot.snapshot_id))
            return
        found = log.end_offset_for_epoch(last_epoch)
        if offset > log.end_offset or found.epoch != last_epoch or found.end_offset < offset:
            core.send(FetchResponse(**reply, high_watermark=core.high_watermark, diverging=found))
            return
        if request.src in core.voters:
            previous = self.progress.get(request.src, 0)
            self.progress[request.src] = max(previous, offset)
            if offset > previous:
                self.maybe_advance_high_watermark()
        else:
            self.progress[request.src] = offset
        entries = tuple(log.read(offset, core.config.fetch_max_entries))
        if not entries and may_park and self.hw_sent.get(request.src) == core.high_watermark:
            self.parked[request.src] = (core.now, request)
            return
        self.hw_sent[request.src] = core.high_watermark
        core.send(FetchResponse(**reply, entries=entries, high_watermark=core.high_watermark))

    def _answer_parked(self, *, force: bool) -> None:
        parked, self.parked = self.parked, {}
        for _, request in parked.values():
            self._answer(request, may_park=not force)

    def on_fetch_snapshot_request(self, request: FetchSnapshotRequest) -> None:
        core = self.core
        if request.epoch > core.epoch:
            core.observe(request.epoch, None)
        leading = isinstance(core.state, Leader) and request.epoch == core.epoch
        snapshot = core.log.latest_snapshot() if leading else None
        if leading:
            self.last_fetch[request.src] = core.now
        core.send(FetchSnapshotResponse(core.node_id, request.src, core.epoch, core.leader_id, snapshot))

    # --- follower / observer -------------------------------------------------------
    def heard_from_leader_recently(self) -> bool:
        return self.core.now - self.last_contact < self.core.config.election_ticks

    def follower_tick(self) -> None:
        core = self.core
        retry = 3 * core.config.heartbeat_ticks
        if self.fetch_sent_at is None or core.now - self.fetch_sent_at >= retry:
            self.snapshot_pending = False
            self._send_fetch()

    def on_fetch_timeout(self) -> None:
        core = self.core
        if core.is_voter:
            from .election import on_election_timeout

            on_election_timeout(core)
        else:
            core.become(Unattached(core.epoch))  # forget the leader, rediscover it
            core.reset_election_timer()

    def observer_discovery_tick(self) -> None:
        core = self.core
        if core.now % core.config.heartbeat_ticks == 0:
            target = core.rng.choice(core.voters)
            core.send(FetchRequest(core.node_id, target, core.epoch, core.log.end_offset, core.log.last_epoch))

    def _send_fetch(self) -> None:
        core = self.core
        leader = core.leader_id
        if leader is None or leader == core.node_id:
            return
        self.fetch_sent_at = core.now
        core.send(FetchRequest(core.node_id, leader, core.epoch, core.log.end_offset, core.log.last_epoch))

    def on_fetch_response(self, response: FetchResponse) -> None:
        core = self.core
        core.observe(response.epoch, response.leader_id)
        state = core.state
        if not isinstance(state, Follower) or response.epoch != state.epoch or response.src != state.leader_id:
            return
        if response.not_leader:
            return
        self.last_contact = core.now
        core.reset_election_timer()
        log = core.log
        if response.fetch_offset != log.end_offset or response.last_fetched_epoch != log.last_epoch:
            return  # stale (duplicate or answered after we moved on)
        self.fetch_sent_at = None
        if response.snapshot_id is not None:
            self.snapshot_pending = True
            self.fetch_sent_at = core.now
            core.send(FetchSnapshotRequest(core.node_id, state.leader_id, state.epoch, response.snapshot_id))
            return
        if response.diverging is not None:
            # KIP-595: truncate to the hint, but no further than where our own copy of the
            # hint's epoch ends (our entries there may be from a later, different epoch).
            # Epoch 0 means "older than anything the leader holds outside its snapshot": the
            # hint's offset is then the leader's log start, and a snapshot fetch follows.
            target = min(response.diverging.end_offset, log.end_offset)
            if response.diverging.epoch > 0:
                target = min(target, log.end_offset_for_epoch(response.diverging.epoch).end_offset)
            if target < core.high_watermark:
                raise RuntimeError(
                    f"node {core.node_id}: leader {response.src} asks to truncate to {target}, "
                    f"below the high watermark {core.high_watermark}"
                )
            if target < log.start_offset:
                raise RuntimeError(f"node {core.node_id}: truncation to {target} below log start")
            log.truncate_to(target)
            core.appended = [e for e in core.appended if e.offset < target]
        elif response.entries:
            log.append_as_follower(response.entries)
            core.appended.extend(response.entries)
        high = min(response.high_watermark, log.end_offset) if response.diverging is None else core.high_watermark
        core.high_watermark = max(core.high_watermark, high)
        self._send_fetch()

    def on_fetch_snapshot_response(self, response: FetchSnapshotResponse) -> None:
        core = self.core
        core.observe(response.epoch, response.leader_id)
        state = core.state
        if not isinstance(state, Follower) or response.src != state.leader_id or response.epoch != state.epoch:
            return
        self.last_contact = core.now
        core.reset_election_timer()
        snapshot = response.snapshot
        self.snapshot_pending = False
        self.fetch_sent_at = None
        if snapshot is not None and snapshot.snapshot_id.end_offset >= core.log.end_offset:
            core.log.install_snapshot(snapshot)
            core.appended = []
            core.high_watermark = max(core.high_watermark, snapshot.snapshot_id.end_offset)
            core.restore = snapshot
        self._send_fetch()
