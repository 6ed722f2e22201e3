"""Cheap per-record futures for the producer.

``send()`` returns one ``concurrent.futures.Future`` per record, and at hundreds of
thousands of records per second the stock ``Future()`` (a new ``threading.Condition`` each)
and one ``set_result`` per record cost more than the rest of ``send``.  ``FutureGroup``
makes real ``Future`` objects that share one condition and are completed together, in
bulk, under one lock acquisition.

They are ordinary ``Future`` instances: ``result``, ``exception``, ``done``,
``add_done_callback``, ``concurrent.futures.wait`` and ``as_completed`` all work, because
the group sets exactly the private fields ``Future.set_result`` sets (``_state``,
``_result``, ``_exception``, ``_waiters``, ``_done_callbacks``; unchanged since Python 3.2,
and spark-log pins Python 3.11).  Futures of a group cannot be cancelled once the group
has been handed to the sender (``cancel`` returns False), as Kafka's.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures._base import FINISHED, PENDING, RUNNING
from typing import Any, Callable

__all__ = ["FutureGroup"]


class FutureGroup:
    """Futures that complete together: ``resolve(fn)`` or ``fail(exc)``, once."""

    __slots__ = ("_condition", "_futures", "_done")

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._futures: list[Future[Any]] = []
        self._done = False

    def __len__(self) -> int:
        return len(self._futures)

    def new(self) -> "Future[Any]":
        future: Future[Any] = Future.__new__(Future)
        future.__dict__.update(  # the fields Future.__init__ sets; RUNNING: not cancellable once queued
            _condition=self._condition, _state=RUNNING, _result=None, _exception=None, _waiters=[],
            _done_callbacks=[])
        self._futures.append(future)
        return future

    def resolve(self, result_for: Callable[[int], Any]) -> None:
        """Complete future ``i`` with ``result_for(i)``."""
        self._finish(result_for, None)

    def fail(self, exc: BaseException) -> None:
        self._finish(None, exc)

    def _finish(self, result_for: Callable[[int], Any] | None, exc: BaseException | None) -> None:
        with_callbacks = []
        with self._condition:
            if self._done:
                return
            self._done = True
            for index, future in enumerate(self._futures):
                if result_for is not None:
                    future._result = result_for(index)
                else:
                    future._exception = exc
                future._state = FINISHED
                for waiter in future._waiters:
                    if exc is None:
                        waiter.add_result(future)
                    else:
                        waiter.add_exception(future)
                if future._done_callbacks:  # type: ignore[attr-defined]  # private to Future, not in typeshed
                    with_callbacks.append(future)
            self._condition.notify_all()
        for future in with_callbacks:
            future._invoke_callbacks()  # type: ignore[attr-defined]  # private to Future, not in typeshed


assert PENDING  # imported for readers: group futures skip PENDING (never cancellable)
