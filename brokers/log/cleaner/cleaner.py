"""The cleaner's passes over one log (the IO shell around the pure rules of ``plan.py`` and
``filter.py``).

A clean works on a ``LogSnapshot``: the closed segments below a bound, each with a
read-only file descriptor of the cleaner's own, opened while the partition was locked (so
a segment deleted meanwhile by retention still reads; ``PartitionLog.replace_segments``
then refuses the swap).  None of the passes holds the partition lock:

- ``producer_frames(snapshot, end)``: headers only; each producer id's last frame below
  ``end`` (which frames keep a producer's state);
- ``build_map(snapshot, start, end, ...)``: the ``OffsetMap`` of ``[start, end)`` (the
  dirty range), stopping early at the dedupe budget and, for a leader choosing a plan's
  end, at the first frame younger than ``min.compaction.lag.ms``.  It does not check the
  frames' CRCs: every frame below a plan's end is read again by ``prepare``, which checks
  each one before anything is written or swapped, so a damaged frame still fails the clean
  (a map built from it is never applied), and a plan's end is a frame boundary taken from
  the headers either way;
- ``prepare(snapshot, plan, ...)``: groups consecutive segments below the plan's end (up
  to ``segment.bytes`` of input each, under 2**32 offsets) and writes each group's cleaned
  segment aside (``swap.cleaned_path``); a one-segment group in which nothing changes is not
  written (small segments left by earlier cleans are merged when a clean passes them).
  With an offered map (``checking``) every record of the dirty range is checked against
  it and the map verified whole before anything is swapped.

The snapshot and the prepared groups are the log's types (``brokers/log/snapshot.py``);
the swap of each prepared group is ``PartitionLog.replace_segments`` (under the lock).
Reads and writes go through the shared ``Throttler``; ``stop()`` true aborts a pass
(``CleanAborted``) and removes what it wrote.

Thread-safety: one cleaner thread per snapshot.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from spark_log.frame import parse_header

from .. import crash_points as crash
from .. import swap
from ..scan import Peek, peek_headers, read_frames
from ..snapshot import CleanedGroup, LogSnapshot, SegmentFile
from .filter import CleanedOutput, CleanStats, FrameCleaner
from .offset_map import OffsetMap
from .plan import CompactionPlan
from .records import BatchReader, KeySpec, frame_keys
from .throttle import Throttler

__all__ = ["Prepared", "CleanAborted", "producer_frames", "build_map", "prepare", "discard"]

_FOLD_RECORDS = 1 << 20  # records queued before a fold (fewer folds when the budget allows)
_NO_KEYS = pa.nulls(0, pa.binary())  # not pa.array: that imports pandas (300 modules) at broker start
_NO_OFFSETS = np.zeros(0, dtype=np.int64)
_WRITE_BUFFER = 4 << 20
_READ_CHUNK = 1 << 20  # bytes per pread of a pass (a frame larger than this is read alone): a chunk
# this size is still in the CPU's cache when its frames are checked and decoded (8 MiB chunks
# cost a pass over 75 MiB 20 ms against 13)
_READ_AHEAD = 16 << 20  # bytes the kernel is asked to read ahead of a pass
_MAX_GROUP_OFFSETS = 2**32 - 1
_IOV_MAX = 1024  # buffers per writev (Linux's IOV_MAX)


class CleanAborted(Exception):
    """The cleaner was asked to stop (broker shutdown, partition removed)."""


class _ReadAhead:
    """Asks the kernel to read the next ``_READ_AHEAD`` bytes of a pass's segments
    (``POSIX_FADV_WILLNEED``: asynchronous), so the disk reads while the cleaner decodes."""

    def __init__(self, segments: list[SegmentFile]) -> None:
        self._segments = [s for s in segments if s.size]
        self._index = 0  # the segment and position advised up to
        self._advised = 0
        self._ahead = 0  # bytes advised beyond the reader
        self.at(0)

    def at(self, consumed: int) -> None:
        """The reader consumed ``consumed`` more bytes: keep ``_READ_AHEAD`` advised."""
        self._ahead -= consumed
        while self._ahead < _READ_AHEAD // 2 and self._index < len(self._segments):
            segment = self._segments[self._index]
            length = min(_READ_AHEAD, segment.size - self._advised)
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(segment.fd, self._advised, length, os.POSIX_FADV_WILLNEED)
            self._advised += length
            self._ahead += length
            if self._advised >= segment.size:
                self._index, self._advised = self._index + 1, 0


def _segment_frames(segment: SegmentFile, ahead: _ReadAhead, throttle: Throttler,
                    stop: Callable[[], bool], *, verify: bool = True) -> Iterator[tuple[Peek, memoryview]]:
    """Every frame of ``segment`` (``read_frames``, CRC-checked if ``verify``), for a pass:
    read ahead, throttled, stoppable."""
    for header, view in read_frames(segment.fd, 0, segment.size, chunk_bytes=_READ_CHUNK, verify=verify):
        if stop():
            raise CleanAborted()
        ahead.at(header.length)
        throttle.acquire(header.length)
        yield header, view


def _frames(snapshot: LogSnapshot, start: int, end: int, throttle: Throttler,
            stop: Callable[[], bool]) -> Iterator[tuple[memoryview, int]]:
    """``(frame, next offset)`` of every frame of ``snapshot`` holding offsets in ``[start, end)``
    (CRCs not checked: the map's pass, module docstring)."""
    segments = [s for s in snapshot.segments if s.next_offset > start and s.base_offset < end]
    ahead = _ReadAhead(segments)
    for segment in segments:
        for header, view in _segment_frames(segment, ahead, throttle, stop, verify=False):
            if header.next_offset <= start:
                continue
            if header.base_offset >= end:
                return
            yield view, header.next_offset


def producer_frames(snapshot: LogSnapshot, end: int) -> dict[int, int]:
    """``{producer id: base offset of its last frame below end}`` (headers only)."""
    last: dict[int, int] = {}
    for segment in snapshot.segments:
        if segment.base_offset >= end:
            break
        for header in peek_headers(segment.fd, 0, segment.size):
            if header.base_offset >= end:
                break
            if header.producer_id >= 0:
                last[header.producer_id] = header.base_offset
    return last


def build_map(snapshot: LogSnapshot, *, start: int, end: int, spec: KeySpec, budget_bytes: int, throttle: Throttler,
              stop: Callable[[], bool], young_after_ms: int | None = None) -> OffsetMap:
    """The offset map of ``[start, end)``; its ``end`` is where it stopped: ``end``, the
    first frame whose max timestamp is above ``young_after_ms`` (min.compaction.lag.ms),
    or the last frame boundary that fitted ``budget_bytes``."""
    offsets = OffsetMap(start=start, budget_bytes=budget_bytes)
    reader = BatchReader()
    for view, next_offset in _frames(snapshot, start, end, throttle, stop):
        header = parse_header(view)
        if young_after_ms is not None and header.max_timestamp > young_after_ms:
            break
        if (header.is_control or not header.record_count
                or (header.is_transactional and snapshot.is_aborted(header.producer_id, header.base_offset))):
            offsets.add(_NO_KEYS, _NO_OFFSETS, end=next_offset)  # no keys: control, emptied or aborted records
            continue
        keys, numbers = frame_keys(view, header, spec, reader)
        inside = numbers >= start
        if not inside.all():
            keys, numbers = keys.filter(pa.array(inside)), numbers[inside]
        offsets.add(keys, numbers, end=next_offset)
        if offsets.pending_bytes * 4 >= budget_bytes or offsets.pending_records >= _FOLD_RECORDS:
            if not offsets.fold():
                return offsets
    offsets.fold()
    return offsets


@dataclass(slots=True)
class Prepared:
    plan: CompactionPlan
    groups: list[CleanedGroup] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)


