"""The storage file layer: every call that changes a file of the log goes through here.

``brokers.log`` (segments, indexes, checkpoints, the directory) and Raft's files (through
``durable.py``) create, write, truncate, fsync, rename and delete files only with the
functions below, never with ``os`` directly, so one object stands between the log and the
disk (reads, ``os.pread`` and ``os.fstat``, go straight to the OS: they change nothing).

- ``OsFiles`` (the default) calls the OS: ``open`` -> ``os.open``, ``pwritev`` ->
  ``os.pwritev``, ``fsync`` -> ``os.fsync``...; one Python call per operation more.
- ``SlowFiles`` (a broker started with ``SPARK_LOG_DISK_FAULTS`` naming a JSON file, as the
  nemesis does): the same, with the delays the file asks for, re-read when it changes:
  ``{"3": {"write_ms": 5, "fsync_ms": 200}}`` slows broker 3's writes and fsyncs (a
  failing or slow disk, seen from the process).  The broker binds its id with
  ``use_fault_file(broker_id)``; a file that does not parse is an error, logged, and
  no faults apply until it parses again.
- Tests stand in a layer of their own with ``use(layer)`` (``tests/support/powercut.py``
  records what an fsync made durable and, cut at any operation, leaves on disk only that:
  the state a power cut leaves).

Every function raises ``OSError`` as the layer (the OS) reports it.  Thread-safety: the
layer is process-wide; ``use`` is for tests and process start-up, not for a running broker.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Protocol, Sequence

__all__ = ["FileLayer", "OsFiles", "SlowFiles", "use", "current", "use_fault_file", "ENV_VAR",
           "open_fd", "close", "pwrite", "pwritev", "ftruncate", "truncate", "fsync", "fsync_dir", "replace",
           "unlink", "write_bytes"]

log = logging.getLogger(__name__)

ENV_VAR = "SPARK_LOG_DISK_FAULTS"

Buffer = bytes | bytearray | memoryview


class FileLayer(Protocol):
    """What the log does to files (see the module docstring)."""

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int: ...
    def close(self, fd: int) -> None: ...
    def pwrite(self, fd: int, data: Buffer, position: int) -> int: ...
    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int: ...
    def ftruncate(self, fd: int, size: int) -> None: ...
    def truncate(self, path: Path, size: int) -> None: ...
    def fsync(self, fd: int) -> None: ...
    def fsync_dir(self, directory: Path) -> None: ...
    def replace(self, source: Path, target: Path) -> None: ...
    def unlink(self, path: Path, *, missing_ok: bool = False) -> None: ...


class OsFiles:
    """The operating system, unchanged."""

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def pwrite(self, fd: int, data: Buffer, position: int) -> int:
        return os.pwrite(fd, data, position)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        return os.pwritev(fd, buffers, position)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def truncate(self, path: Path, size: int) -> None:
        os.truncate(path, size)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def fsync_dir(self, directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace(self, source: Path, target: Path) -> None:
        os.replace(source, target)

    def unlink(self, path: Path, *, missing_ok: bool = False) -> None:
        Path(path).unlink(missing_ok=missing_ok)


class SlowFiles(OsFiles):
    """``OsFiles`` with the delays of a fault file for one broker (module docstring)."""

    def __init__(self, path: Path, broker_id: int, sleep: "SleepFn | None" = None) -> None:
        self.path = Path(path)
        self.broker_id = broker_id
        self._sleep = sleep or time.sleep
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._delays = (0, 0)   # write_ms, fsync_ms

    def delays(self) -> tuple[int, int]:
        """``(write_ms, fsync_ms)`` now (the file is re-read when it changed)."""
        try:
            stat = self.path.stat()
            stamp = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        except FileNotFoundError:
            return 0, 0
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    spec = json.loads(self.path.read_text() or "{}").get(str(self.broker_id), {})
                    self._delays = (max(0, int(spec.get("write_ms", 0))), max(0, int(spec.get("fsync_ms", 0))))
                except (ValueError, TypeError, AttributeError, OSError) as exc:
                    log.error("disk fault file %s does not parse (%s): no disk faults", self.path, exc)
                    self._delays = (0, 0)
            return self._delays

    def _wait(self, ms: int) -> None:
        if ms:
            self._sleep(ms / 1000)

    def pwrite(self, fd: int, data: Buffer, position: int) -> int:
        self._wait(self.delays()[0])
        return super().pwrite(fd, data, position)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        self._wait(self.delays()[0])
        return super().pwritev(fd, buffers, position)

    def fsync(self, fd: int) -> None:
        self._wait(self.delays()[1])
        super().fsync(fd)

    def fsync_dir(self, directory: Path) -> None:
        self._wait(self.delays()[1])
        super().fsync_dir(directory)


class SleepFn(Protocol):
    def __call__(self, seconds: float) -> None: ...


_layer: FileLayer = OsFiles()


def use(layer: FileLayer) -> FileLayer:
    """Make ``layer`` the process's file layer; returns the previous one (tests restore it)."""
    global _layer
    previous, _layer = _layer, layer
    return previous


def current() -> FileLayer:
    return _layer


def use_fault_file(broker_id: int) -> None:
    """At broker start: with ``SPARK_LOG_DISK_FAULTS`` set, slow this process's disk as the
    file it names says (``SlowFiles``); without it, nothing changes."""
    path = os.environ.get(ENV_VAR)
    if path:
        use(SlowFiles(Path(path), broker_id))


# -- what the log calls ---------------------------------------------------------------------

def open_fd(path: Path, flags: int, mode: int = 0o644) -> int:
    return _layer.open(path, flags, mode)


def close(fd: int) -> None:
    _layer.close(fd)


def pwrite(fd: int, data: Buffer, position: int) -> int:
    return _layer.pwrite(fd, data, position)


def pwritev(fd: int, buffers: Sequence[Buffer], position: int) -> int:
    return _layer.pwritev(fd, buffers, position)


def ftruncate(fd: int, size: int) -> None:
    _layer.ftruncate(fd, size)


def truncate(path: Path, size: int) -> None:
    _layer.truncate(path, size)


def fsync(fd: int) -> None:
    _layer.fsync(fd)


def fsync_dir(directory: Path) -> None:
    _layer.fsync_dir(directory)


def replace(source: Path, target: Path) -> None:
    _layer.replace(source, target)


def unlink(path: Path, *, missing_ok: bool = False) -> None:
    _layer.unlink(path, missing_ok=missing_ok)


def write_bytes(path: Path, data: bytes) -> None:
    """``Path.write_bytes`` through the layer (create or truncate, write, close; no fsync)."""
    fd = _layer.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        position = 0
        while position < len(view):
            position += _layer.pwrite(fd, view[position:], position)
    finally:
        _layer.close(fd)
