"""Swapping cleaned segments in, crash-safely (Kafka's cleaned/swap files), all groups
of a clean at once.

A clean writes each group's new segment aside and swaps them in by renames that recovery
understands; a kill -9 at any moment leaves either every old segment of the clean or every
new one, never a mix and never a lost record.  Names (``base``: a group's first segment's
base offset, 20 digits):

    <base>.log.cleaned   a cleaned segment written aside (not committed)
    <base>.log.swap      a cleaned segment renamed for the swap

The protocol (``commit_swaps``; every fsync and rename through ``durable``):

1. each group's frames go to ``<base>.log.cleaned``, fsynced.
   (crash point ``cleaned-written`` once every group is written)
2. rename every ``.cleaned`` -> ``.swap`` (``swap-renamed`` after the first), then fsync
   the directory: once no ``.cleaned`` of the clean is left, **the clean is committed**
   (``swaps-committed``).
3. delete every group's old segment files (``.log``, ``.index``, ``.timeindex``; a group's
   first ``.log`` stays until step 4 replaces it), fsync the directory.  (``old-deleted``)
4. rename every ``.swap`` -> ``<base>.log`` (``swap-completed`` after the first; it
   replaces the group's first old data file at once), fsync the directory.  Indexes are
   derived data: the log rebuilds them.

Recovery (``complete_swaps``, first thing when a log directory is opened, ``recovery.py``):

- a ``.cleaned`` file left means the clean never committed (step 2 was cut short, and no
  old segment was deleted yet): every ``.cleaned`` and ``.swap`` file is deleted, the old
  segments are all there;
- only ``.swap`` files: the clean committed; for each, its offset range ``[base, end)`` is
  read from its frames (a cleaned segment covers exactly its group's offsets: fillers stand
  for removed frames), every other segment file with a base offset in that range is
  deleted, and the swap is renamed to ``<base>.log``: the clean completes.  A swap that
  cannot be read (disk damage) is renamed likewise and left to the log's recovery to cut.

Thread-safety: none; the caller holds the partition lock (recovery: before the log is shared).
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Sequence

from spark_log.errors import CorruptRecordError

from . import crash_points as crash
from . import files
from .durable import fsync_dir, fsync_fd, replace
from .scan import peek_headers

__all__ = ["CLEANED_SUFFIX", "SWAP_SUFFIX", "cleaned_path", "write_cleaned_open", "finish_cleaned", "commit_swaps",
           "complete_swaps"]

CLEANED_SUFFIX = ".log.cleaned"
SWAP_SUFFIX = ".log.swap"
_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex)$")
_SWAP_FILE = re.compile(r"^(\d{20})\.log\.swap$")

_log = logging.getLogger(__name__)


def _name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


def cleaned_path(directory: Path, base: int) -> Path:
    return directory / _name(base, CLEANED_SUFFIX)


def write_cleaned_open(path: Path) -> int:
    """Open (truncating) a ``.cleaned`` file for writing; the caller writes, then ``fsync_fd``."""
    return files.open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)


def finish_cleaned(fd: int) -> None:
    """Make a written ``.cleaned`` file durable and close it."""
    try:
        fsync_fd(fd)
    finally:
        files.close(fd)


def _delete_segment_files(directory: Path, base: int, *, keep_log: bool) -> None:
    for suffix in (".index", ".timeindex") if keep_log else (".log", ".index", ".timeindex"):
        files.unlink(directory / _name(base, suffix), missing_ok=True)


def commit_swaps(directory: Path, groups: Sequence[tuple[int, Sequence[int]]]) -> list[Path]:
    """Steps 2-4 of the module docstring for ``groups`` (``(base, old segment bases)``, each
    ``old[0] == base``, their ``.cleaned`` files written and fsynced); returns the new
    ``<base>.log`` files.  Raises ``OSError`` (``FileNotFoundError`` when a ``.cleaned`` file
    is gone before the commit: the renamed ones are put back, nothing was changed then)."""
    renamed: list[int] = []
    try:
        for base, _ in groups:
            replace(cleaned_path(directory, base), directory / _name(base, SWAP_SUFFIX))
            renamed.append(base)
            if len(renamed) == 1:
                crash.reach("swap-renamed")
    except FileNotFoundError:
        for base in renamed:
            replace(directory / _name(base, SWAP_SUFFIX), cleaned_path(directory, base))
        raise
    fsync_dir(directory)
    crash.reach("swaps-committed")
    for base, old_bases in groups:
        for old in old_bases:
            _delete_segment_files(directory, old, keep_log=old == base)
    fsync_dir(directory)
    crash.reach("old-deleted")
    targets = []
    for base, _ in groups:
        target = directory / _name(base, ".log")
        replace(directory / _name(base, SWAP_SUFFIX), target)
        targets.append(target)
        if len(targets) == 1:
            crash.reach("swap-completed")
    fsync_dir(directory)
    return targets


def _swap_end(path: Path) -> int | None:
    """The end of a swap file's offset range, None if it cannot be read."""
    fd = files.open_fd(path, os.O_RDONLY)
    try:
        end: int | None = None
        for header in peek_headers(fd, 0, os.fstat(fd).st_size):
            end = header.next_offset
        return end
    except CorruptRecordError as exc:
        _log.error("%s: cannot read the committed cleaned segment (%s)", path, exc.message)
        return None
    finally:
        files.close(fd)


def complete_swaps(directory: Path) -> list[str]:
    """Recovery (module docstring): roll back an uncommitted clean, complete a committed one.
    Returns what it did, one line per file, for the recovery report."""
    done: list[str] = []
    names = sorted(p.name for p in directory.iterdir())
    cleaned = [name for name in names if name.endswith(CLEANED_SUFFIX)]
    swaps = [name for name in names if _SWAP_FILE.match(name)]
    if cleaned:
        for name in cleaned + swaps:
            files.unlink(directory / name, missing_ok=True)
            done.append(f"{name}: part of a clean that never committed, dropped")
        fsync_dir(directory)
        return done
    for name in swaps:
        match = _SWAP_FILE.match(name)
        assert match is not None
        base = int(match.group(1))
        swap = directory / name
        end = _swap_end(swap)
        if end is not None:
            for other in sorted(p.name for p in directory.iterdir()):
                segment = _SEGMENT_FILE.match(other)
                if segment and base <= int(segment.group(1)) < end:
                    files.unlink(directory / other, missing_ok=True)
        replace(swap, directory / _name(base, ".log"))
        done.append(f"{name}: a committed clean of [{base}, {end}), completed")
    if done:
        fsync_dir(directory)
    return done
