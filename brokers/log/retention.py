"""Which whole segments retention deletes (pure: sizes and timestamps in, a count out).

Rules (Kafka's, minus rolling the active segment), oldest segment first; the active
(last) segment never goes:
- by time (``retention_ms >= 0``): a segment goes while ``now - its largest frame
  timestamp > retention_ms``; the first segment that stays ends the time rule;
- by size (``retention_bytes >= 0``), on what is left: with ``excess = total size -
  retention_bytes``, a segment goes while its size is <= the remaining excess.

Thread-safety: pure function.
"""
from __future__ import annotations

from typing import Sequence

__all__ = ["segments_to_delete"]


def segments_to_delete(
    segments: Sequence[tuple[int, int]], *, retention_ms: int, retention_bytes: int, now_ms: int
) -> int:
    """How many of the oldest ``segments`` (``(size_bytes, max_timestamp)``, oldest first) to delete."""
    deletable = max(0, len(segments) - 1)  # never the active segment
    count = 0
    if retention_ms >= 0:
        while count < deletable and now_ms - segments[count][1] > retention_ms:
            count += 1
    if retention_bytes >= 0:
        excess = sum(size for size, _ in segments[count:]) - retention_bytes
        while count < deletable and excess >= segments[count][0]:
            excess -= segments[count][0]
            count += 1
    return count
