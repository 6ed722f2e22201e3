"""Waiting on conditions with a deadline: the only way tests wait."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    *,
    timeout: float = 30.0,
    interval: float = 0.02,
    message: str | Callable[[], str] = "condition not met",
) -> T:
    """Poll ``condition`` until it returns a truthy value and return that value.

    Exceptions raised by ``condition`` count as "not yet" until the deadline; then the
    last one is chained to the ``AssertionError`` raised with ``message``.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - reported below
            last_error = exc
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout:.1f}s: {text}") from last_error
        time.sleep(interval)
