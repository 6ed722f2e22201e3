"""Transactions as one partition sees them: open transactions, the last stable offset, and
the aborted-transactions index.  Pure bookkeeping, no I/O (Kafka's ``ProducerStateManager``
ongoing transactions plus its ``.txnindex`` files).

Inputs, in log order: transactional data frames (``on_data``: a producer id and the
frame's offsets) and transaction markers (``on_marker``: producer id, commit or abort, the
marker's offset).  The first transactional frame of a producer opens its transaction at
that offset; its marker closes it.  An aborted transaction is kept as
``AbortedTxn(producer_id, first_offset, last_offset)`` (``last_offset`` is the marker's), so
a ``read_committed`` reader can drop exactly the records ``first <= offset <= last`` of that
producer (control frames are never user records anyway).

The last stable offset is the first offset of the oldest open transaction, capped by the
high watermark: everything below it is decided (committed, aborted, or not transactional).

The index lives in memory and is rebuilt by replaying the log (the partition replays every
frame at open and after a truncation, as it does for the producer state), so recovery after
a crash rebuilds it from what the log holds; ``trim`` forgets aborted transactions whose
marker fell below the log start (retention).  Kafka keeps one index file per segment to
avoid that replay; spark-log replays the log anyway for the producer state.

Thread-safety: none; the partition's lock guards it.
"""
from __future__ import annotations

import bisect
from typing import NamedTuple

__all__ = ["AbortedTxn", "TxnIndex"]


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


class TxnIndex:
    """Open transactions by producer id and the aborted ones in marker order."""

    def __init__(self) -> None:
        self._open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._aborted: list[AbortedTxn] = []  # ascending last_offset (markers come in log order)
        self._aborted_ends: list[int] = []

    def on_data(self, producer_id: int, first_offset: int) -> None:
        """A transactional data frame of ``producer_id`` starting at ``first_offset``."""
        self._open.setdefault(producer_id, first_offset)

    def on_marker(self, producer_id: int, commit: bool, offset: int) -> None:
        """A marker at ``offset`` ends ``producer_id``'s open transaction (if any)."""
        first = self._open.pop(producer_id, None)
        if not commit and first is not None:
            if self._aborted_ends and offset <= self._aborted_ends[-1]:
                return  # a replay saw it already
            self._aborted.append(AbortedTxn(producer_id, first, offset))
            self._aborted_ends.append(offset)

    def is_open(self, producer_id: int) -> bool:
        return producer_id in self._open

    def open_transactions(self) -> dict[int, int]:
        return dict(self._open)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction; None when none is open."""
        return min(self._open.values()) if self._open else None

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(first, high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions that may have records in ``[start, end)``."""
        index = bisect.bisect_left(self._aborted_ends, start)
        return [t for t in self._aborted[index:] if t.first_offset < end]

    def trim(self, log_start_offset: int) -> None:
        """Forget aborted transactions entirely below the log start."""
        index = bisect.bisect_left(self._aborted_ends, log_start_offset)
        if index:
            del self._aborted[:index]
            del self._aborted_ends[:index]

    def clear(self) -> None:
        self._open.clear()
        self._aborted.clear()
        self._aborted_ends.clear()
