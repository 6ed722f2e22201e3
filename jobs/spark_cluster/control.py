"""Operate a Spark-hosted cluster from the driver host: ``start``, ``stop``, ``status``.

``start`` runs the hosting application (``python -m jobs.spark_cluster run ...``) in the
background, in its own session so it outlives the caller, logging to
``<root>/application.log``, and returns once ``cluster.json`` says ``ready`` (every broker
registered and unfenced) with the bootstrap string; if the application exits or
``timeout_s`` passes first, it is stopped and ``StartError`` names the log.
``stop`` sends SIGTERM to the application (which stops brokers, controllers and Spark)
and waits; SIGKILL after ``timeout_s`` (the brokers and controllers then get SIGTERM from
their parents' death).  ``status`` reads ``cluster.json`` and asks the controllers.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from brokers.controller.client import ControllerClient
from spark_log.errors import SparkLogError

from .application import live_brokers, wait_brokers_gone
from .layout import APP_LOG, BOOTSTRAP_FILE, ClusterState

__all__ = ["ClusterStatus", "StartError", "pid_alive", "start", "status", "stop"]

REPO = Path(__file__).resolve().parents[2]


class StartError(RuntimeError):
    """The hosting application did not become ready."""


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as handle:  # a zombie is dead
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def start(root: Path, run_args: Sequence[str], *, timeout_s: float = 180.0) -> str:
    """Start the hosting application with ``run_args`` (``run``'s flags); the bootstrap."""
    root = Path(root)
    state = ClusterState.load(root)
    if state is not None and pid_alive(state.app_pid):
        if state.state == "ready":
            return (root / BOOTSTRAP_FILE).read_text().strip()
        raise StartError(f"the hosting application (pid {state.app_pid}) is already running, state {state.state}")
    root.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log_path = root / APP_LOG
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "jobs.spark_cluster", "run", "--data-dir", str(root), *run_args],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StartError(f"the hosting application exited with code {proc.returncode}; "
                             f"{log_path}:\n{_tail(log_path)}")
        current = ClusterState.load(root)
        if current is not None and current.app_pid == proc.pid and current.state == "ready":
            return (root / BOOTSTRAP_FILE).read_text().strip()
        time.sleep(0.5)  # polling another process's progress
    stop(root, timeout_s=60)
    raise StartError(f"the hosting application was not ready after {timeout_s:.0f}s; {log_path}:\n{_tail(log_path)}")


def stop(root: Path, *, timeout_s: float = 60.0) -> bool:
    """Stop the hosting application; True if it was running."""
    state = ClusterState.load(Path(root))
    if state is None or not pid_alive(state.app_pid):
        return False
    os.kill(state.app_pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while pid_alive(state.app_pid) and time.monotonic() < deadline:
        time.sleep(0.2)  # polling another session's process
    if pid_alive(state.app_pid):
        os.kill(state.app_pid, signal.SIGKILL)
        while pid_alive(state.app_pid):
            time.sleep(0.1)
    wait_brokers_gone(Path(root), state.brokers)
    return True


@dataclass(frozen=True)
class ClusterStatus:
    state: str                                  # from cluster.json, or "stopped" if the app is gone
    app_pid: int
    voters: tuple[str, ...]
    brokers: dict[int, tuple[str, bool]]        # {id: (address, fenced)} per the controllers
    expected: int
    error: str = ""

    @property
    def healthy(self) -> bool:
        live = {b for b, (_, fenced) in self.brokers.items() if not fenced}
        return self.state == "ready" and live >= set(range(1, self.expected + 1))


def status(root: Path) -> ClusterStatus:
    state = ClusterState.load(Path(root))
    if state is None:
        return ClusterStatus("absent", 0, (), {}, 0)
    alive = pid_alive(state.app_pid)
    brokers: dict[int, tuple[str, bool]] = {}
    error = state.error
    if alive:
        client = ControllerClient(state.voter_addresses(), timeout_s=5.0, rpc_timeout_s=2.0)
        try:
            brokers = live_brokers(client)
        except (SparkLogError, OSError) as exc:
            error = f"controllers do not answer: {exc}"
        finally:
            client.close()
    return ClusterStatus(state.state if alive else "stopped", state.app_pid if alive else 0, tuple(state.voters),
                         brokers, state.brokers, error)
