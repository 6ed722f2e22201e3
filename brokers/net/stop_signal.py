"""SIGTERM and SIGINT turned into a call in a thread of its own, with no lock in a signal handler.

The obvious ``signal.signal(SIGTERM, lambda *_: done.set())`` can deadlock.  Python runs a
handler in the main thread between two bytecodes, and that can be inside
``threading.Event.wait``'s own ``with self._cond:`` block, right after the wait timed out and
took the condition's lock back; ``done.set()`` then waits forever for a lock its own thread
holds.  The main thread never stops, the other threads go on, and the process ends only by
SIGKILL.  A main thread that polls ``done.wait(0.0001)`` hung in 1 of 100 to 300 SIGTERMs
here, and a suite run had a broker ignore SIGTERM until its SIGKILL 15 s later.

``on_stop_signals(callback)`` registers handlers that run no Python at all for the stop: the
interpreter's C handler writes the signal number to a wakeup socket
(``signal.set_wakeup_fd``), and a daemon thread blocked on that socket calls ``callback``
as ordinary code, whichever thread the kernel delivered the signal to and whatever the main
thread holds.  Call it from the main thread (``set_wakeup_fd`` requires it), once per process.
"""
from __future__ import annotations

import signal
import socket
import threading
from typing import Callable, Iterable

__all__ = ["on_stop_signals", "wait_for_signal"]

_OPEN: list[socket.socket] = []  # the wakeup socket pair lives as long as the process


def on_stop_signals(callback: Callable[[], object],
                    signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT)) -> None:
    """Call ``callback`` once, from a daemon thread, when one of ``signals`` arrives."""
    wanted = {int(s) for s in signals}
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    _OPEN.extend((reader, writer))
    for number in wanted:
        signal.signal(number, lambda *_: None)  # a Python handler makes the C handler write the wakeup byte
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)

    def watch() -> None:
        while not wanted.intersection(reader.recv(64)):  # other signals with Python handlers write too
            pass
        callback()

    threading.Thread(target=watch, name="stop-signal", daemon=True).start()


def wait_for_signal(done: threading.Event) -> None:
    """Block the main thread until ``done`` is set by ``on_stop_signals``'s thread.  No Python
    handler has to run for that (the kernel may deliver the signal to any thread, and the C
    handler's wakeup byte reaches the watcher from there), so the wait needs no timeout."""
    done.wait()
