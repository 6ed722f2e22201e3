"""``ReplicaState``: one partition's replication state on this broker (pure).

Leader side (Kafka's ``Partition`` + ``Replica``): the log end offset each follower
reported through its last fetch (its ``fetch_offset``), the last time each follower was
caught up, the ISR as the metadata image last said, and the high watermark::

    HW = min(LEO of every ISR member)          (the leader's own LEO included)

The HW only moves forward while this broker leads in one epoch.  A new leader starts from
the HW it knew as a follower (never from its LEO: records above it may not be on the
other ISR members), and advances once every ISR member has fetched in the new epoch.

A follower is *caught up* (Kafka's ``lastCaughtUpTimeMs``, ``Replica.updateFetchState``) at
the time of a fetch from an offset >= the leader's LEO then, and at the time of its previous
fetch when it fetches from an offset >= the leader's LEO at that previous fetch: under steady
appends a follower that keeps up is always one fetch round behind the LEO of the moment.  ``out_of_sync(now_ms, lag_ms)``: ISR followers not
caught up within ``lag_ms`` (shrink candidates); ``expandable()``: followers outside the
ISR whose LEO reached the HW and the start of the current leader epoch (expand candidates).

Follower side: the HW is ``min(leader's HW from the last fetch answer, own LEO)``.

No clock, threads or IO: times are passed in (``now_ms``).  Thread-safety: none; owned by
``PartitionCore`` (the ``Partition`` shell holds its lock around every call).
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ReplicaState", "FollowerProgress", "ReplicaView"]


@dataclass(slots=True)
class FollowerProgress:
    log_end_offset: int = -1          # -1: has not fetched in this leader epoch
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1   # the leader's LEO at the last fetch (-1: none yet)


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """A read-only copy of the replication state (``ReplicaState.view``), for describe.

    ``log_end_offsets`` and ``caught_up_ms_ago`` name every replica (the leader's own LEO
    included; ``caught_up_ms_ago`` 0 for it); -1 for a follower that has not fetched in this
    leader epoch / whose catch-up time is unknown.  Followers' entries are empty off the leader."""

    is_leader: bool
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    pending_isr: tuple[int, ...]
    high_watermark: int
    log_end_offsets: dict[int, int]
    caught_up_ms_ago: dict[int, int]


