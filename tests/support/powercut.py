"""``PowerCutFiles``: a file layer (``brokers.log.files``) that can lose power at any operation.

It runs on the real files under ``root`` and remembers what a power cut would leave
(LazyFS's model, kept simple):

- a file's *content* is durable as of its last ``fsync`` (before any: as it was when the
  layer was installed, or empty for a file created since);
- a directory's *entries* (created, renamed, deleted names) are durable as of its last
  ``fsync_dir`` (before any: as they were when the layer was installed);
- bytes written past a file's durable length and not fsynced may survive in part: with
  ``tear_rate`` a seeded prefix of them does (the OS wrote some pages), else none.

``cut_at=N`` makes operation N (every mutating call counts: open, write, truncate, fsync,
rename, unlink) raise ``PowerCut`` instead of completing (a write is torn: a seeded prefix
of its bytes reaches the file first), and every later operation too (the process is
dead).  ``crash()`` then closes the files the layer opened and rewrites ``root`` to the
state the power cut leaves, so a test can reopen the log (with the OS layer) and check
its recovery against exactly that.  Directories themselves are assumed durable.
"""
from __future__ import annotations

import itertools
import os
import random
from pathlib import Path
from typing import Sequence

from brokers.log import files

__all__ = ["PowerCut", "PowerCutFiles", "installed"]

Buffer = bytes | bytearray | memoryview


class PowerCut(Exception):
    """The power went at this file operation."""


class PowerCutFiles(files.OsFiles):
    def __init__(self, root: Path, *, rng: random.Random, cut_at: int | None = None, tear_rate: float = 0.5) -> None:
        self.root = Path(root).resolve()
        self.rng = rng
        self.cut_at = cut_at
        self.tear_rate = tear_rate
        self.ops = 0
        self.dead = False
        self._ids = itertools.count()
        self.names: dict[Path, int] = {}                 # current name -> file id
        self.durable: dict[int, bytes] = {}              # file id -> content as of its last fsync
        self.durable_names: dict[Path, dict[str, int]] = {}   # directory -> durable entries
        self.fds: dict[int, int] = {}                    # fd opened here -> file id
        for path in sorted(p for p in self.root.rglob("*") if p.is_file()):
            ident = next(self._ids)
            self.names[path] = ident
            self.durable[ident] = path.read_bytes()
            self.durable_names.setdefault(path.parent, {})[path.name] = ident

    # -- bookkeeping ------------------------------------------------------------------------------

    def _tracked(self, path: Path) -> bool:
        return self.root in path.parents

    def _op(self) -> bool:
        """Count one operation; True when it is the one the power goes at (raise after a tear)."""
        if self.dead:
            raise PowerCut(f"operation {self.ops + 1} after the power cut")
        self.ops += 1
        if self.cut_at is not None and self.ops >= self.cut_at:
            self.dead = True
            return True
        return False

    def _path_of(self, ident: int) -> Path | None:
        return next((p for p, i in self.names.items() if i == ident), None)

    # -- the layer -------------------------------------------------------------------------------

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        path = Path(path).resolve()
        if self._op():
            raise PowerCut(f"open {path.name}")
        existed = path.exists()
        fd = super().open(path, flags, mode)
        if self._tracked(path):
            if not existed:
                ident = next(self._ids)
                self.names[path] = ident
                self.durable[ident] = b""
            self.fds[fd] = self.names[path]
        return fd

    def close(self, fd: int) -> None:
        self.fds.pop(fd, None)
        super().close(fd)

    def _torn(self, fd: int, data: Sequence[Buffer], position: int) -> None:
        joined = b"".join(bytes(b) for b in data)
        keep = self.rng.randint(0, len(joined)) if joined else 0
        if keep:
            super().pwrite(fd, joined[:keep], position)

    def pwrite(self, fd: int, data: Buffer, position: int) -> int:
        if self._op():
            self._torn(fd, [data], position)
            raise PowerCut("pwrite")
        return super().pwrite(fd, data, position)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        if self._op():
            self._torn(fd, buffers, position)
            raise PowerCut("pwritev")
        return super().pwritev(fd, buffers, position)

    def ftruncate(self, fd: int, size: int) -> None:
        if self._op():
            raise PowerCut("ftruncate")
        super().ftruncate(fd, size)

    def truncate(self, path: Path, size: int) -> None:
        if self._op():
            raise PowerCut("truncate")
        super().truncate(path, size)

    def fsync(self, fd: int) -> None:
        if self._op():
            raise PowerCut("fsync")
        super().fsync(fd)
        ident = self.fds.get(fd)
        path = self._path_of(ident) if ident is not None else None
        if ident is not None and path is not None:
            self.durable[ident] = path.read_bytes()

    def fsync_dir(self, directory: Path) -> None:
        if self._op():
            raise PowerCut("fsync_dir")
        super().fsync_dir(directory)
        directory = Path(directory).resolve()
        self.durable_names[directory] = {p.name: i for p, i in self.names.items() if p.parent == directory}

    def replace(self, source: Path, target: Path) -> None:
        source, target = Path(source).resolve(), Path(target).resolve()
        if self._op():
            raise PowerCut(f"rename {source.name}")
        super().replace(source, target)
        if source in self.names:
            self.names[target] = self.names.pop(source)

    def unlink(self, path: Path, *, missing_ok: bool = False) -> None:
        path = Path(path).resolve()
        if self._op():
            raise PowerCut(f"unlink {path.name}")
        super().unlink(path, missing_ok=missing_ok)
        self.names.pop(path, None)

    # -- the power cut ---------------------------------------------------------------------------

    def crash(self) -> dict[str, int]:
        """Close every file the layer opened and leave on disk what the power cut leaves
        (module docstring); returns ``{name: bytes kept past the durable content}``."""
        self.dead = True
        for fd in list(self.fds):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds.clear()
        current = {p: (p.read_bytes() if p.exists() else b"") for p in self.names}
        by_id = {i: current[p] for p, i in self.names.items()}
        directories = set(self.durable_names) | {p.parent for p in self.names}
        torn: dict[str, int] = {}
        for directory in sorted(directories):
            entries = self.durable_names.get(directory, {})
            for path in [p for p in self.names if p.parent == directory]:
                path.unlink(missing_ok=True)
            for name, ident in sorted(entries.items()):
                content = self.durable.get(ident, b"")
                now = by_id.get(ident)
                if now is not None and len(now) > len(content) and now.startswith(content) \
                        and self.rng.random() < self.tear_rate:
                    extra = self.rng.randint(0, len(now) - len(content))
                    content = now[:len(content) + extra]
                    torn[name] = extra
                (directory / name).write_bytes(content)
        return torn


class installed:
    """``with installed(layer):`` the process's file layer is ``layer`` inside the block."""

    def __init__(self, layer: files.FileLayer) -> None:
        self.layer = layer
        self.previous: files.FileLayer | None = None

    def __enter__(self) -> files.FileLayer:
        self.previous = files.use(self.layer)
        return self.layer

    def __exit__(self, *exc: object) -> None:
        assert self.previous is not None
        files.use(self.previous)


