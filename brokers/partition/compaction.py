"""``CompactionState``: one replica's compaction bookkeeping and decisions (pure).

The state follows the plans in the partition's log (``brokers/log/cleaner/plan.py``):

- ``applied``: the last plan this replica applied and its plan frame's offset; its end is
  the replica's **cleaned offset** (every record below it is compacted).  Loaded from the
  cleaner checkpoint when the replica opens.
- ``latest``: the latest plan frame the log holds (seen when the leader appends it, when a
  follower copies it, or when the log is replayed at open or after a truncation).

Decisions, from log facts passed in:

- ``pending(high_watermark)``: the plan to apply: the latest one, once its frame is below
  the high watermark (committed) and it ends past the cleaned offset.  Uncommitted plans
  are never applied: a leader change could truncate them away, and then this replica
  alone would have cleaned.
- ``may_plan()``: a leader plans a new clean only when no plan of its log is still waiting
  to be applied (plans are serial).
- ``requested``: someone asked for a clean (``topics compact``); the leader plans as soon
  as it can make progress, and forgets the request once a plan makes none.

Thread-safety: none; the partition's lock guards it.
"""
from __future__ import annotations

from dataclasses import dataclass

from brokers.log.cleaner.checkpoint import CleanerCheckpoint
from brokers.log.cleaner.plan import CompactionPlan

__all__ = ["PlanAt", "CompactionState"]


@dataclass(frozen=True, slots=True)
class PlanAt:
    """A plan and the offset of its plan frame."""

    offset: int
    plan: CompactionPlan


class CompactionState:
    """See the module docstring.  ``log_start_offset`` is where an un-cleaned log starts."""

    def __init__(self, checkpoint: CleanerCheckpoint | None, *, log_start_offset: int) -> None:
        self.applied: PlanAt | None = None
        self.cleaned_offset = log_start_offset
        if checkpoint is not None and checkpoint.plan is not None:
            self.applied = PlanAt(checkpoint.plan_offset, checkpoint.plan)
            self.cleaned_offset = max(checkpoint.cleaned_offset, log_start_offset)
        self.latest: PlanAt | None = self.applied
        self.requested = False

    def on_plan_frame(self, offset: int, plan: CompactionPlan) -> None:
        """A plan frame at ``offset`` is in the log (appended, copied or replayed)."""
        if self.latest is None or offset > self.latest.offset:
            self.latest = PlanAt(offset, plan)

    def on_replay_start(self) -> None:
        """The log is about to be replayed (open, truncation): forget plans not applied;
        the replay finds the ones still there."""
        self.latest = self.applied

    def on_log_start(self, log_start_offset: int) -> None:
        """Records below the log start are gone (retention): nothing to clean there."""
        self.cleaned_offset = max(self.cleaned_offset, log_start_offset)

    def pending(self, high_watermark: int) -> PlanAt | None:
        latest = self.latest
        if latest is None or latest.offset >= high_watermark:
            return None
        if self.applied is not None and latest.offset <= self.applied.offset:
            return None
        return latest

    def may_plan(self) -> bool:
        latest = self.latest
        return latest is None or (self.applied is not None and latest.offset <= self.applied.offset)

    @property
    def previous_plan(self) -> CompactionPlan | None:
        """The latest plan known (its horizons bound the next plan's from below)."""
        return None if self.latest is None else self.latest.plan

    def on_applied(self, at: PlanAt) -> CleanerCheckpoint:
        """``at`` was applied: the new cleaned offset; returns the checkpoint to write."""
        self.applied = at
        self.cleaned_offset = max(self.cleaned_offset, at.plan.end_offset)
        if self.latest is None or self.latest.offset < at.offset:
            self.latest = at
        return CleanerCheckpoint(self.cleaned_offset, at.offset, at.plan)
