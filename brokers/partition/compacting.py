"""``CompactingPartition``: the compaction part of ``Partition`` (a mixin: the same object,
its lock and state; split off only to keep ``partition.py`` small).

The steps a clean takes with and without the partition's lock are ``cleaning.py``'s; the
bookkeeping is ``compaction.py``'s.  These methods are ``Partition``'s public compaction
surface: describe (``compaction_status``), the cleaner pool's (``compaction_priority``,
``clean``), the ``Compaction`` service's (``request_compaction``, ``offer_offset_map``,
``plan_with_map``), and the plan frames the log brings (``_note_plans``, from the replay
and the follower's appends).

Thread-safety: as ``Partition``: each public method takes the partition's lock at most
once at a time; ``clean`` runs its passes without it.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from brokers.log.cleaner.offset_map import OffsetMap
from brokers.log.cleaner.plan import CompactionPlan, next_plan, plan_frame, read_plan
from brokers.log.cleaner.records import KeySpec
from brokers.log.cleaner.throttle import Throttler
from brokers.log.partition_log import PartitionLog
from spark_log.clock import Clock
from spark_log.config import TopicConfig
from spark_log.errors import CompactionConflictError, InvalidRequestError, NotLeaderError, TopicNotCompactedError
from spark_log.frame import iter_frames

from .cleaning import ApplyJob, Cleaning, CleaningStatus, abandon, run_apply, run_plan
from .compaction import PlanAt
from .core import PartitionCore
from .messages import LogEnds
from .producer_state import ProducerRun

__all__ = ["CompactingPartition"]


class CompactingPartition:
    """Compaction methods of ``Partition`` (module docstring); ``Partition`` sets the fields."""

    topic: str
    partition: int
    directory: Path
    _cond: threading.Condition
    _core: PartitionCore
    _log: PartitionLog
    _config: TopicConfig
    _clock: Clock
    _cleaning: Cleaning
    _on_append: Callable[[], None]
    _on_compaction_work: Callable[[], None]

    def _note_plans(self, data: bytes | memoryview) -> None:
        """Tell the compaction state about the plan frames among ``data``'s frames."""
        for position, header in iter_frames(data, verify=False):
            if header.is_control:
                plan = read_plan(data, header, position)
                if plan is not None:
                    self._cleaning.state.on_plan_frame(header.base_offset, plan)

    # -- compaction (brokers/partition/cleaning.py) ---------------------------------------------

    def compaction_status(self) -> CleaningStatus:
        """The cleaned offset, dirty ratio and latest plan of this replica."""
        with self._cond:
            self._core.check_open()
            return self._status()

    def compaction_priority(self) -> float | None:
        """How urgent a clean of this replica is (None: nothing to do; ``clean`` runs it)."""
        with self._cond:
            if self._core.removed:
                return None
            offsets = self._core.offsets(LogEnds(self._log.log_start_offset, self._log.log_end_offset))
            return self._cleaning.priority(self._log, config=self._config, is_leader=self._core.is_leader,
                                           high_watermark=offsets.high_watermark,
                                           last_stable_offset=offsets.last_stable_offset,
                                           now_ms=self._clock.wall_ms())

    def request_compaction(self) -> CleaningStatus:
        """Ask the leader to plan a clean as soon as it can (``topics compact``).  Raises
        ``NotLeaderError`` and ``TopicNotCompactedError``."""
        with self._cond:
            self._check_compacted_leader()
            self._cleaning.state.requested = True
            return self._status()

    def _status(self) -> CleaningStatus:
        return self._cleaning.status(self._log, self._core.last_stable_offset(self._log.log_end_offset),
                                     config=self._config, now_ms=self._clock.wall_ms())

    def _signal_compaction(self) -> None:
        """Wake the cleaner when a committed plan waits to be applied (caller holds the lock)."""
        if self._cleaning.state.pending(self._core.high_watermark(self._log.log_end_offset)) is not None:
            self._on_compaction_work()

    def _check_compacted_leader(self) -> None:
        self._core.check_open()
        if not self._core.is_leader:
            raise NotLeaderError(f"this broker no longer leads {self.topic}-{self.partition}")
        if not self._config.compact:
            raise TopicNotCompactedError(f"topic {self.topic!r} has cleanup.policy={self._config.cleanup_policy}; "
                                         "set cleanup.policy=compact (or compact,delete) to compact it")

    def offer_offset_map(self, start: int, end: int, offset_map: OffsetMap) -> None:
        """A Spark job's key -> latest offset map of ``[start, end)``, for this replica's
        apply of the plan that ends at ``end`` (checked record by record then)."""
        with self._cond:
            self._core.check_open()
            self._cleaning.offered = {(start, end): offset_map}

    def plan_with_map(self, start: int, end: int, offset_map: OffsetMap) -> PlanAt:
        """Leader: publish a plan ending at ``end`` now, to be applied here with a Spark
        job's map of ``[start, end)``.  Raises ``CompactionConflictError`` (the cleaned
        offset is not ``start``, or a plan is still pending), ``InvalidRequestError`` (``end``
        past what may be cleaned), ``NotLeaderError``, ``TopicNotCompactedError``."""
        with self._cond:
            self._check_compacted_leader()
            state = self._cleaning.state
            if state.cleaned_offset != start or not state.may_plan():
                raise CompactionConflictError(
                    f"{self.topic}-{self.partition}: cleaned offset is {state.cleaned_offset} (the map starts at "
                    f"{start})" + ("" if state.may_plan() else "; a plan is still being applied"))
            limit = self._status().cleanable_end
            if not start < end <= limit:
                raise InvalidRequestError(f"{self.topic}-{self.partition}: a plan may end within ({start}, {limit}], "
                                          f"not at {end}")
            plan = next_plan(previous=state.previous_plan, end_offset=end, now_ms=self._clock.wall_ms(),
                             config=self._config)
            at = self._append_plan(plan, None)
            self._cleaning.offered = {(start, end): offset_map}
        self._on_append()
        return at

    def _append_plan(self, plan: CompactionPlan, offset_map: OffsetMap | None) -> PlanAt:
        """Append ``plan``'s frame as leader (caller holds the lock)."""
        plog, core = self._log, self._core
        info = plog.append_as_leader(plan_frame(plan, timestamp_ms=self._clock.wall_ms()), leader_epoch=core.leader_epoch)
        core.on_leader_append(ProducerRun(-1, -1, -1, 1), (), info.first_offset, plog.log_end_offset)
        self._cleaning.on_planned(info.first_offset, plan, offset_map)
        self._cond.notify_all()
        self._signal_compaction()
        return PlanAt(info.first_offset, plan)

    def clean(self, spec: KeySpec, *, throttle: Throttler, budget_bytes: int, stop: Callable[[], bool]) -> str | None:
        """Run one compaction job of this replica (``cleaning.py``); returns what it did
        (None: nothing to do).  The passes run without the lock; the swap takes it once."""
        with self._cond:
            if self._core.removed:
                return None
            offsets = self._core.offsets(LogEnds(self._log.log_start_offset, self._log.log_end_offset))
            job = self._cleaning.next_job(self._log, config=self._config, is_leader=self._core.is_leader,
                                          leader_epoch=self._core.leader_epoch, high_watermark=offsets.high_watermark,
                                          last_stable_offset=offsets.last_stable_offset, spec=spec,
                                          now_ms=self._clock.wall_ms(), aborted=self._core.aborted_between)
        if job is None:
            return None
        if not isinstance(job, ApplyJob):
            offset_map = run_plan(job, budget_bytes=budget_bytes, throttle=throttle, stop=stop)
            with self._cond:
                core = self._core
                if core.removed or not core.is_leader or core.leader_epoch != job.leader_epoch:
                    return None
                plan = self._cleaning.plan_for(job, offset_map, self._config)
                if plan is None:
                    return None
                at = self._append_plan(plan, offset_map)
            self._on_append()
            return f"planned a clean below {plan.end_offset} ({job.reason}) at offset {at.offset}"
        prepared = run_apply(job, throttle=throttle, stop=stop)
        with self._cond:
            if self._core.removed or (prepared.groups and not self._log.replace_segments(prepared.groups)):
                abandon(self.directory, prepared)
                return None
            self._cleaning.on_applied(job, prepared)
            retired = self._log.take_retired()
        for segment in retired:  # outside the lock: closing frees the deleted files' pages
            segment.close()
        stats = prepared.stats
        return (f"applied the plan at offset {job.at.offset} (below {job.at.plan.end_offset}): kept "
                f"{stats.records_kept} of {stats.records_read} records, {stats.bytes_read} -> {stats.bytes_written} bytes")
