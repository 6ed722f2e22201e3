"""Cleaning frames: what becomes of each stored frame under a plan, and the output frames.

``FrameCleaner.clean(frame, header)`` decides, per frame (plan and offset map fixed):

- a frame at or past ``plan.end_offset``: kept as it is (byte for byte);
- a compaction-plan control frame wholly below the end: removed (it was applied);
- a transaction marker below the end: removed once no record of its transaction stays
  (its data frames were all superseded, aborted or emptied in this pass, which reads the
  log from its start, so it sees every frame of the transaction before the marker), its
  timestamp is below ``plan.tombstone_horizon_ms`` (``delete.retention.ms``, as Kafka
  treats markers like tombstones) and it is not its producer's last frame still within
  ``plan.producer_horizon_ms`` (the last marker carries the producer's bumped epoch, which
  a replay must still find to fence a late write).  Kept otherwise: a replay must never
  find a transactional record without its marker, or the transaction would count as open
  and hold the last stable offset back.  Other control frames: kept;
- a data frame: a record goes when a later record of its key lies below the end (the map
  holds a higher offset for its key), or when it is a tombstone that stays the latest of
  its key but whose timestamp is below ``plan.tombstone_horizon_ms``.  Records without a
  key never go.  All stay: the frame is kept as it is.  Some stay: a version-2 frame with
  the same offset range, producer fields, epoch, schema id and codec holds them (body
  re-encoded).  None stay (or the frame was already emptied by an earlier clean): the
  frame is removed, unless it is its producer's last frame below the end and not older
  than ``plan.producer_horizon_ms``, in which case an empty version-2 frame keeps its
  producer fields (``spark_log.frame``: "records removed, producer information stays").

``CleanedOutput`` writes the result: kept and rewritten frames as they come, and each run
of removed frames as one empty filler frame (version 2, producer id -1) covering their
offsets, so the output still tiles the offsets from the first input frame to the last
one's end.  A run is cut at every leader-epoch change, so every epoch still starts at the
same offset in a frame of that epoch (the leader-epoch cache rebuilt from headers does not
change) and a filler carries its frames' epoch and time range.

Thread-safety: none; one cleaner thread.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from spark_log.frame import ATTR_CODEC_MASK, Codec, FrameHeader, encode_v2, ipc_message, marker_of

from .offset_map import OffsetMap
from .plan import CompactionPlan, read_plan
from .records import BatchReader, KeySpec, frame_records, timestamps_of

__all__ = ["FrameCleaner", "CleanedOutput", "CleanStats", "KEEP", "REMOVE"]

_MAX_SPAN = 2**31
KEEP = "keep"
REMOVE = "remove"
Outcome = str | bytes  # KEEP, REMOVE, or the new frame's bytes


@dataclass(slots=True)
class CleanStats:
    """What a clean read and wrote (records and frame bytes)."""

    records_read: int = 0
    records_kept: int = 0
    tombstones_removed: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    frames_rewritten: int = 0
    producer_frames_kept: int = 0
    markers_removed: int = 0

    def add(self, other: "CleanStats") -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass(slots=True)
class FrameCleaner:
    """The per-frame rules of the module docstring for one plan.

    ``last_frame_of`` maps a producer id to the base offset of its last frame below the
    plan's end; ``checking``: the map was offered by someone else and is checked record by
    record (``OffsetMap.check``)."""

    plan: CompactionPlan
    spec: KeySpec
    offset_map: OffsetMap
    last_frame_of: Mapping[int, int]
    checking: bool = False
    stats: CleanStats = field(default_factory=CleanStats)
    aborted: tuple[tuple[int, int, int], ...] = ()  # (producer id, first offset, abort marker offset)
    # producers with a transactional record kept since their last marker (this pass)
    _txn_records_kept: set[int] = field(default_factory=set)
    _reader: BatchReader = field(default_factory=BatchReader)  # this pass's frame decoder

    def _producer_keeps(self, header: FrameHeader) -> bool:
        return (header.producer_id >= 0 and self.last_frame_of.get(header.producer_id) == header.base_offset
                and header.max_timestamp >= self.plan.producer_horizon_ms)

    def clean(self, frame: memoryview, header: FrameHeader) -> Outcome:
        end = self.plan.end_offset
        if header.base_offset >= end:
            return KEEP
        if header.is_control:
            if read_plan(frame, header) is not None:
                return REMOVE if header.next_offset <= end else KEEP
            if marker_of(frame, header) is not None:
                return self._marker(header)
            return KEEP
        if header.record_count and header.is_transactional and any(
                pid == header.producer_id and first <= header.base_offset <= last for pid, first, last in self.aborted):
            self.stats.records_read += header.record_count  # an aborted transaction's records: never visible
            if self._producer_keeps(header):
                return _emptied(header)
            return REMOVE
        if header.record_count == 0:
            if self._producer_keeps(header):
                self.stats.producer_frames_kept += 1
                return KEEP
            return REMOVE
        records = frame_records(frame, header, self.spec, self._reader)
        offsets = records.offsets
        in_range = offsets < end
        superseded = self._superseded(records.keys, offsets, records.keyed) & in_range
        expired = records.tombstones & in_range & ~superseded
        if expired.any():
            expired &= records.timestamps() < self.plan.tombstone_horizon_ms
        keep = ~(superseded | expired)
        kept = int(np.count_nonzero(keep))
        self.stats.records_read += len(offsets)
        self.stats.records_kept += kept
        self.stats.tombstones_removed += int(np.count_nonzero(expired))
        if header.is_transactional and kept:
            self._txn_records_kept.add(header.producer_id)
        if kept == len(offsets):
            return KEEP
        if kept == 0:
            if self._producer_keeps(header):
                self.stats.producer_frames_kept += 1
                return _emptied(header)
            return REMOVE
        rows = np.flatnonzero(keep)
        batch = records.batch.take(rows)
        times = timestamps_of(batch, header)  # of the kept records only
        self.stats.frames_rewritten += 1
        return encode_v2(
            base_offset=header.base_offset, last_offset_delta=header.span - 1, deltas=offsets[rows] - header.base_offset,
            message=ipc_message(batch, Codec(header.attributes & ATTR_CODEC_MASK), use_threads=False),
            partition_leader_epoch=header.partition_leader_epoch, attributes=header.attributes,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
            first_timestamp=int(times[0]), max_timestamp=int(times.max()), schema_id=header.schema_id)

    def _marker(self, header: FrameHeader) -> Outcome:
        """A transaction marker below the plan's end (module docstring)."""
        records_kept = header.producer_id in self._txn_records_kept
        self._txn_records_kept.discard(header.producer_id)
        if records_kept or header.max_timestamp >= self.plan.tombstone_horizon_ms or self._producer_keeps(header):
            return KEEP
        self.stats.markers_removed += 1
        return REMOVE

    def _superseded(self, keys: pa.Array[Any], offsets: npt.NDArray[np.int64],
                    keyed: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """Keyed records a later record of their key (in the map's range) replaces.  Inside
        the map's range a broker-built map answers by offset alone; below it (and for an
        offered map, which is checked) the keys are looked up."""
        offset_map = self.offset_map
        if self.checking:
            latest = offset_map.latest(keys)
            offset_map.check(latest, offsets, keyed)
            return keyed & (latest > offsets)
        inside = (offsets >= offset_map.start) & (offsets < offset_map.end)
        superseded = inside & keyed & ~offset_map.is_latest(offsets)
        below = keyed & ~inside
        if below.any():
            rows = np.flatnonzero(below)
            latest = offset_map.latest(keys.take(rows))
            superseded[rows] = latest > offsets[rows]
        return superseded


def _emptied(header: FrameHeader) -> bytes:
    """An empty version-2 frame keeping ``header``'s producer fields and offset range."""
    return encode_v2(base_offset=header.base_offset, last_offset_delta=header.span - 1, deltas=(), message=None,
                     partition_leader_epoch=header.partition_leader_epoch,
                     attributes=header.attributes & ~ATTR_CODEC_MASK, producer_id=header.producer_id,
                     producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                     first_timestamp=header.first_timestamp, max_timestamp=header.max_timestamp,
                     schema_id=header.schema_id)


class CleanedOutput:
    """Writes a cleaned segment's frames through ``write`` (module docstring: fillers).
    ``changed`` says whether the output differs from the input at all (a filler that stays
    exactly as it was, alone in its run, is no change: cleaning a clean log changes nothing)."""

    def __init__(self, write: Callable[[bytes | memoryview], None]) -> None:
        self._write = write
        self.changed = False
        self.bytes_written = 0
        self.frames = 0
        self._gap: list[int] | None = None  # [base, next, epoch, first_ts, max_ts]
        self._gap_frames = 0
        self._gap_filler: bytes | None = None  # the run's one frame, if it already was a filler

    def take(self, frame: memoryview, header: FrameHeader, outcome: Outcome) -> None:
        """Write the result of cleaning ``frame``."""
        if outcome == KEEP:
            self._emit(frame)
            return
        if outcome == REMOVE:
            gap = self._gap
            if gap is not None and gap[2] == header.partition_leader_epoch and gap[1] == header.base_offset:
                gap[1] = header.next_offset
                gap[4] = max(gap[4], header.max_timestamp)
                self._gap_frames += 1
            else:
                self._flush_gap()
                self._gap = [header.base_offset, header.next_offset, header.partition_leader_epoch,
                             header.first_timestamp, header.max_timestamp]
                self._gap_frames = 1
                filler = header.record_count == 0 and header.producer_id < 0 and not header.is_control
                self._gap_filler = bytes(frame) if filler else None
            return
        assert isinstance(outcome, bytes)
        self.changed = True
        self._emit(outcome)

    def _emit(self, data: bytes | memoryview) -> None:
        self._flush_gap()
        self._write(data)
        self.bytes_written += len(data)
        self.frames += 1

    def _flush_gap(self) -> None:
        gap, self._gap = self._gap, None
        if gap is None:
            return
        if self._gap_frames == 1 and self._gap_filler is not None:
            self._write(self._gap_filler)  # an old filler alone in its run: as it was
            self.bytes_written += len(self._gap_filler)
            self.frames += 1
            return
        self.changed = True
        base, next_offset, epoch, first_ts, max_ts = gap
        while base < next_offset:  # a filler covers at most 2**31 offsets (int32 last_offset_delta)
            span = min(next_offset - base, _MAX_SPAN)
            filler = encode_v2(base_offset=base, last_offset_delta=span - 1, deltas=(), message=None,
                               partition_leader_epoch=epoch, first_timestamp=first_ts, max_timestamp=max_ts)
            self._write(filler)
            self.bytes_written += len(filler)
            self.frames += 1
            base += span

    def finish(self) -> None:
        self._flush_gap()
