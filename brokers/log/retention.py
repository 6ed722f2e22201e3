"""Which whole segments retention deletes (pure: sizes and timestamps in, a count out).

Rules (Kafka's, minus rolling the active segment), oldest segment first; the active
(last) segment never goes, nor any segment holding an offset at or above the high watermark
(Kafka's ``deletableSegments``: a segment goes only once the next one starts at or below the
HW, so retention never deletes records the ISR may not hold yet, and the log start never
passes the HW):
- by time (``retention_ms >= 0``): a segment goes while ``now - its largest frame
  timestamp > retention_ms``; the first segment that stays ends the time rule;
- by size (``retention_bytes >= 0``), on what is left: with ``excess = total size -
  retention_bytes``, a segment goes while its size is <= the remaining excess.

Thread-safety: pure function.
"""
from __future__ import annotations

from typing import Sequence

__all__ = ["segments_below", "segments_to_delete", "tiered_segments_to_delete"]


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


def segments_below(base_offsets: Sequence[int], offset: int) -> int:
    """How many of the oldest segments (their ``base_offsets``, oldest first) lie entirely
    below ``offset``: a segment does once the next one starts at or below it.  Never the
    active (last) segment."""
    count = 0
    while count + 1 < len(base_offsets) and base_offsets[count + 1] <= offset:
        count += 1
    return count


def tiered_segments_to_delete(
    segments: Sequence[tuple[int, int, int]], *, below: int, retention_ms: int, retention_bytes: int, now_ms: int
) -> int:
    """A tiered log's local retention: how many of the oldest ``segments`` (``(base_offset,
    size_bytes, max_timestamp)``, oldest first) to delete by ``retention_ms`` /
    ``retention_bytes`` (``local.retention.*``, same rules as ``segments_to_delete``), but
    only segments whose offsets all lie below ``below`` (the tiered end: a segment goes only
    once the next one starts at or below it)."""
    eligible = segments_below([base for base, _, _ in segments], below)
    wanted = segments_to_delete([(size, stamp) for _, size, stamp in segments], retention_ms=retention_ms,
                                retention_bytes=retention_bytes, now_ms=now_ms)
    return min(eligible, wanted)
