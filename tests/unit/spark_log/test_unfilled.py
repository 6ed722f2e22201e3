"""spark_log.unfilled: byte arrays for receives and copies that write every byte."""
from __future__ import annotations

import os

import pytest

from spark_log import unfilled
from spark_log.unfilled import unfilled_bytearray


@pytest.mark.parametrize("size", [0, 1, 64 * 1024 - 1, 64 * 1024, 3_000_001])
def test_a_bytearray_of_the_size_that_keeps_what_is_written(size: int) -> None:
    array = unfilled_bytearray(size)
    assert type(array) is bytearray and len(array) == size
    data = os.urandom(size)
    memoryview(array)[:] = data
    assert array == data
    array += b"x"  # an ordinary bytearray: it grows, and frees cleanly
    assert len(array) == size + 1


def test_large_arrays_skip_the_zero_fill_and_small_ones_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    real = unfilled._MAKE
    assert real is not None  # CPython: the C call is found

    def spy(pointer: None, size: int) -> bytearray:
        made.append(size)
        return real(pointer, size)

    monkeypatch.setattr(unfilled, "_MAKE", spy)
    unfilled_bytearray(1 << 20)
    unfilled_bytearray(100)
    assert made == [1 << 20]


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        unfilled_bytearray(-1)