def _groups(snapshot: LogSnapshot, end: int) -> list[list[SegmentFile]]:
    groups: list[list[SegmentFile]] = []
    for segment in snapshot.segments:
        if segment.base_offset >= end or segment.size == 0:
            break
        current = groups[-1] if groups else None
        if (current is not None and sum(s.size for s in current) + segment.size <= snapshot.segment_bytes
                and segment.next_offset - current[0].base_offset <= _MAX_GROUP_OFFSETS):
            current.append(segment)
        else:
            groups.append([segment])
    return groups


def prepare(snapshot: LogSnapshot, *, plan: CompactionPlan, spec: KeySpec, offset_map: OffsetMap, checking: bool,
            last_frame_of: dict[int, int], throttle: Throttler, stop: Callable[[], bool]) -> Prepared:
    """Write the cleaned segment of every group that changes (module docstring).  Raises
    ``CleanAborted``, ``InvalidOffsetMapError`` (``checking``), ``CorruptRecordError``,
    ``OSError``; nothing written stays behind when it raises."""
    cleaner = FrameCleaner(plan, spec, offset_map, last_frame_of, checking, aborted=snapshot.aborted)
    prepared = Prepared(plan)
    try:
        for group in _groups(snapshot, plan.end_offset):
            written = _clean_group(snapshot, group, cleaner, throttle, stop)
            if written is not None:
                prepared.groups.append(written)
        if checking:
            offset_map.verify()
    except BaseException:
        discard(snapshot.directory, prepared)
        raise
    prepared.stats = cleaner.stats
    if prepared.groups:
        crash.reach("cleaned-written")
    return prepared


