"""Opening a partition directory after a clean shutdown or a crash.

Rules (Kafka's LogLoader, simplified):

0. An interrupted clean (compaction) is settled first (``swap.py``): a cleaned
   segment not yet committed (``*.log.cleaned``) is dropped, a committed one
   (``*.log.swap``) replaces the segments of its offset range.
1. Leftovers go: ``*.tmp`` files (half-written checkpoints) and index files whose data
   file is missing.  Segments are the ``<20 digits>.log`` files, ordered by base offset.
2. Segments wholly below the log start offset (the next segment starts at or before it)
   are deleted: they were being removed by retention or ``advance_log_start``.
3. A segment whose data lies wholly below the recovery point (the offset up to which
   everything was fsynced, from ``recovery-point-offset-checkpoint``) is opened trusted:
   indexes loaded and sanity-checked (rebuilt if odd), only the frames after the last
   index entry are walked.  If that walk fails the segment is recovered as below.
4. Every other segment is recovered: each frame is validated (CRC-32C, frames tiling the offsets,
   non-decreasing epochs), the indexes rebuilt, and the file truncated at the first
   torn or corrupt frame.
5. The log must stay a clean prefix: at the first truncated segment, or the first
   segment that does not start where the previous one ended (a missing or cut data
   file), every later segment is deleted.  Every such step is reported (and logged).

Nothing before the first damage is ever dropped.  ``load`` then settles the log start
(checkpoint, raised to the first segment; a log start past the recovered end empties the
log there) and the leader-epoch cache (rebuilt from frame headers if its file is missing
or bad; entries outside [log start, LEO) dropped).  A damaged checkpoint file counts as
missing: it costs more recovery, never data.

Thread-safety: none; runs before the log is shared.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from spark_log.errors import CorruptRecordError

from . import checkpoint, files

from .swap import complete_swaps
from .epoch_cache import FILE_NAME as EPOCH_FILE
from .epoch_cache import EpochCache
from .scan import Peek
from .segment import Segment
from .segments import Segments

__all__ = ["Loaded", "RecoveryReport", "load", "open_segments", "rebuild_epoch_cache"]

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"

_log = logging.getLogger(__name__)
_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex)$")


@dataclass(slots=True)
class RecoveryReport:
    """What opening the log found and did (empty lists: a clean open)."""

    recovered_segments: list[int] = field(default_factory=list)  # base offsets validated frame by frame
    truncated: list[str] = field(default_factory=list)  # "<file>: cut at byte N (reason)"
    deleted_segments: list[int] = field(default_factory=list)  # dropped after damage
    removed_files: list[str] = field(default_factory=list)  # leftovers, segments wholly below the log start
    swaps: list[str] = field(default_factory=list)  # interrupted cleans dropped or completed (swap.py)

    @property
    def clean(self) -> bool:
        return not (self.truncated or self.deleted_segments)


def _scan_directory(directory: Path, report: RecoveryReport) -> list[int]:
    logs: set[int] = set()
    indexes: list[tuple[int, Path]] = []
    for path in directory.iterdir():
        if path.name.endswith(".tmp"):
            files.unlink(path, missing_ok=True)
            report.removed_files.append(path.name)
            continue
        match = _SEGMENT_FILE.match(path.name)
        if not match:
            continue
        if match.group(2) == "log":
            logs.add(int(match.group(1)))
        else:
            indexes.append((int(match.group(1)), path))
    for base, path in indexes:
        if base not in logs:
            files.unlink(path, missing_ok=True)
            report.removed_files.append(path.name)
    return sorted(logs)


def _delete_files(directory: Path, base: int) -> None:
    for suffix in (".log", ".index", ".timeindex"):
        files.unlink(directory / f"{base:020d}{suffix}", missing_ok=True)


def open_segments(
    directory: Path,
    *,
    index_interval_bytes: int,
    recovery_point: int,
    log_start_offset: int,
    now_ms: int,
    on_recovered_frame: Callable[[Peek], None],
) -> tuple[Segments, RecoveryReport]:
    """Open every segment in ``directory`` per the module rules.

    ``on_recovered_frame`` sees each frame validated in step 4, in offset order.  Returns
    the segments (possibly none) and the report."""
    report = RecoveryReport()
    report.swaps = complete_swaps(directory)
    for line in report.swaps:
        _log.warning("%s: %s", directory, line)
    bases = _scan_directory(directory, report)
    while len(bases) > 1 and bases[1] <= log_start_offset:
        _delete_files(directory, bases[0])
        report.removed_files.append(f"{bases.pop(0):020d}.log")
    segments = Segments()
    for i, base in enumerate(bases):
        following = bases[i + 1] if i + 1 < len(bases) else None
        previous = segments.active if len(segments) else None
        if previous is not None and base != previous.next_offset:
            _drop_from(directory, bases[i:], report, f"segment {base} does not follow offset {previous.next_offset}")
            break
        segment: Segment | None = None
        if following is not None and following <= recovery_point:
            try:
                segment = Segment.open_trusted(directory, base, index_interval_bytes=index_interval_bytes, now_ms=now_ms)
            except CorruptRecordError as exc:
                _log.warning("%s: segment %d below the recovery point is damaged (%s); recovering it", directory, base, exc.message)
        if segment is None:
            segment = Segment(directory, base, index_interval_bytes=index_interval_bytes, now_ms=now_ms)
            report.recovered_segments.append(base)
            stop = segment.recover(on_recovered_frame)
            if segment.size:
                segment.first_append_ms = now_ms
            if stop is not None:
                message = f"{segment.log_path.name}: cut at byte {stop.position} ({stop.reason})"
                report.truncated.append(message)
                _log.warning("%s: %s", directory, message)
                if segment.size == 0 and previous is not None:
                    segment.delete()
                    report.deleted_segments.append(base)
                else:
                    segments.add(segment)
                _drop_from(directory, bases[i + 1:], report, "after a truncated segment")
                break
        segments.add(segment)
    return segments, report


def _drop_from(directory: Path, bases: list[int], report: RecoveryReport, why: str) -> None:
    for base in bases:
        _delete_files(directory, base)
        report.deleted_segments.append(base)
        _log.warning("%s: deleted segment %d (%s)", directory, base, why)


def rebuild_epoch_cache(path: Path, segments: Segments) -> EpochCache:
    """A new epoch cache from every frame header (its checkpoint file was missing or bad)."""
    cache = EpochCache(path)
    for segment in segments:
        for header in segment.headers_from(0):
            cache.assign(header.epoch, header.base_offset)
    return cache


@dataclass(slots=True)
class Loaded:
    segments: Segments
    epochs: EpochCache
    log_start_offset: int
    recovery_point: int
    report: RecoveryReport


def _read_offset(directory: Path, name: str) -> int:
    try:
        return checkpoint.read_offset(directory / name) or 0
    except ValueError as exc:
        _log.warning("%s: ignoring %s", directory, exc)
        return 0


def load(directory: Path, *, index_interval_bytes: int, now_ms: int) -> Loaded:
    """Open the partition directory per the module rules (always at least one segment)."""
    recovery_point = _read_offset(directory, RECOVERY_POINT_FILE)
    log_start = _read_offset(directory, LOG_START_FILE)
    stored = EpochCache.load(directory / EPOCH_FILE)
    epochs = stored if stored is not None else EpochCache(directory / EPOCH_FILE)
    stored_entries = stored.entries() if stored is not None else None

    def feed_epoch_cache(header: Peek) -> None:
        epochs.assign(header.epoch, header.base_offset)

    segments, report = open_segments(
        directory,
        index_interval_bytes=index_interval_bytes,
        recovery_point=recovery_point,
        log_start_offset=log_start,
        now_ms=now_ms,
        on_recovered_frame=feed_epoch_cache,
    )
    if len(segments):
        log_start = max(log_start, segments.first.base_offset)
    if not len(segments) or log_start > segments.active.next_offset:
        if len(segments):
            _log.warning("%s: log start %d is past the recovered end %d", directory, log_start, segments.active.next_offset)
        for segment in list(segments):
            segments.remove(segment)
            segment.delete()
        segments.add(Segment.create(directory, log_start, index_interval_bytes=index_interval_bytes, now_ms=now_ms))
    end = segments.active.next_offset
    if stored is None and end > log_start:
        epochs = rebuild_epoch_cache(epochs.path, segments)
    epochs.truncate_from_start(log_start)
    epochs.truncate_from_end(end)
    if stored is None or epochs.entries() != stored_entries:  # rewriting the same entries is 3 fsyncs for nothing
        epochs.persist()
    return Loaded(segments, epochs, log_start, recovery_point, report)