@dataclass(slots=True)
class ReplicaState:
    broker_id: int
    is_leader: bool = False
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    high_watermark: int = 0
    leader_epoch_start_offset: int = 0
    pending_isr: tuple[int, ...] = ()   # an expansion asked for: the HW counts these too until the image settles it
    followers: dict[int, FollowerProgress] = field(default_factory=dict)

    # -- metadata ---------------------------------------------------------------------------

    def become_leader(self, *, leader_epoch: int, partition_epoch: int, replicas: tuple[int, ...],
                      isr: tuple[int, ...], log_end_offset: int, log_start_offset: int, now_ms: int) -> None:
        """Lead in ``leader_epoch``.  A new epoch forgets the followers' positions (they must
        fetch again) but counts every ISR member as caught up now, so none is shrunk before
        it had ``replica.lag.time.max.ms`` to fetch."""
        new_epoch = not self.is_leader or leader_epoch != self.leader_epoch
        self.is_leader = True
        if new_epoch or tuple(isr) != self.isr or partition_epoch != self.partition_epoch:
            # the image settled every ISR request built on the old partition epoch: one that
            # was accepted shows in ``isr``, the others can no longer be (stale epoch)
            self.pending_isr = ()
        self.partition_epoch = partition_epoch
        self.replicas, self.isr = tuple(replicas), tuple(isr)
        if new_epoch:
            self.leader_epoch = leader_epoch
            self.leader_epoch_start_offset = log_end_offset
            self.followers = {r: FollowerProgress(last_caught_up_ms=now_ms, last_fetch_ms=now_ms)
                              for r in self.replicas if r != self.broker_id}
        else:
            for r in self.replicas:
                if r != self.broker_id and r not in self.followers:
                    self.followers[r] = FollowerProgress(last_caught_up_ms=now_ms, last_fetch_ms=now_ms)
            for r in [r for r in self.followers if r not in self.replicas]:
                del self.followers[r]
        self.high_watermark = min(max(self.high_watermark, log_start_offset), log_end_offset)
        self.maybe_advance(log_end_offset)

    def become_follower(self, *, leader_epoch: int, partition_epoch: int, replicas: tuple[int, ...],
                        isr: tuple[int, ...], log_end_offset: int) -> None:
        self.is_leader = False
        self.pending_isr = ()
        self.leader_epoch, self.partition_epoch = leader_epoch, partition_epoch
        self.replicas, self.isr = tuple(replicas), tuple(isr)
        self.followers = {}
        self.high_watermark = min(self.high_watermark, log_end_offset)

    # -- leader -----------------------------------------------------------------------------

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The members the HW counts: the ISR and the joiners of an expansion in flight
        (Kafka's maximal ISR)."""
        return frozenset(self.isr) | frozenset(self.pending_isr)

    def maybe_advance(self, log_end_offset: int) -> bool:
        """Recompute the HW after the leader's LEO or a follower's position moved; True if it grew."""
        if not self.is_leader:
            return False
        candidate = log_end_offset
        for r in self.maximal_isr:
            if r == self.broker_id:
                continue
            progress = self.followers.get(r)
            if progress is None or progress.log_end_offset < 0:
                return False          # an ISR member has not fetched in this epoch yet
            candidate = min(candidate, progress.log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def on_follower_fetch(self, replica: int, *, fetch_offset: int, log_end_offset: int, now_ms: int) -> bool:
        """A follower fetched from ``fetch_offset`` (its LEO) while the leader's LEO is
        ``log_end_offset``; returns True when the HW grew.  Unknown replicas are ignored."""
        progress = self.followers.get(replica)
        if progress is None or not self.is_leader:
            return False
        progress.log_end_offset = min(fetch_offset, log_end_offset)
        if fetch_offset >= log_end_offset:
            progress.last_caught_up_ms = now_ms
        elif fetch_offset >= progress.last_fetch_leader_log_end_offset:
            # it reached where the leader's log ended at its previous fetch: caught up as of then
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.last_fetch_leader_log_end_offset = log_end_offset
        progress.last_fetch_ms = now_ms
        return self.maybe_advance(log_end_offset)

    def on_settled_fetch(self, replica: int, *, now_ms: int) -> None:
        """A caught-up follower fetched again from the same offset and nothing changed since
        (``PartitionCore.on_settled_follower_fetch``): only its times move."""
        progress = self.followers.get(replica)
        if progress is not None and self.is_leader:
            progress.last_fetch_ms = progress.last_caught_up_ms = now_ms

    def out_of_sync(self, *, now_ms: int, lag_ms: int) -> tuple[int, ...]:
        """ISR followers that have not been caught up within ``lag_ms``."""
        if not self.is_leader:
            return ()
        return tuple(r for r in self.isr if r != self.broker_id and r in self.followers
                     and now_ms - self.followers[r].last_caught_up_ms > lag_ms)

    def expandable(self, *, now_ms: int | None = None, lag_ms: int | None = None) -> tuple[int, ...]:
        """Replicas outside the ISR whose LEO reached the HW and the current epoch's start
        (with ``now_ms``/``lag_ms``: and that were caught up within ``lag_ms``, so a follower
        that stopped fetching, its last LEO still at the HW of an idle partition, is not
        added only to be shrunk again: it rejoins once it fetches)."""
        if not self.is_leader:
            return ()
        bar = max(self.high_watermark, self.leader_epoch_start_offset)
        return tuple(r for r, p in sorted(self.followers.items())
                     if r not in self.isr and p.log_end_offset >= 0 and p.log_end_offset >= bar
                     and (now_ms is None or lag_ms is None or now_ms - p.last_caught_up_ms <= lag_ms))

    def in_sync_count(self) -> int:
        return len(self.isr)

    def view(self, *, log_end_offset: int, now_ms: int) -> ReplicaView:
        """A copy of the state for describe (read only); ``log_end_offset`` is this broker's LEO."""
        leos: dict[int, int] = {}
        ages: dict[int, int] = {}
        if self.is_leader:
            for r in self.replicas:
                if r == self.broker_id:
                    leos[r], ages[r] = log_end_offset, 0
                    continue
                progress = self.followers.get(r)
                fetched = progress is not None and progress.log_end_offset >= 0
                leos[r] = progress.log_end_offset if progress is not None else -1
                ages[r] = max(0, now_ms - progress.last_caught_up_ms) if fetched and progress is not None else -1
        return ReplicaView(is_leader=self.is_leader, leader_epoch=self.leader_epoch,
                           partition_epoch=self.partition_epoch, replicas=self.replicas, isr=self.isr,
                           pending_isr=self.pending_isr, high_watermark=min(self.high_watermark, log_end_offset),
                           log_end_offsets=leos, caught_up_ms_ago=ages)

    # -- follower ---------------------------------------------------------------------------

    def on_leader_high_watermark(self, leader_hw: int, log_end_offset: int) -> bool:
        """Follower: the leader answered with ``leader_hw``; ours is that, capped by our LEO.
        Whether ours changed."""
        if self.is_leader:
            return False
        hw = max(0, min(leader_hw, log_end_offset))
        changed = hw != self.high_watermark
        self.high_watermark = hw
        return changed
