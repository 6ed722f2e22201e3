"""A node's main thread notices SIGTERM even when the kernel hands the signal to another
thread (``brokers.node.wait_for_signal``).  The signal goes to a helper thread on purpose
(``pthread_kill``): a main thread blocked in an untimed ``Event.wait()`` is then never
interrupted and the handler never runs (the once-in-twelve observer node that ignored
SIGTERM for 15 s); a timed wait returns to the interpreter, which runs it."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

_CHILD = """
import signal, threading
from brokers.node import wait_for_signal
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
other = threading.Thread(target=lambda: threading.Event().wait(60), daemon=True)
other.start()
signal.pthread_kill(other.ident, signal.SIGTERM)   # delivered to a thread that is not the main one
wait_for_signal(done)
print("stopped", flush=True)
"""


def test_sigterm_delivered_to_another_thread_still_ends_the_wait() -> None:
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=60, cwd=REPO,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0 and run.stdout.strip() == "stopped", run.stderr
    assert time.monotonic() - started < 30  # not the 60 s the other thread waits: the handler ran
