"""The Delta tier as a partition knows it (pure): the TIERED control frame and ``TierState``.

Contract (docs/INTERNALS.md "tiering").  The tiering job commits records to the topic's
Delta table first; once that commit is durable it tells the partition's leader
(``Tiering.CommitTiered``) that the tier holds ``[start, end)``.  The leader appends a
TIERED control frame (``frame.ControlType.TIERED``, payload ``<qq`` end, start) and the
frame is replicated like data.  A replica acts on the latest tier frame *below its high
watermark* only (a frame that may still be truncated away is never acted on): local
retention (``local.retention.*``) deletes only segments entirely below that frame's ``end``,
and ListOffsets' "earliest" answers the tier's ``start``.  The frame sits at an offset at or
above ``end`` (it is appended after the records it speaks of were committed), so local
retention never deletes the latest tier frame, and the replay at open finds it again: the
tier state needs no file of its own.

What the leader checks (``tier_range_error``).  A reported range lies within ``[0, LSO]``,
never goes back, and keeps the tier and the local log one contiguous history: the first
range starts at or below the leader's log start, and each later one starts within the range
already recorded (tier retention moves ``start`` up, never past the old ``end``), so local
retention never deletes records that are neither tiered nor past the tier's start.  This
pure check does not read the Delta table; the broker's ``TieringHandler`` does before it
(``brokers/server/tiering.py``: a range the table's application transactions do not hold
is refused).  ``CommitTiered`` is for the tiering job alone: with security on it needs ALTER on the topic.

Thread-safety: none (the partition's lock).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from spark_log.frame import ControlType, FrameHeader, decode_control, encode_control

__all__ = ["TierMark", "TierState", "tier_frame", "read_tier_frame", "tier_range_error"]

_PAYLOAD = struct.Struct("<qq")


@dataclass(frozen=True, slots=True)
class TierMark:
    """A tier frame: at ``offset``, saying the tier holds ``[start, end)``."""

    offset: int
    start: int
    end: int


def tier_frame(*, start: int, end: int, timestamp_ms: int) -> bytes:
    return encode_control(int(ControlType.TIERED), _PAYLOAD.pack(end, start), timestamp_ms=timestamp_ms)


def read_tier_frame(data: bytes | memoryview, header: FrameHeader, position: int) -> tuple[int, int] | None:
    """``(start, end)`` of a tier frame; None for every other frame."""
    if not header.is_control or header.is_transactional or header.record_count != 1:
        return None
    kind, payload = decode_control(data, header, position)
    if kind != ControlType.TIERED or len(payload) != _PAYLOAD.size:
        return None
    end, start = _PAYLOAD.unpack(payload)
    return start, end


class TierState:
    """The tier frames a replica's log holds (the latest few), and which one counts."""

    def __init__(self) -> None:
        self._marks: list[TierMark] = []

    def reset(self) -> None:
        """The log is replayed from its start (open, truncation)."""
        self._marks.clear()

    def note(self, offset: int, start: int, end: int) -> None:
        if self._marks and offset <= self._marks[-1].offset:
            self._marks = [m for m in self._marks if m.offset < offset]
        self._marks.append(TierMark(offset, start, end))
        if len(self._marks) > 64:   # only the latest committed one matters; keep a short tail
            self._marks = self._marks[-64:]

    def latest(self) -> TierMark | None:
        """The latest tier frame in the log, committed or not (the leader's next frame must not go back)."""
        return self._marks[-1] if self._marks else None

    def committed(self, high_watermark: int) -> TierMark | None:
        """The latest tier frame below ``high_watermark``: the one a replica acts on."""
        for mark in reversed(self._marks):
            if mark.offset < high_watermark:
                return mark
        return None


def tier_range_error(latest: TierMark | None, *, start: int, end: int, log_start: int, lso: int) -> str | None:
    """Why the leader refuses the report that the tier holds ``[start, end)`` (None: it may
    record it), given the ``latest`` tier frame in its log, its log start and its last stable
    offset (module docstring: "What the leader checks")."""
    if not 0 <= start <= end <= lso:
        return f"a tiered range [{start}, {end}) must lie within [0, {lso}] (the last stable offset)"
    if latest is None:
        if start > log_start:
            return (f"the first tiered range [{start}, {end}) must start at or below the log start {log_start}: "
                    f"records [{log_start}, {start}) would be in neither the tier nor the brokers")
        return None
    if end < latest.end or start < latest.start:
        return f"the tier already holds [{latest.start}, {latest.end}); [{start}, {end}) would go back"
    if start > latest.end:
        return (f"the tier holds [{latest.start}, {latest.end}); [{start}, {end}) is not contiguous with it: "
                f"records [{latest.end}, {start}) would be in neither the tier nor the brokers")
    return None
