"""Cheap per-record futures for the producer.

``send()`` returns one ``concurrent.futures.Future`` per record, and at hundreds of
thousands of records per second the stock ``Future()`` (a new ``threading.Condition`` each)
and one ``set_result`` per record cost more than the rest of ``send``.  ``FutureGroup``
makes real ``Future`` objects that share one condition and are completed together, in
O(1): a group's future is one object with two attributes (its group and its index in the
group) and reads its state, result and exception from the group when asked (lazily), so
resolving a batch of 10,000 records touches only the futures somebody waits on or added a
callback to.

They are ordinary ``Future`` instances (of a subclass): ``result``, ``exception``, ``done``,
``add_done_callback``, ``concurrent.futures.wait`` and ``as_completed`` all work, because
the private fields those read (``_condition``, ``_state``, ``_result``, ``_exception``,
``_waiters``, ``_done_callbacks``; unchanged since Python 3.2, and spark-log pins Python
3.11) are properties answering from the group.  ``_waiters`` and ``_done_callbacks`` are
made on first use (always under the group's condition, as ``concurrent.futures`` takes
``_condition`` first), and that first use registers the future with its group, which
notifies exactly those at completion.  Futures of a group cannot be cancelled once the
group has been handed to the sender (``cancel`` returns False), as Kafka's.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures._base import FINISHED, PENDING, RUNNING
from typing import Any, Callable

__all__ = ["FutureGroup"]


class FutureGroup:
    """Futures that complete together: ``resolve(fn)`` or ``fail(exc)``, once."""

    __slots__ = ("_condition", "_count", "_done", "_result_for", "_exception", "_watched")

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._count = 0
        self._done = False
        self._result_for: Callable[[int], Any] | None = None
        self._exception: BaseException | None = None
        self._watched: list[_GroupFuture] = []  # futures with waiters or callbacks

    def __len__(self) -> int:
        return self._count

    def new(self) -> "Future[Any]":
        future = _new(_GroupFuture)
        future._group = self
        future._index = self._count
        self._count += 1
        return future

    def resolve(self, result_for: Callable[[int], Any]) -> None:
        """Complete future ``i`` with ``result_for(i)`` (called when its result is read)."""
        self._finish(result_for, None)

    def fail(self, exc: BaseException) -> None:
        self._finish(None, exc)

    def _finish(self, result_for: Callable[[int], Any] | None, exc: BaseException | None) -> None:
        with_callbacks = []
        with self._condition:
            if self._done:
                return
            self._result_for, self._exception = result_for, exc
            self._done = True
            for future in self._watched:
                extra = future.__dict__
                for waiter in extra.get(_WAITERS, ()):
                    if exc is None:
                        waiter.add_result(future)
                    else:
                        waiter.add_exception(future)
                if extra.get(_CALLBACKS):
                    with_callbacks.append(future)
            self._watched = []
            self._condition.notify_all()
        for future in with_callbacks:
            future._invoke_callbacks()  # type: ignore[attr-defined]  # private to Future, not in typeshed


_WAITERS = "_group_waiters"
_CALLBACKS = "_group_callbacks"
_new = object.__new__


class _GroupFuture(Future[Any]):
    """A ``Future`` of a ``FutureGroup``: made without ``Future.__init__`` (no new
    condition, no two new lists per record); everything else is read from the group."""

    _group: FutureGroup
    _index: int

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        return self._group._condition

    @property
    def _state(self) -> str:
        return FINISHED if self._group._done else RUNNING

    @_state.setter
    def _state(self, value: str) -> None:
        raise RuntimeError("a producer's future is completed by the producer only")

    @property
    def _result(self) -> Any:  # type: ignore[override]
        group = self._group
        return group._result_for(self._index) if group._done and group._result_for is not None else None

    @property
    def _exception(self) -> BaseException | None:  # type: ignore[override]
        return self._group._exception

    def _watch(self, name: str) -> list[Any]:
        extra = self.__dict__
        found = extra.get(name)
        if found is None:
            found = extra[name] = []
            if (_CALLBACKS if name == _WAITERS else _WAITERS) not in extra and not self._group._done:
                self._group._watched.append(self)  # the first of the two lists: registered once
        return found

    @property
    def _waiters(self) -> list[Any]:
        return self._watch(_WAITERS)

    @_waiters.setter
    def _waiters(self, value: list[Any]) -> None:
        self.__dict__[_WAITERS] = value

    @property
    def _done_callbacks(self) -> list[Any]:
        return self._watch(_CALLBACKS)

    @_done_callbacks.setter
    def _done_callbacks(self, value: list[Any]) -> None:
        self.__dict__[_CALLBACKS] = value


assert PENDING  # imported for readers: group futures skip PENDING (never cancellable)
