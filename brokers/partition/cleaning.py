"""Compaction of one hosted replica: the steps ``Partition.clean`` takes with and without
its lock (the rules: ``brokers/log/cleaner/plan.py``; the bookkeeping: ``compaction.py``).

A cleaner thread calls ``Partition.clean``, which runs one job:

- **apply** (any replica; first): the latest plan of the log is committed (below the high
  watermark) and not applied yet.  Under the lock: roll the active segment if the plan ends
  inside it, snapshot the closed segments below the plan's end.  Without the lock: the
  offset map of the dirty range (the map the leader built when it planned, or a Spark
  job's offered map, checked record by record, or a new one), the producers' last frames,
  and every changed group's cleaned segment written aside.  Under the lock again, one
  swap every group in at once (``PartitionLog.replace_segments``); then the cleaner
  checkpoint.  If the swap is refused (retention, truncation or a reopen changed the
  segments) the job stops and the plan is applied again later.
- **plan** (the leader): nothing pending, the log is compacted and dirty enough (or a
  clean was asked for, or ``max.compaction.lag.ms`` passed).  Without the lock: build the
  offset map from the cleaned offset towards the cleanable end, stopping at the dedupe
  budget and at records younger than ``min.compaction.lag.ms``.  Under the lock: still the
  leader in the same epoch with the same cleaned offset: append the plan frame
  (``CompactionPlan`` with horizons from the injected wall clock) and keep the map for the
  apply job.

Thread-safety: a ``Cleaning`` is used under the partition's lock, except the ``run_*``
functions, which touch only their job.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from brokers.log.cleaner import checkpoint as cleaner_checkpoint
from brokers.log import crash_points as crash
from brokers.log.cleaner.cleaner import Prepared, build_map, discard, prepare, producer_frames
from brokers.log.cleaner.filter import CleanStats
from brokers.log.cleaner.offset_map import OffsetMap
from brokers.log.cleaner.plan import CompactionPlan, clean_reason, cleanable_end, dirty_ratio, next_plan
from brokers.log.cleaner.records import KeySpec
from brokers.log.cleaner.throttle import Throttler
from brokers.log.partition_log import PartitionLog
from brokers.log.snapshot import LogSnapshot
from spark_log.config import TopicConfig
from spark_log.errors import InvalidOffsetMapError

from .compaction import CompactionState, PlanAt

__all__ = ["Cleaning", "CleaningStatus", "PlanJob", "ApplyJob", "run_plan", "run_apply"]

log = logging.getLogger(__name__)

_UNBOUNDED = 2**62


@dataclass(frozen=True, slots=True)
class CleaningStatus:
    """What describe shows: the cleaned offset, the dirty share of the cleanable log, the
    latest plan (offset -1: none) and whether a clean was asked for and not done yet."""

    cleaned_offset: int
    cleanable_end: int
    clean_bytes: int
    dirty_bytes: int
    dirty_ratio: float
    plan_offset: int
    plan: CompactionPlan | None
    applied_plan_offset: int
    requested: bool
    last: CleanStats


@dataclass(slots=True)
class PlanJob:
    snapshot: LogSnapshot
    start: int
    limit: int
    leader_epoch: int
    spec: KeySpec
    young_after_ms: int | None
    now_ms: int
    reason: str


@dataclass(slots=True)
class ApplyJob:
    snapshot: LogSnapshot
    at: PlanAt
    start: int
    spec: KeySpec
    offset_map: OffsetMap | None
    checking: bool


@dataclass(slots=True)
class Cleaning:
    """One replica's compaction state plus the maps waiting for its next apply job."""

    directory: Path
    state: CompactionState
    planned: dict[int, OffsetMap] = field(default_factory=dict)  # plan offset -> the leader's map
    offered: dict[tuple[int, int], OffsetMap] = field(default_factory=dict)  # (start, end) -> a job's map
    last: CleanStats = field(default_factory=CleanStats)

    @classmethod
    def open(cls, directory: Path, *, log_start_offset: int) -> "Cleaning":
        state = CompactionState(cleaner_checkpoint.read(directory), log_start_offset=log_start_offset)
        return cls(directory, state)

    # -- describe ---------------------------------------------------------------------------

    def status(self, plog: PartitionLog, last_stable_offset: int, *, config: TopicConfig, now_ms: int) -> CleaningStatus:
        """Describe's view; the cleanable end honours ``min.compaction.lag.ms`` (a header walk
        over the dirty range when that lag is set)."""
        state = self.state
        state.on_log_start(plog.log_start_offset)
        limit = cleanable_end(last_stable_offset=last_stable_offset, active_base_offset=plog.segment_base_offsets[-1],
                              young_from=None)
        if config.min_compaction_lag_ms > 0 and limit > state.cleaned_offset:
            young = plog.first_frame_newer_than(state.cleaned_offset, limit, now_ms - config.min_compaction_lag_ms)
            limit = cleanable_end(last_stable_offset=limit, active_base_offset=limit, young_from=young)
        limit = max(state.cleaned_offset, limit)
        clean = plog.offset_bytes(plog.log_start_offset, state.cleaned_offset)
        dirty = plog.offset_bytes(state.cleaned_offset, limit)
        latest, applied = state.latest, state.applied
        return CleaningStatus(state.cleaned_offset, limit, clean, dirty, dirty_ratio(clean_bytes=clean, dirty_bytes=dirty),
                              latest.offset if latest else -1, latest.plan if latest else None,
                              applied.offset if applied else -1, state.requested, self.last)

    # -- choosing a job (under the lock) ----------------------------------------------------

    def next_job(self, plog: PartitionLog, *, config: TopicConfig, is_leader: bool, leader_epoch: int,
                 high_watermark: int, last_stable_offset: int, spec: KeySpec,
                 now_ms: int, aborted: Callable[[int, int], Sequence[tuple[int, int, int]]] = lambda s, e: ()
                 ) -> PlanJob | ApplyJob | None:
        state = self.state
        state.on_log_start(plog.log_start_offset)
        pending = state.pending(high_watermark)
        if pending is not None:
            start = state.cleaned_offset
            end = pending.plan.end_offset
            plog.roll_below(end)
            offered = self.offered.pop((start, end), None)
            planned = self.planned.pop(pending.offset, None)
            own = planned if planned is not None and planned.start == start and planned.end >= end else None
            snapshot = plog.cleaner_snapshot(end)
            snapshot.aborted = tuple(aborted(start, end))
            return ApplyJob(snapshot, pending, start, spec, own or offered,
                            checking=own is None and offered is not None)
        if not is_leader or not config.compact or not state.may_plan():
            return None
        status = self.status(plog, last_stable_offset, config=config, now_ms=now_ms)
        reason = self._reason(plog, status, config, now_ms)
        if reason is None:
            return None
        young = now_ms - config.min_compaction_lag_ms if config.min_compaction_lag_ms > 0 else None
        snapshot = plog.cleaner_snapshot(status.cleanable_end)
        snapshot.aborted = tuple(aborted(state.cleaned_offset, status.cleanable_end))
        return PlanJob(snapshot, state.cleaned_offset, status.cleanable_end,
                       leader_epoch, spec, young, now_ms, reason)

    def priority(self, plog: PartitionLog, *, config: TopicConfig, is_leader: bool, high_watermark: int,
                 last_stable_offset: int, now_ms: int) -> float | None:
        """How urgent a job is (higher first; None: no job): a committed plan waiting to be
        applied comes first, then the dirtiest log that may be planned."""
        state = self.state
        if state.pending(high_watermark) is not None:
            return float("inf")
        if not is_leader or not config.compact:
            state.requested = False
            return None
        if not state.may_plan():
            return None
        status = self.status(plog, last_stable_offset, config=config, now_ms=now_ms)
        reason = self._reason(plog, status, config, now_ms)
        return None if reason is None else status.dirty_ratio + (1.0 if state.requested else 0.0)

    def _reason(self, plog: PartitionLog, status: CleaningStatus, config: TopicConfig, now_ms: int) -> str | None:
        """Why to plan now (``plan.clean_reason``); a request that cannot make progress
        (nothing dirty) is dropped."""
        state = self.state
        reason = clean_reason(ratio=status.dirty_ratio, dirty_bytes=status.dirty_bytes,
                              first_dirty_timestamp_ms=plog.first_timestamp_at(state.cleaned_offset), now_ms=now_ms,
                              config=config, requested=state.requested)
        if reason is None:
            state.requested = False
        return reason

    # -- finishing (under the lock) ---------------------------------------------------------

    def plan_for(self, job: PlanJob, offset_map: OffsetMap, config: TopicConfig) -> CompactionPlan | None:
        """The plan a finished ``PlanJob`` makes (None: no progress; the request is dropped)."""
        if offset_map.end <= job.start or job.start != self.state.cleaned_offset or not self.state.may_plan():
            self.state.requested = False
            return None
        return next_plan(previous=self.state.previous_plan, end_offset=offset_map.end, now_ms=job.now_ms,
                         config=config)

    def on_planned(self, offset: int, plan: CompactionPlan, offset_map: OffsetMap | None) -> None:
        """The leader appended ``plan`` at ``offset``; its map waits for the apply job."""
        self.state.on_plan_frame(offset, plan)
        if offset_map is not None:
            self.planned = {offset: offset_map}

    def on_applied(self, job: ApplyJob, prepared: Prepared) -> None:
        """Every group of ``job`` was swapped in: checkpoint (crash point before it)."""
        crash.reach("before-checkpoint")
        cleaner_checkpoint.write(self.directory, self.state.on_applied(job.at))
        self.last = prepared.stats


