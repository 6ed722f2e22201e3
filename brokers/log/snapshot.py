"""What the log hands its cleaner (``brokers/log/cleaner``) and takes back.

- ``LogSnapshot`` (``PartitionLog.cleaner_snapshot``): the closed segments below a bound,
  each with a read-only file descriptor of the cleaner's own, opened under the partition's
  lock; the cleaner reads them without it (a segment that retention deletes meanwhile
  still reads through its descriptor).  ``close`` releases the descriptors.
- ``CleanedGroup``: a cleaned segment written aside (``swap.cleaned_path``) for consecutive
  old segments; ``PartitionLog.replace_segments`` swaps it in if those segments (``tokens``:
  the log's own segment objects, and their total size) are still the log's and the log was
  not truncated since the snapshot (``generation``: a truncation can remove the records
  that made others obsolete).

Thread-safety: values; a snapshot is used by one cleaner thread.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import files

__all__ = ["SegmentFile", "LogSnapshot", "CleanedGroup"]


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """A closed segment as a clean sees it."""

    base_offset: int
    next_offset: int
    size: int
    fd: int
    token: object


@dataclass(slots=True)
class LogSnapshot:
    """Closed segments in offset order (module docstring)."""

    directory: Path
    log_start_offset: int
    segments: list[SegmentFile]
    segment_bytes: int
    generation: int = 0  # the log's truncation count when taken
    # aborted transactions with records below the snapshot's end ((producer id, first offset,
    # abort marker offset)): the cleaner treats their records as never written
    aborted: tuple[tuple[int, int, int], ...] = ()

    def is_aborted(self, producer_id: int, offset: int) -> bool:
        return any(pid == producer_id and first <= offset <= last for pid, first, last in self.aborted)

    def close(self) -> None:
        for segment in self.segments:
            try:
                files.close(segment.fd)
            except OSError:
                pass
        self.segments = []


@dataclass(slots=True)
class CleanedGroup:
    """One group's cleaned segment, written aside at ``swap.cleaned_path(base_offset)``."""

    base_offset: int
    tokens: list[object]
    old_bases: list[int]
    bytes_before: int
    bytes_after: int
    generation: int = 0  # the snapshot's: a truncation since then refuses the swap
