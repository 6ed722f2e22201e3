"""A node's stop signals (``brokers.net.stop_signal``): SIGTERM ends the main thread's wait
whichever thread the kernel hands it to, and whatever lock the main thread holds when it
arrives."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

_TO_ANOTHER_THREAD = """
import signal, threading
from brokers.net.stop_signal import on_stop_signals, wait_for_signal
done = threading.Event()
on_stop_signals(done.set)
other = threading.Thread(target=lambda: threading.Event().wait(60), daemon=True)
other.start()
signal.pthread_kill(other.ident, signal.SIGTERM)   # delivered to a thread that is not the main one
wait_for_signal(done)
print("stopped", flush=True)
"""

# The main thread holds the lock ``Event.set`` needs when the signal arrives, as it does for
# a few bytecodes inside every ``Event.wait`` that times out: the Python-level handler runs
# right there.  HANDLER is how the stop is wired.
_WHILE_HOLDING_THE_EVENTS_LOCK = """
import os, signal, threading
from brokers.net.stop_signal import on_stop_signals, wait_for_signal
done = threading.Event()
HANDLER
with done._cond:
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(1000):
        pass
wait_for_signal(done)
print("stopped", flush=True)
"""


def _run(code: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_sigterm_delivered_to_another_thread_still_ends_the_wait() -> None:
    started = time.monotonic()
    run = _run(_TO_ANOTHER_THREAD, 60)
    assert run.returncode == 0 and run.stdout.strip() == "stopped", run.stderr
    assert time.monotonic() - started < 30  # not the 60 s the other thread waits


def test_sigterm_while_the_main_thread_holds_the_events_lock_still_stops() -> None:
    run = _run(_WHILE_HOLDING_THE_EVENTS_LOCK.replace("HANDLER", "on_stop_signals(done.set)"), 60)
    assert run.returncode == 0 and run.stdout.strip() == "stopped", run.stderr


def test_the_plain_handler_deadlocks_there() -> None:
    """Why ``on_stop_signals`` exists: ``signal.signal(SIGTERM, lambda *_: done.set())`` waits
    forever for the lock its own thread holds (a broker ignored SIGTERM until SIGKILL)."""
    plain = _WHILE_HOLDING_THE_EVENTS_LOCK.replace("HANDLER", "signal.signal(signal.SIGTERM, lambda *_: done.set())")
    try:
        run = _run(plain, 2)
    except subprocess.TimeoutExpired:
        return
    raise AssertionError(f"the plain handler did not deadlock (exit {run.returncode}): {run.stdout} {run.stderr}")
