"""The partition's transaction index: open transactions hold the last stable offset back,
markers end them, aborted ranges are listed for read_committed fetches, replays are idempotent."""
from __future__ import annotations

from brokers.partition.txn_index import AbortedTxn, TxnIndex


def test_lso_is_the_first_offset_of_the_oldest_open_transaction() -> None:
    index = TxnIndex()
    assert index.last_stable_offset(10) == 10
    index.on_data(7, 3)
    index.on_data(8, 5)
    index.on_data(7, 6)  # a later frame of the same transaction
    assert index.last_stable_offset(10) == 3
    assert index.last_stable_offset(2) == 2  # capped by the high watermark
    index.on_marker(7, True, 9)
    assert index.last_stable_offset(12) == 5
    index.on_marker(8, False, 10)
    assert index.last_stable_offset(12) == 12
    assert index.aborted_between(0, 11) == [AbortedTxn(8, 5, 10)]


def test_aborted_between_and_trim() -> None:
    index = TxnIndex()
    for pid, first, marker in ((1, 0, 4), (2, 10, 14), (3, 20, 30)):
        index.on_data(pid, first)
        index.on_marker(pid, False, marker)
    assert [t.producer_id for t in index.aborted_between(5, 12)] == [2]
    assert [t.producer_id for t in index.aborted_between(0, 100)] == [1, 2, 3]
    assert index.aborted_between(31, 40) == []
    index.on_marker(3, False, 30)  # a replay of the same marker adds nothing
    assert len(index.aborted_between(0, 100)) == 3
    index.trim(15)
    assert [t.producer_id for t in index.aborted_between(0, 100)] == [3]


def test_a_marker_without_data_changes_nothing_but_the_producer() -> None:
    index = TxnIndex()
    index.on_marker(5, False, 0)
    assert index.aborted_between(0, 10) == [] and index.last_stable_offset(3) == 3