def run_plan(job: PlanJob, *, budget_bytes: int, throttle: Throttler, stop: Callable[[], bool]) -> OffsetMap:
    """The plan job's pass (no lock): the offset map from the cleaned offset on."""
    try:
        return build_map(job.snapshot, start=job.start, end=job.limit, spec=job.spec, budget_bytes=budget_bytes,
                         throttle=throttle, stop=stop, young_after_ms=job.young_after_ms)
    finally:
        job.snapshot.close()


def run_apply(job: ApplyJob, *, throttle: Throttler, stop: Callable[[], bool]) -> Prepared:
    """The apply job's passes (no lock): the cleaned segments written aside.  An offered map
    that fails its check is dropped (logged) and the job uses a map of its own."""
    snapshot, plan = job.snapshot, job.at.plan
    try:
        producers = producer_frames(snapshot, plan.end_offset)
        if job.offset_map is not None:
            try:
                return prepare(snapshot, plan=plan, spec=job.spec, offset_map=job.offset_map, checking=job.checking,
                               last_frame_of=producers, throttle=throttle, stop=stop)
            except InvalidOffsetMapError as exc:
                log.warning("%s: the offered offset map was refused (%s); building one", snapshot.directory,
                            exc.message)
        own = build_map(snapshot, start=job.start, end=plan.end_offset, spec=job.spec, budget_bytes=_UNBOUNDED,
                        throttle=throttle, stop=stop)
        return prepare(snapshot, plan=plan, spec=job.spec, offset_map=own, checking=False, last_frame_of=producers,
                       throttle=throttle, stop=stop)
    finally:
        snapshot.close()


def abandon(directory: Path, prepared: Prepared) -> None:
    """Drop the cleaned files of groups not swapped in."""
    discard(directory, prepared)
