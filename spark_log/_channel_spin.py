"""One callback thread per gRPC channel for the channel's whole life.

grpcio's Python channel completes its ``future()`` and streaming calls on a "spin" thread
that it starts when a call begins on a channel with none in flight and that ends when the
channel's last call completes.  A client with one request at a time in flight (a producer
at a few thousand records a second, a consumer's fetch long poll between two answers)
so starts a new OS thread for every call: about 150 µs of CPU and 0.1 ms of latency per
call here (a loopback unary ``future()``: 0.44 -> 0.35 ms median, 565 -> 400 µs of CPU
with the server's share).

``pin`` starts that thread once, when the channel is made, and keeps it: the channel counts
one call more than it has in flight (the *pin*), so it never runs out of calls.  grpcio
destroys a channel's completion queue when the channel closes, and a thread still waiting
on it then aborts the process, so the pinned thread always stops first:

- ``close()`` (and ``with``): the channel's ``_close`` is wrapped; it stops the thread,
  waits for it, then closes as grpcio does;
- the channel object collected without ``close()``: a finaliser stops the thread (it holds
  the call state, so grpcio's own finaliser, which closes, cannot run before).

Stopping: a flag, and a call that expires at once (deadline now) to wake the thread; the
thread drops the pin and, if calls are still in flight, hands them to a grpcio spin thread
as grpcio would have started one, then ends.

This reads grpcio's private channel state (``Channel._call_state`` with ``lock``,
``managed_calls``, ``channel.next_call_event``, and ``grpc._channel._run_channel_spin_thread``,
the same from grpcio 1.2x to the 1.85 that ``requirements.lock`` pins).  Where it is not what
this module expects, ``pin`` leaves the channel as grpcio made it and returns False;
``tests/unit/spark_log/test_channel_spin.py`` checks that it pins.
"""
from __future__ import annotations

import importlib
import logging
import threading
import weakref
from typing import Any

import grpc

__all__ = ["pin"]

_log = logging.getLogger(__name__)
_WAKE_METHOD = "/spark_log.internal.v1.ChannelSpin/Wake"  # never sent: its deadline has passed

try:
    _cygrpc: Any = importlib.import_module("grpc._cython.cygrpc")  # no type stubs: typed as Any
    _grpc_channel: Any = importlib.import_module("grpc._channel")
except ImportError:  # pragma: no cover - a grpcio without its Cython core
    _cygrpc = _grpc_channel = None


class _Pin:
    """The pinned thread of one channel and how to stop it."""

    def __init__(self, state: Any, wake: Any) -> None:
        self.state = state
        self.wake = wake
        self.stopping = False
        self.thread: threading.Thread | None = None

    def stop(self, *, wait: bool) -> None:
        """Make the thread drop the pin and end; ``wait``: until it ended (before a close)."""
        state = self.state
        if state is None:  # ended already (closed before it was collected)
            return
        with state.lock:
            already, self.stopping = self.stopping, True
        if not already:
            try:
                self.wake.future(b"", timeout=0).add_done_callback(lambda _f: None)
            except Exception:  # the channel is unusable: then nothing is in flight to wait for
                _log.debug("could not wake a pinned gRPC channel thread", exc_info=True)
        thread = self.thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join(10)
            if thread.is_alive():
                _log.warning("a pinned gRPC channel thread did not stop within 10 s")

    def spin(self) -> None:
        """grpcio's ``channel_spin`` loop, except that it ends on ``stopping`` (handing the
        calls still in flight to grpcio's own thread) instead of at the last call."""
        state, core = self.state, self.state.channel
        timeout, shutdown = _cygrpc.CompletionType.queue_timeout, _cygrpc.CompletionType.queue_shutdown
        while True:
            _cygrpc.block_if_fork_in_progress(state)
            event = core.next_call_event()
            if event.completion_type == shutdown:  # closed under the thread (not by close()): nothing to poll
                self.state = None
                return
            if event.completion_type != timeout and event.tag is not None:
                try:
                    completed = event.tag(event)
                except Exception:  # a failing completion must not end the thread: later calls would hang
                    _log.exception("a gRPC call's completion failed")
                    completed = False
                if completed:
                    with state.lock:
                        state.managed_calls -= 1
            with state.lock:
                if not self.stopping:
                    continue
                state.managed_calls -= 1  # the pin
                if state.managed_calls > 0:  # calls still in flight: grpcio's thread takes them
                    _grpc_channel._run_channel_spin_thread(state)
                self.state = None
                return


def pin(channel: grpc.Channel) -> bool:
    """Give ``channel`` (as ``grpc.insecure_channel``/``secure_channel`` returned it, before
    interceptors, with no call made yet) one callback thread for its life.  False: left as
    it was."""
    state = getattr(channel, "_call_state", None)
    core = getattr(state, "channel", None)
    close = getattr(channel, "_close", None)
    if (_cygrpc is None or state is None or not hasattr(state, "lock") or not hasattr(core, "next_call_event")
            or not isinstance(getattr(state, "managed_calls", None), int) or close is None
            or not hasattr(_grpc_channel, "_run_channel_spin_thread")):
        return False
    pinned = _Pin(state, channel.unary_unary(_WAKE_METHOD))
    with state.lock:
        if state.managed_calls:  # calls in flight, or pinned already
            return False
        state.managed_calls = 1
        thread = _cygrpc.ForkManagedThread(target=pinned.spin)
        thread.setDaemon(True)
        pinned.thread = getattr(thread, "_thread", None) or thread
        thread.start()

    def closing() -> None:
        pinned.stop(wait=True)
        close()

    channel._close = closing  # type: ignore[attr-defined]  # close() and __exit__ call it
    weakref.finalize(channel, pinned.stop, wait=False)
    return True