def _clean_group(snapshot: LogSnapshot, group: list[SegmentFile], cleaner: FrameCleaner, throttle: Throttler,
                 stop: Callable[[], bool]) -> CleanedGroup | None:
    base = group[0].base_offset
    path = swap.cleaned_path(snapshot.directory, base)
    fd = swap.write_cleaned_open(path)
    pending: list[bytes | memoryview] = []
    pending_bytes = 0

    def write(data: bytes | memoryview) -> None:
        nonlocal pending_bytes
        pending.append(bytes(data) if isinstance(data, memoryview) else data)
        pending_bytes += len(data)
        if pending_bytes >= _WRITE_BUFFER:
            flush()

    def flush() -> None:
        nonlocal pending_bytes
        if pending:
            _write_all(fd, pending)
            throttle.acquire(pending_bytes)
            pending.clear()
            pending_bytes = 0

    output = CleanedOutput(write)
    ahead = _ReadAhead(group)
    try:
        for segment in group:
            for header, view in _segment_frames(segment, ahead, throttle, stop):
                cleaner.stats.bytes_read += header.length
                full = parse_header(view)
                output.take(view, full, cleaner.clean(view, full))
        output.finish()
        flush()
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    if not output.changed and len(group) == 1:  # nothing to change, no segments to merge
        os.close(fd)
        path.unlink(missing_ok=True)
        return None
    swap.finish_cleaned(fd)
    cleaner.stats.bytes_written += output.bytes_written
    return CleanedGroup(base, [s.token for s in group], [s.base_offset for s in group],
                        sum(s.size for s in group), output.bytes_written, snapshot.generation)


def _write_all(fd: int, buffers: list[bytes | memoryview]) -> None:
    """Write ``buffers`` in order (``writev``: no joined copy; a short write resumes)."""
    views = [memoryview(b) for b in buffers if len(b)]
    first = 0
    while first < len(views):
        written = os.writev(fd, views[first: first + _IOV_MAX])
        while first < len(views) and written >= len(views[first]):
            written -= len(views[first])
            first += 1
        if written:
            views[first] = views[first][written:]


def discard(directory: Path, prepared: Prepared) -> None:
    """Delete the cleaned files of groups not swapped in."""
    for group in prepared.groups:
        swap.cleaned_path(directory, group.base_offset).unlink(missing_ok=True)
    prepared.groups = []
