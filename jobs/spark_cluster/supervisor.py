"""Keep one child process alive: start it, restart it when it dies, stop it on request.

``Supervisor(argv, log_path=..., env=...)`` runs ``argv`` as a child that cannot outlive
its parent: the child asks the kernel for ``SIGTERM`` when the thread that started it
exits (``prctl(PR_SET_PDEATHSIG)``, Linux; elsewhere nothing is asked).  The request is
made by the child itself (``python -m jobs.spark_cluster.supervisor --parent PID -- argv``
checks that its parent is still ``PID`` after the request, then ``exec``s ``argv``), so
no ``preexec_fn`` runs in a multi-threaded parent.  This is what ties a broker to the
Spark task that hosts it: when Spark kills the task's Python worker (job cancelled,
executor lost), the broker gets ``SIGTERM`` and stops cleanly.

``run(stop)`` is the keep-alive loop: it starts the child, waits, and restarts it after
an unexpected exit, with a back-off of ``restart_backoff_s`` doubling to 10 s; more than
``max_restarts`` restarts within ``restart_window_s`` raises ``ChildFailedError`` (the
caller, a Spark task, then fails and Spark reschedules it).  ``stop`` is a
``threading.Event``; once set (it is looked at every 0.5 s), the child gets ``SIGTERM``,
then ``SIGKILL`` after ``stop_timeout_s`` (15 s: a broker stops within its
``shutdown_timeout_ms``, 10 s by default, or its watchdog ends it), and ``run`` returns:
stopping takes at most ``stop_timeout_s`` + 10.5 s, whatever the child does.

Thread-safety: ``run`` from one thread (the child is tied to that thread's life);
``pid``/``restarts`` may be read from any thread.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

__all__ = ["ChildFailedError", "Supervisor", "ask_parent_death_signal"]

_PR_SET_PDEATHSIG = 1


class ChildFailedError(RuntimeError):
    """The child kept dying: more than ``max_restarts`` restarts within the window."""


def ask_parent_death_signal(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent thread exits (Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0


class Supervisor:
    """One child process kept alive (see the module docstring)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        pass_fds: Sequence[int] = (),
        max_restarts: int = 5,
        restart_window_s: float = 120.0,
        restart_backoff_s: float = 0.5,
        stop_timeout_s: float = 15.0,
        on_start: Callable[[int], None] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.env = dict(env if env is not None else os.environ)
        self.pass_fds = tuple(pass_fds)
        self.max_restarts = max_restarts
        self.restart_window_s = restart_window_s
        self.restart_backoff_s = restart_backoff_s
        self.stop_timeout_s = stop_timeout_s
        self.on_start = on_start
        self.restarts = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        wrapped = [sys.executable, "-m", "jobs.spark_cluster.supervisor", "--parent", str(os.getpid()), "--", *self.argv]
        with open(self.log_path, "ab") as log:
            proc = subprocess.Popen(wrapped, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=self.env, pass_fds=self.pass_fds, start_new_session=True)
        if self.on_start is not None:
            self.on_start(proc.pid)
        return proc

    def run(self, stop: threading.Event) -> None:
        """Keep the child alive until ``stop`` is set; raises ``ChildFailedError``."""
        exits: list[float] = []
        backoff = self.restart_backoff_s
        try:
            while not stop.is_set():
                self._proc = self._spawn()
                while self._proc.poll() is None and not stop.is_set():
                    try:
                        self._proc.wait(timeout=0.5)
                    except subprocess.TimeoutExpired:
                        pass
                if stop.is_set():
                    break
                now = time.monotonic()
                exits = [t for t in exits if now - t < self.restart_window_s] + [now]
                if len(exits) > self.max_restarts:
                    raise ChildFailedError(f"{' '.join(self.argv)} exited {len(exits)} times within "
                                           f"{self.restart_window_s:.0f}s (last code {self._proc.returncode}); "
                                           f"see {self.log_path}")
                self.restarts += 1
                stop.wait(backoff)  # back-off before a restart, not synchronisation
                backoff = min(backoff * 2, 10.0)
        finally:
            self.terminate()

    def terminate(self) -> None:
        """SIGTERM the child, SIGKILL after ``stop_timeout_s``; idempotent."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _exec_child(argv: list[str]) -> int:
    """``--parent PID -- argv...``: ask for SIGTERM on parent death, then exec argv."""
    if len(argv) < 4 or argv[0] != "--parent" or argv[2] != "--":
        print("usage: python -m jobs.spark_cluster.supervisor --parent PID -- ARGV...", file=sys.stderr)
        return 2
    parent = int(argv[1])
    ask_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the request took effect
        return 1
    os.execvp(argv[3], argv[3:])  # does not return (raises OSError if it cannot exec)


if __name__ == "__main__":
    sys.exit(_exec_child(sys.argv[1:]))
