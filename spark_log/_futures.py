"""Cheap per-record futures for the producer.

``send()`` returns one ``concurrent.futures.Future`` per record, and at hundreds of
thousands of records per second the stock ``Future()`` (a new ``threading.Condition`` each)
and one ``set_result`` per record cost more than the rest of ``send``.  ``FutureGroup``
makes real ``Future`` objects that share one condition and are completed together, in
bulk, under one lock acquisition.

They are ordinary ``Future`` instances (of a subclass): ``result``, ``exception``, ``done``,
``add_done_callback``, ``concurrent.futures.wait`` and ``as_completed`` all work, because
the group sets exactly the private fields ``Future.set_result`` sets (``_state``,
``_result``, ``_exception``, ``_waiters``, ``_done_callbacks``; unchanged since Python 3.2,
and spark-log pins Python 3.11).  A group's future is one object with one attribute (its
group's condition) until someone waits on it or adds a callback (``_GroupFuture``).  Futures of a group cannot be cancelled once the group
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
        future = _new(_GroupFuture)
        future._condition = self._condition
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
                extra = future.__dict__
                if _WAITERS in extra:  # someone waits on it (concurrent.futures.wait, as_completed)
                    for waiter in extra[_WAITERS]:
                        if exc is None:
                            waiter.add_result(future)
                        else:
                            waiter.add_exception(future)
                if extra.get(_CALLBACKS):
                    with_callbacks.append(future)
            self._condition.notify_all()
        for future in with_callbacks:
            future._invoke_callbacks()  # type: ignore[attr-defined]  # private to Future, not in typeshed


_WAITERS = "_group_waiters"
_CALLBACKS = "_group_callbacks"
_new = object.__new__


class _GroupFuture(Future[Any]):
    """A ``Future`` of a ``FutureGroup``: made without ``Future.__init__`` (no new
    condition, no two new lists per record).  ``_state``, ``_result`` and ``_exception``
    start as class attributes; ``_waiters`` and ``_done_callbacks`` (the lists
    ``concurrent.futures`` appends to) are made on first use, so a record nobody waits on
    individually costs one object and one attribute."""

    _state = RUNNING
    _result = None
    _exception = None

    @property
    def _waiters(self) -> list[Any]:
        return self.__dict__.setdefault(_WAITERS, [])  # type: ignore[no-any-return]

    @_waiters.setter
    def _waiters(self, value: list[Any]) -> None:
        self.__dict__[_WAITERS] = value

    @property
    def _done_callbacks(self) -> list[Any]:
        return self.__dict__.setdefault(_CALLBACKS, [])  # type: ignore[no-any-return]

    @_done_callbacks.setter
    def _done_callbacks(self, value: list[Any]) -> None:
        self.__dict__[_CALLBACKS] = value


assert PENDING  # imported for readers: group futures skip PENDING (never cancellable)
