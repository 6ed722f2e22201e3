"""The ordered set of a partition's segments, keyed by base offset.

Invariants the log keeps: base offsets strictly increase; each segment's
``next_offset`` is the next segment's ``base_offset`` (frames tile the offsets); the last
segment is the active one (the only one appended to) and there is always one.

Thread-safety: none; caller holds the partition lock.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Iterator

from .segment import Segment

__all__ = ["Segments"]


class Segments:
    """Segments in base-offset order with floor lookup (Kafka's ``LogSegments``)."""

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._segments: list[Segment] = []

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[Segment]:
        return iter(list(self._segments))

    @property
    def active(self) -> Segment:
        return self._segments[-1]

    @property
    def first(self) -> Segment:
        return self._segments[0]

    def add(self, segment: Segment) -> None:
        """Append ``segment``; its base offset must be above every other."""
        if self._bases and segment.base_offset <= self._bases[-1]:
            raise ValueError(f"segment {segment.base_offset} does not follow {self._bases[-1]}")
        self._bases.append(segment.base_offset)
        self._segments.append(segment)

    def floor(self, offset: int) -> Segment | None:
        """The segment with the largest base offset <= ``offset``."""
        i = bisect_right(self._bases, offset)
        return None if i == 0 else self._segments[i - 1]

    def higher(self, segment: Segment) -> Segment | None:
        """The segment after ``segment``."""
        i = bisect_right(self._bases, segment.base_offset)
        return self._segments[i] if i < len(self._segments) else None

    def from_offset(self, offset: int) -> list[Segment]:
        """Segments holding ``offset`` or anything after it, in order."""
        i = max(0, bisect_right(self._bases, offset) - 1)
        return self._segments[i:]

    def replace(self, old: list[Segment], new: Segment) -> None:
        """Put ``new`` where the consecutive segments ``old`` were (a cleaned group: same
        base offset as ``old[0]``, covering their offsets)."""
        i = self._segments.index(old[0])
        if self._segments[i: i + len(old)] != old or new.base_offset != old[0].base_offset:
            raise ValueError(f"segments {[s.base_offset for s in old]} are not consecutive here")
        self._segments[i: i + len(old)] = [new]
        self._bases[i: i + len(old)] = [new.base_offset]

    def remove(self, segment: Segment) -> None:
        i = self._segments.index(segment)
        del self._segments[i]
        del self._bases[i]

    def total_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    # -- compaction's questions (frame granularity, headers only) -------------------------

    def offset_bytes(self, start: int, end: int) -> int:
        """Stored bytes of the frames holding offsets in ``[start, end)``."""
        total = 0
        for segment in self._segments if end > start else ():
            if segment.next_offset <= start or segment.base_offset >= end:
                continue
            first = segment.locate(max(start, segment.base_offset))
            low = first.position if first is not None else segment.size
            after = segment.locate(end) if end < segment.next_offset else None
            high = after.position if after is not None else segment.size
            total += max(0, high - low)
        return total

    def first_frame_newer_than(self, start: int, end: int, timestamp_ms: int) -> int | None:
        """The base offset (raised to ``start``) of the first frame in ``[start, end)`` whose
        max timestamp is above ``timestamp_ms``; None if none is."""
        for segment in self._segments:
            if segment.next_offset <= start or segment.base_offset >= end or segment.max_timestamp <= timestamp_ms:
                continue
            first = segment.locate(max(start, segment.base_offset))
            for header in segment.headers_from(first.position if first is not None else segment.size):
                if header.base_offset >= end:
                    return None
                if header.max_timestamp > timestamp_ms:
                    return max(header.base_offset, start)
        return None

    def max_timestamp_at(self, offset: int) -> int | None:
        """The max timestamp of the frame holding ``offset`` (None: past the end)."""
        segment = self.floor(offset)
        while segment is not None and offset >= segment.next_offset:
            segment = self.higher(segment)
        found = segment.locate(offset) if segment is not None else None
        return None if found is None else found.max_timestamp
