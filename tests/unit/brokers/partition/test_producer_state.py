"""Idempotent producer state: the rule table of ``producer_state.py``, one test per row."""
from __future__ import annotations

import pytest

from brokers.partition.producer_state import ProducerStateTable, Verdict
from spark_log.errors import DuplicateSequenceError, FencedEpochError, OutOfOrderSequenceError


def _table_with(*runs: tuple[int, int, int, int]) -> ProducerStateTable:
    table = ProducerStateTable(max_batches=4)
    for epoch, seq, count, offset in runs:
        table.record(1, epoch, seq, count, offset)
    return table


def test_not_idempotent_always_appends() -> None:
    assert ProducerStateTable().check(-1, -1, -1, 5).verdict is Verdict.APPEND


def test_unknown_producer_starts_at_zero_else_gap() -> None:
    table = ProducerStateTable()
    assert table.check(1, 0, 0, 3).verdict is Verdict.APPEND
    assert table.check(1, 0, 5, 3).verdict is Verdict.GAP


def test_next_sequence_appends_and_gap_waits() -> None:
    table = _table_with((0, 0, 5, 100))
    assert table.check(1, 0, 5, 2).verdict is Verdict.APPEND
    assert table.check(1, 0, 6, 2).verdict is Verdict.GAP


def test_duplicates_map_to_original_offsets_even_when_recut() -> None:
    table = _table_with((0, 0, 5, 100), (0, 5, 5, 200))  # another producer wrote 105..199 in between
    exact = table.check(1, 0, 5, 5)
    assert (exact.verdict, exact.first_offset, exact.last_offset) == (Verdict.DUPLICATE, 200, 204)
    recut = table.check(1, 0, 3, 4)  # records 3..6 span both batches
    assert (recut.verdict, recut.first_offset, recut.last_offset) == (Verdict.DUPLICATE, 103, 201)


def test_straddling_the_last_sequence_is_refused() -> None:
    table = _table_with((0, 0, 5, 0))
    with pytest.raises(OutOfOrderSequenceError):
        table.check(1, 0, 3, 5)


def test_evicted_duplicates_raise_duplicate_sequence() -> None:
    table = _table_with(*[(0, 2 * i, 2, 10 * i) for i in range(6)])  # max_batches=4: first two evicted
    with pytest.raises(DuplicateSequenceError):
        table.check(1, 0, 0, 2)
    assert table.check(1, 0, 10, 2).first_offset == 50


def test_epochs_fence_and_restart_sequences() -> None:
    table = _table_with((3, 0, 5, 0))
    with pytest.raises(FencedEpochError):
        table.check(1, 2, 5, 1)
    assert table.check(1, 4, 0, 1).verdict is Verdict.APPEND
    assert table.check(1, 4, 2, 1).verdict is Verdict.GAP
    table.record(1, 4, 0, 1, 50)
    with pytest.raises(FencedEpochError):
        table.check(1, 3, 5, 1)


def test_rebuild_in_log_order_is_idempotent_and_ignores_old_epochs() -> None:
    table = ProducerStateTable()
    for epoch, seq, count, offset in [(0, 0, 2, 0), (1, 0, 2, 2), (0, 2, 2, 4), (1, 0, 2, 2)]:
        table.record(7, epoch, seq, count, offset)
    assert table.last_sequence(7) == (1, 1)
    assert table.check(7, 1, 0, 2).first_offset == 2


def test_expire_forgets_idle_producers() -> None:
    table = ProducerStateTable()
    table.record(1, 0, 0, 1, 0, timestamp_ms=1_000)
    table.record(2, 0, 0, 1, 1, timestamp_ms=9_000)
    assert table.expire(10_000, 5_000) == 1
    assert table.last_sequence(1) is None and table.last_sequence(2) == (0, 0)
