"""Named crash points of a clean, for kill -9 tests (FoundationDB-style fault points).

``reach(name)`` is a no-op unless the environment variable ``SPARK_LOG_CLEANER_CRASH_AT``
names this point: then it appends ``name`` to the file named by
``SPARK_LOG_CLEANER_CRASH_MARKER`` (fsynced, so the test can assert the point was reached)
and kills its own process with SIGKILL, as a power cut or ``kill -9`` at that moment would.
The points, in the order a clean reaches them (``swap.py``, ``cleaner/``):

- ``cleaned-written``: every cleaned segment written aside (``.cleaned``) and fsynced;
- ``swap-renamed``: the first ``.cleaned`` file renamed to ``.swap`` (with several groups
  the clean is not committed yet: recovery rolls it back);
- ``swaps-committed``: every ``.cleaned`` renamed to ``.swap`` (committed);
- ``old-deleted``: the old segment files deleted;
- ``swap-completed``: the first ``.swap`` renamed to its segment's ``.log``;
- ``before-checkpoint``: every group swapped in, the cleaner checkpoint not yet written.

The environment is read once per process (``POINT``); production never sets it.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

from . import files
from .durable import fsync_fd

__all__ = ["POINTS", "POINT", "reach"]

POINTS = ("cleaned-written", "swap-renamed", "swaps-committed", "old-deleted", "swap-completed", "before-checkpoint")
POINT = os.environ.get("SPARK_LOG_CLEANER_CRASH_AT", "")
_MARKER = os.environ.get("SPARK_LOG_CLEANER_CRASH_MARKER", "")


def reach(name: str) -> None:
    """Die here if the environment asks to (module docstring)."""
    if not POINT or name != POINT:
        return
    if _MARKER:
        fd = files.open_fd(Path(_MARKER), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            files.pwrite(fd, f"{name}\n".encode(), 0)  # O_APPEND: Linux appends whatever the position
            fsync_fd(fd)
        finally:
            files.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)
