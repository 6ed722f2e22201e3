"""What PartitionLog returns from appends and reads (immutable values)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AppendInfo", "ReadResult"]


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What an append wrote: offsets ``first_offset..last_offset`` in ``frames`` frames;
    ``max_timestamp`` is the largest frame max timestamp (ms)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int
    frames: int


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole frames from the file; ``first_offset`` is the first frame's base offset (it may be
    below the offset asked for) and ``next_offset`` the offset after the last frame.  Empty
    data means nothing was readable (``first_offset == next_offset``)."""

    data: bytes | memoryview
    first_offset: int
    next_offset: int
