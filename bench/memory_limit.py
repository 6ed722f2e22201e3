"""A memory cgroup for a bench's broker processes: the steady state of a broker host.

On this kind of virtual machine (Firecracker, free page reporting) the first write into a
page of memory the guest has not used for a while costs about ten times a write into a page
it recycles: the host backs the page on first touch, and memory the guest frees goes back to
the host within a minute or so (``bench.ceilings.page_cache_ceiling`` measures both costs).
A log's appends take new page-cache pages, so on a freshly booted machine, or one whose
memory sits free, every stored byte pays the host's price.  A broker host in steady state
does not: its memory is full of page cache and the kernel recycles the oldest pages for new
appends, which is also what a container's memory limit (a Kubernetes pod's, which counts
page cache) gives.  ``MemoryCgroup`` puts processes under such a limit (cgroup v2
``memory.max`` or v1 ``memory.limit_in_bytes``, as root), so a bench can show both states.

Bench-only code: not part of the product.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Callable

__all__ = ["MemoryCgroup", "MemoryCgroupUnavailable", "add_memory_limit_option", "check_memory_limit_option"]

_ROOT = Path("/sys/fs/cgroup")


class MemoryCgroupUnavailable(Exception):
    """No memory cgroup can be made here (not Linux, not root, no memory controller)."""


def _own_memory_cgroup(root: Path, lines: list[str] | None) -> tuple[Path, int]:
    """This process's memory cgroup directory and the cgroup version (1 or 2), from the
    lines of ``/proc/self/cgroup`` (``lines``, or read)."""
    if lines is None:
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError as exc:
            raise MemoryCgroupUnavailable(f"no /proc/self/cgroup: {exc}") from None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(",") and (root / "memory").is_dir():
            return root / "memory" / path.lstrip("/"), 1
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "" and "memory" in _read(root / "cgroup.controllers").split():
            return root / path.lstrip("/"), 2
    raise MemoryCgroupUnavailable("no cgroup memory controller is mounted")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


class MemoryCgroup:
    """A new memory cgroup of ``limit_bytes`` under this process's own, for ``add``ed
    processes; ``close`` moves them back where this process is and removes it.  Raises
    ``MemoryCgroupUnavailable`` where none can be made.  ``root`` and ``proc_cgroup`` (the
    lines of ``/proc/self/cgroup``) are where the cgroups are mounted and where this process
    is in them (tests give their own)."""

    def __init__(self, limit_bytes: int, name: str = "spark-log-bench", *, root: Path = _ROOT,
                 proc_cgroup: list[str] | None = None) -> None:
        if limit_bytes <= 0:
            raise ValueError(f"a memory limit must be positive, got {limit_bytes}")
        self._home, self.version = _own_memory_cgroup(root, proc_cgroup)
        self.limit_bytes = limit_bytes
        self.path = self._home / f"{name}-{os.getpid()}"
        try:
            self.path.mkdir()
            limit_file = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
            (self.path / limit_file).write_text(str(limit_bytes))
        except OSError as exc:
            self._remove()
            raise MemoryCgroupUnavailable(f"cannot make a memory cgroup at {self.path}: {exc}") from None
        self._pids: list[int] = []

    def add(self, pid: int) -> None:
        """Move process ``pid`` into the cgroup (memory it charged before stays where it was)."""
        (self.path / "cgroup.procs").write_text(str(pid))
        self._pids.append(pid)

    def usage_bytes(self) -> int:
        """Memory charged to the cgroup now: its processes' own and their page cache."""
        text = _read(self.path / ("memory.usage_in_bytes" if self.version == 1 else "memory.current"))
        return int(text) if text.strip() else 0

    def limit_hits(self) -> int:
        """How often the cgroup has reached its limit and had to reclaim (v1 ``failcnt``, v2
        ``memory.events`` ``max``): above 0, new pages come from recycled ones."""
        if self.version == 1:
            text = _read(self.path / "memory.failcnt")
            return int(text) if text.strip() else 0
        for line in _read(self.path / "memory.events").splitlines():
            key, _, value = line.partition(" ")
            if key == "max":
                return int(value)
        return 0

    def fill(self, produce: Callable[[], int], who: str, deadline_s: float = 240.0) -> None:
        """Call ``produce`` (a second of writes; records written) until the cgroup has reached
        its limit and reclaims: the steady state the measured runs then see.  Prints what it
        took, naming the processes ``who``.  Raises ``RuntimeError`` if it has not within
        ``deadline_s``."""
        started = time.monotonic()
        records = 0
        while self.limit_hits() == 0:
            if time.monotonic() - started > deadline_s:
                raise RuntimeError(f"the memory cgroup of {who} did not reach its {self.limit_bytes >> 20} MiB limit "
                                   f"within {deadline_s:.0f} s ({self.usage_bytes() >> 20} MiB charged)")
            records += produce()
        print(f"memory: {who} in a memory cgroup of {self.limit_bytes >> 20:,} MiB (cgroup v{self.version}), "
              f"filled by {records:,} records in {time.monotonic() - started:.1f} s: {self.usage_bytes() >> 20:,} MiB "
              f"charged, limit reached {self.limit_hits():,} times; from here on appends recycle pages (steady state)")

    def close(self) -> None:
        """Every process still alive goes back to this process's cgroup; the cgroup is removed."""
        for pid in self._pids:
            try:
                (self._home / "cgroup.procs").write_text(str(pid))
            except OSError:
                pass  # the process has exited
        self._pids = []
        self._remove()

    def _remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:
            pass

    def __enter__(self) -> "MemoryCgroup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def add_memory_limit_option(parser: argparse.ArgumentParser, who: str) -> None:
    """A bench's ``--memory-limit-mib`` (``who``: the processes it limits)."""
    parser.add_argument("--memory-limit-mib", type=int, default=0,
                        help=f"run {who} in a memory cgroup of this many MiB, filled before the runs (the steady "
                             "state of a broker host: appends recycle pages); 0: off")


def check_memory_limit_option(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse (``parser.error``) a negative limit, and a limit with ``--peers``."""
    if args.memory_limit_mib < 0:
        parser.error(f"--memory-limit-mib must be 0 or more, got {args.memory_limit_mib}")
    if args.memory_limit_mib and args.peers:
        parser.error("--memory-limit-mib runs no peers: they would not share the memory condition")
