"""``PollBuffer``: record batches a ``Consumer`` fetched but has not returned yet.

A poll returns at most ``max_poll_records`` rows (None: everything) and nothing of a
paused partition; the rest waits here, in arrival order, and is returned first by later
polls (a batch cut at the limit keeps its tail in front).  ``first_offset(tp)`` is where
the consumer's *position* is while records of ``tp`` wait (the fetch position is further).
Thread-safety: none (the consumer's one thread).
"""
from __future__ import annotations

from collections import deque
from typing import Iterable

import pyarrow as pa

__all__ = ["PollBuffer"]

TopicPartition = tuple[str, int]


class PollBuffer:
    """Fetched batches waiting to be returned (module docstring)."""

    def __init__(self, max_records: int | None) -> None:
        self.max_records = max_records
        self._items: deque[tuple[TopicPartition, pa.RecordBatch]] = deque()

    def add(self, items: Iterable[tuple[TopicPartition, pa.RecordBatch]]) -> None:
        self._items.extend(items)

    def take(self, paused: set[TopicPartition]) -> list[pa.RecordBatch]:
        """The batches the next poll returns (module docstring)."""
        limit = self.max_records
        out: list[pa.RecordBatch] = []
        keep: deque[tuple[TopicPartition, pa.RecordBatch]] = deque()
        rows = 0
        for tp, batch in self._items:
            if tp in paused or (limit is not None and rows >= limit):
                keep.append((tp, batch))
            elif limit is not None and rows + batch.num_rows > limit:
                take = limit - rows
                out.append(batch.slice(0, take))
                keep.append((tp, batch.slice(take)))
                rows = limit
            else:
                out.append(batch)
                rows += batch.num_rows
        self._items = keep
        return out

    def first_offset(self, tp: TopicPartition) -> int | None:
        """The offset of the first waiting record of ``tp`` (None: nothing waits)."""
        for item_tp, batch in self._items:
            if item_tp == tp:
                return int(batch.column("offset")[0].as_py())
        return None

    def keep_only(self, keep: set[TopicPartition]) -> None:
        self._items = deque((tp, b) for tp, b in self._items if tp in keep)

    def drop(self, partitions: Iterable[TopicPartition]) -> None:
        gone = set(partitions)
        self._items = deque((tp, b) for tp, b in self._items if tp not in gone)
