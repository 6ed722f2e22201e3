"""Durable file operations: the one place where storage and Raft fsync and replace files.

- ``fsync_fd(fd)``: make an open file's written bytes durable.
- ``fsync_dir(directory)``: make the directory's entries (created, renamed, deleted
  files) durable; a new or renamed file is not durable until its directory is.
- ``replace(source, target)``: rename ``source`` over ``target`` in one step (the old
  ``target`` or the new, never neither); durable once the directory is fsynced.
- ``atomic_write(path, data)``: replace ``path`` by ``data`` so that a crash at any
  point leaves the old content or the new, never a mix: write ``<name>.tmp``, fsync it,
  rename it over ``path``, fsync the directory.  A crash can leave ``<name>.tmp``
  behind; readers ignore it and log recovery deletes it (``recovery.py``).

Users: ``checkpoint.py`` (recovery point, log start, epoch cache), ``segment.py`` and
``index_file.py`` (data and index files), ``partition_log.py`` (the directory after a
roll), ``swap.py`` (compaction's cleaned and swap files), ``brokers/raft/quorum_state.py`` and ``brokers/raft/snapshot_store.py``.  Every
operation goes through the file layer (``files.py``), where a test can stand in for the
disk (a simulated power cut) or a broker can be given a slow one.

Raises ``OSError`` as the operating system reports it; nothing is retried.
Thread-safety: the functions keep no state; callers serialise writes to one path.
"""
from __future__ import annotations

import os
from pathlib import Path

from . import files

__all__ = ["fsync_fd", "fsync_dir", "replace", "atomic_write", "TMP_SUFFIX"]

TMP_SUFFIX = ".tmp"


def fsync_fd(fd: int) -> None:
    """fsync the open file ``fd``: every byte written to it so far survives a crash."""
    files.fsync(fd)


def fsync_dir(directory: Path) -> None:
    """fsync ``directory`` so that entries created, renamed or removed in it survive a crash."""
    files.fsync_dir(directory)


def replace(source: Path, target: Path) -> None:
    """Rename ``source`` over ``target`` atomically (``target`` need not exist); fsync the
    directory afterwards (``fsync_dir``) to make it survive a crash."""
    files.replace(source, target)


def atomic_write(path: Path, data: bytes) -> None:
    """Durably replace ``path`` by ``data`` (tmp file, fsync, rename, fsync of the directory).

    On return the new content survives a crash; if this raises, ``path`` still holds its
    old content (or is still missing)."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = files.open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        position = 0
        while position < len(view):
            position += files.pwrite(fd, view[position:], position)
        fsync_fd(fd)
    finally:
        files.close(fd)
    files.replace(tmp, path)
    fsync_dir(path.parent)
