"""The cleaner checkpoint of one partition replica: ``cleaner-offset-checkpoint``.

One line in ``brokers/log/checkpoint.py``'s format (written with ``durable.atomic_write``:
the old content or the new, never a mix):

    <cleaned_offset> <plan_offset> <end_offset> <tombstone_horizon_ms> <producer_horizon_ms>

``cleaned_offset`` is the end of the last plan this replica applied (every record below it
is compacted: the first dirty offset, as Kafka's cleaner-offset-checkpoint), the plan
itself, and the offset of its plan frame (-1 for none).  Written after every swap of a
clean; so after a restart the cleaner neither redoes a finished clean nor skips an
unfinished one (a crash before the write re-applies the plan, which changes nothing that
is already clean).  A missing or damaged file counts as "nothing cleaned yet": the replica
looks for plans from its log start again.

Thread-safety: none; the caller serialises writes.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from .. import checkpoint

from .plan import CompactionPlan

__all__ = ["CleanerCheckpoint", "FILE_NAME", "read", "write"]

FILE_NAME = "cleaner-offset-checkpoint"

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CleanerCheckpoint:
    cleaned_offset: int
    plan_offset: int
    plan: CompactionPlan | None


def write(directory: Path, state: CleanerCheckpoint) -> None:
    plan = state.plan or CompactionPlan(0, -(2**63), -(2**63))
    line = (f"{state.cleaned_offset} {state.plan_offset} {plan.end_offset} {plan.tombstone_horizon_ms} "
            f"{plan.producer_horizon_ms}")
    checkpoint.write_lines(directory / FILE_NAME, [line])


def read(directory: Path) -> CleanerCheckpoint | None:
    """The checkpoint, or None when missing or damaged (logged)."""
    try:
        lines = checkpoint.read_lines(directory / FILE_NAME)
    except ValueError as exc:
        _log.warning("%s: ignoring the cleaner checkpoint: %s", directory, exc)
        return None
    if lines is None:
        return None
    try:
        cleaned, plan_offset, end, tombstones, producers = (int(part) for part in lines[0].split())
    except (ValueError, IndexError):
        _log.warning("%s: ignoring a damaged cleaner checkpoint %r", directory, lines)
        return None
    plan = CompactionPlan(end, tombstones, producers) if plan_offset >= 0 else None
    return CleanerCheckpoint(cleaned, plan_offset, plan)
