"""Swapping cleaned segments in, crash-safely (Kafka's cleaned/swap files).

A clean writes each group's new segment aside and swaps it in by renames that recovery
understands; a kill -9 at any moment leaves, for every group, either its old segments or
its new one, never a mix and never a lost record.  Names (``base``: the group's first
segment's base offset, 20 digits):

    <base>.log.cleaned   a cleaned segment being written (not yet committed)
    <base>.log.swap      a committed cleaned segment whose old segments may still exist

The protocol for one group (``commit_swap``; every fsync and rename through ``durable``):

1. ``write_cleaned``: the frames go to ``<base>.log.cleaned``, which is fsynced.
   (crash point ``cleaned-written`` once every group is written)
2. rename ``.cleaned`` -> ``.swap``, fsync the directory: **the commit point**.
   (``swap-renamed``)
3. delete the group's old segment files (``.log``, ``.index``, ``.timeindex``; the first
   old segment's ``.log`` stays until step 4 replaces it), fsync the directory.
   (``old-deleted``)
4. rename ``.swap`` -> ``<base>.log`` (replacing the first old segment's data file at once),
   fsync the directory.  Indexes are derived data: the log rebuilds them.
   (``swap-completed``)

Recovery (``complete_swaps``, first thing when a log directory is opened, ``recovery.py``):

- a ``.cleaned`` file never committed: deleted (the old segments are all there);
- a ``.swap`` file committed: its offset range ``[base, end)`` is read from its frames (a
  cleaned segment covers exactly its group's offsets: fillers stand for removed frames),
  every other segment file with a base offset in that range is deleted, and the swap is
  renamed to ``<base>.log``: the clean of that group completes.  A swap that cannot be
  read (disk damage) is renamed likewise and left to the log's recovery to cut.

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
from .durable import fsync_dir, fsync_fd, replace
from .scan import peek_headers

__all__ = ["CLEANED_SUFFIX", "SWAP_SUFFIX", "cleaned_path", "write_cleaned_open", "finish_cleaned", "commit_swap",
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
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)


def finish_cleaned(fd: int) -> None:
    """Make a written ``.cleaned`` file durable and close it."""
    try:
        fsync_fd(fd)
    finally:
        os.close(fd)


def _delete_segment_files(directory: Path, base: int, *, keep_log: bool) -> None:
    for suffix in (".index", ".timeindex") if keep_log else (".log", ".index", ".timeindex"):
        (directory / _name(base, suffix)).unlink(missing_ok=True)


def commit_swap(directory: Path, base: int, old_bases: Sequence[int]) -> Path:
    """Steps 2-4 of the module docstring for the group whose old segments start at
    ``old_bases`` (``old_bases[0] == base``); returns the new ``<base>.log``.  Raises
    ``OSError`` (``FileNotFoundError`` when the ``.cleaned`` file is gone: nothing was
    changed then)."""
    cleaned = cleaned_path(directory, base)
    swap = directory / _name(base, SWAP_SUFFIX)
    replace(cleaned, swap)
    fsync_dir(directory)
    crash.reach("swap-renamed")
    for old in old_bases:
        _delete_segment_files(directory, old, keep_log=old == base)
    fsync_dir(directory)
    crash.reach("old-deleted")
    target = directory / _name(base, ".log")
    replace(swap, target)
    fsync_dir(directory)
    crash.reach("swap-completed")
    return target


def _swap_end(path: Path) -> int | None:
    """The end of a swap file's offset range, None if it cannot be read."""
    fd = os.open(path, os.O_RDONLY)
    try:
        end: int | None = None
        for header in peek_headers(fd, 0, os.fstat(fd).st_size):
            end = header.next_offset
        return end
    except CorruptRecordError as exc:
        _log.error("%s: cannot read the committed cleaned segment (%s)", path, exc.message)
        return None
    finally:
        os.close(fd)


def complete_swaps(directory: Path) -> list[str]:
    """Recovery (module docstring): drop uncommitted cleans, complete committed ones.
    Returns what it did, one line per file, for the recovery report."""
    done: list[str] = []
    names = sorted(p.name for p in directory.iterdir())
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            (directory / name).unlink(missing_ok=True)
            done.append(f"{name}: an unfinished clean, dropped")
    for name in names:
        match = _SWAP_FILE.match(name)
        if not match:
            continue
        base = int(match.group(1))
        swap = directory / name
        end = _swap_end(swap)
        if end is not None:
            for other in sorted(p.name for p in directory.iterdir()):
                segment = _SEGMENT_FILE.match(other)
                if segment and base <= int(segment.group(1)) < end:
                    (directory / other).unlink(missing_ok=True)
        replace(swap, directory / _name(base, ".log"))
        done.append(f"{name}: a committed clean of [{base}, {end}), completed")
    if done:
        fsync_dir(directory)
    return done
