"""Finding the processes of a Spark-hosted cluster through /proc (Linux), for fault tests."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ancestors", "broker_pid", "cmdline", "executor_of"]

EXECUTOR_CLASS = "CoarseGrainedExecutorBackend"


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rpartition(")")[2].split()[1])


def ancestors(pid: int) -> list[int]:
    """``pid``'s parent, grandparent, ... up to (not including) init."""
    out: list[int] = []
    try:
        while (pid := _parent(pid)) > 1:
            out.append(pid)
    except OSError:
        pass
    return out


def broker_pid(node_toml: Path) -> int | None:
    """The live ``python -m brokers.node --config <node_toml>`` process, if any."""
    needle = f"--config {node_toml}"
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and "brokers.node" in (line := cmdline(int(entry.name))) and needle in line:
            try:
                state = Path(f"/proc/{entry.name}/stat").read_text().rpartition(")")[2].split()[0]
            except OSError:
                continue
            if state != "Z":
                return int(entry.name)
    return None


def executor_of(pid: int) -> int | None:
    """The Spark executor JVM that ``pid`` descends from, if any."""
    return next((p for p in ancestors(pid) if EXECUTOR_CLASS in cmdline(p)), None)
