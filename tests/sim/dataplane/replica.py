"""``SimReplica``: the ``Partition`` shell of ``brokers/partition/partition.py`` over a ``SimLog``.

Every decision is the real ``PartitionCore``'s; this shell does what ``Partition`` does
around it, step for step (its method names are ``Partition``'s): it feeds the core the log
facts of the moment (``LogEnds``, epoch entries) and the simulated clock, appends and
truncates the log where ``Partition`` does, and replays the producer state after a
truncation or on open.  What ``Partition`` does with locks and conditions (waiters for
acks=all and sequence gaps) is the broker's (``broker.py``) here: the simulation is one
thread and re-evaluates waiters after every change.

A change to this shell that ``Partition`` did not make (or the reverse) makes the
simulation test something else than the product: keep them in step.
"""
from __future__ import annotations

from typing import Callable

from brokers.partition.core import PartitionCore
from brokers.partition.messages import (
    Duplicate,
    FetchPosition,
    FollowerFetch,
    FollowerFetchDecision,
    Isolation,
    IsrChange,
    LeaderAndIsr,
    PartitionOffsets,
    SequenceGap,
)
from brokers.partition.producer_state import ProducerRun

from .simlog import SimFrame, SimLog

__all__ = ["SimReplica", "Appended"]


class Appended:
    """``AppendOutcome``: first/last offset, duplicate, and the epoch of the append."""

    __slots__ = ("first", "last", "duplicate", "epoch")

    def __init__(self, first: int, last: int, duplicate: bool, epoch: int) -> None:
        self.first, self.last, self.duplicate, self.epoch = first, last, duplicate, epoch


class SimReplica:
    def __init__(self, *, broker_id: int, topic: str, partition: int, log: SimLog, now: Callable[[], int],
                 touched: Callable[[], None] = lambda: None) -> None:
        self.topic = topic
        self.touched = touched   # the invariants look again at this replica after the event
        self.partition = partition
        self.log = log
        self._now = now
        self.core = PartitionCore(name=f"{topic}-{partition}", broker_id=broker_id)
        self._replay_producers()

    # -- leadership and offsets -------------------------------------------------------------

    def become(self, state: LeaderAndIsr) -> None:
        self.touched()
        self.core.become(state, self.log.ends, self._now())

    @property
    def is_leader(self) -> bool:
        return self.core.is_leader

    @property
    def high_watermark(self) -> int:
        return self.core.high_watermark(self.log.leo)

    def offsets(self) -> PartitionOffsets:
        self.core.check_open()
        return self.core.offsets(self.log.ends)

    def listable_offsets(self) -> PartitionOffsets:
        self.core.check_open()
        return self.core.listable_offsets(self.log.ends)

    # -- produce ----------------------------------------------------------------------------

    def append_as_leader(self, frames: list[SimFrame], *, acks_all: bool, min_isr: int) -> Appended | None:
        """``Partition.append_as_leader`` without the gap wait: None on a sequence gap (the
        broker waits and calls again); raises what the core raises, appending nothing."""
        self.touched()
        headers = [f.header() for f in frames]
        run = ProducerRun.of(headers)
        core = self.core
        decision = core.decide_produce(run, min_insync_replicas=min_isr if acks_all else None)
        if isinstance(decision, SequenceGap):
            return None
        if isinstance(decision, Duplicate):
            return Appended(decision.first_offset, decision.last_offset, True, core.leader_epoch)
        stamped = self.log.append_leader(frames, core.leader_epoch)
        core.on_leader_append(run, [f.header() for f in stamped], stamped[0].base_offset, self.log.leo)
        return Appended(stamped[0].base_offset, stamped[-1].next_offset - 1, False, core.leader_epoch)

    def replicated(self, offset: int, leader_epoch: int, min_isr: int | None = None) -> bool:
        return self.core.replicated(offset, leader_epoch, self.log.leo, min_isr)

    def sequence_gap_error(self, frames: list[SimFrame]) -> Exception:
        return self.core.sequence_gap_error(ProducerRun.of([f.header() for f in frames]))

    # -- consumers ----------------------------------------------------------------------------

    def read(self, offset: int, *, max_frames: int) -> tuple[list[SimFrame], PartitionOffsets]:
        self.core.check_open()
        ends = self.log.ends
        bound = self.core.read_bound(Isolation.READ_UNCOMMITTED, ends.log_end_offset, None)
        return self.log.read(offset, max_frames=max_frames, max_offset=bound), self.core.offsets(ends)

    # -- the leader's side of a follower fetch --------------------------------------------------

    def answer_follower_fetch(self, fetch: FollowerFetch, *,
                              max_frames: int) -> tuple[FollowerFetchDecision, list[SimFrame], PartitionOffsets]:
        self.touched()
        log = self.log
        ends = log.ends
        decision = self.core.on_follower_fetch(fetch, ends, log.epoch_entries(), self._now())
        frames: list[SimFrame] = []
        if decision.diverging is None and fetch.fetch_offset < ends.log_end_offset:
            frames = log.read(fetch.fetch_offset, max_frames=max_frames)
        return decision, frames, self.core.offsets(ends)

    # -- the follower's side ----------------------------------------------------------------------

    def fetch_position(self, leader_id: int) -> FetchPosition | None:
        return self.core.fetch_position(leader_id, self.log.ends, self.log.epoch_entries())

    def apply_fetched(self, leader_id: int, leader_epoch: int, diverging: tuple[int, int] | None,
                      frames: list[SimFrame], leader_hw: int) -> int | None:
        """``Partition.apply_fetched``; returns the truncation point when it truncated."""
        core, log = self.core, self.log
        if not core.follows(leader_id, leader_epoch):
            return None
        self.touched()
        if diverging is not None:
            from brokers.partition.messages import Diverging
            cut = core.truncation_offset(Diverging(*diverging), log.leo, log.epoch_entries())
            log.truncate_to(cut)
            core.on_truncated(log.leo)
            self._replay_producers()
            return cut
        leo = log.leo
        appended = [f for f in frames if f.base_offset >= leo]
        if appended:
            log.append_follower(appended)
            core.record_frames(f.header() for f in appended)
        core.on_leader_high_watermark(leader_hw, log.leo)
        return None

    # -- ISR (the real IsrUpdater calls these) ---------------------------------------------------

    def isr_change(self, lag_ms: int) -> IsrChange | None:
        return self.core.isr_change(self._now(), lag_ms)

    def clear_pending_isr(self) -> None:
        self.core.clear_pending_isr()

    # -- lifecycle ----------------------------------------------------------------------------

    def _replay_producers(self) -> None:
        self.core.record_frames(f.header() for f in self.log.frames)

    def close(self) -> None:
        self.touched()
        self.core.close()
