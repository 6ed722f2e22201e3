"""The broker's ``TierTable`` per topic, each used under its own lock (a ``TierTable`` is used
by one thread at a time): shared by the Delta tier's fetches (``tier_fetch.py``) and its
timestamp lookups (``tier_offsets.py``)."""
from __future__ import annotations

import threading

from spark_log.tier import TierTable

__all__ = ["TierTables"]


class TierTables:
    def __init__(self, location: str, storage_options: dict[str, str] | None = None) -> None:
        self.location = location
        self.storage_options = storage_options
        self._lock = threading.Lock()
        self._tables: dict[str, tuple[TierTable, threading.Lock]] = {}   # by topic id

    def get(self, topic: str, topic_id: str) -> tuple[TierTable, threading.Lock]:
        """The topic's table and the lock to hold while using it."""
        with self._lock:
            found = self._tables.get(topic_id)
            if found is None or found[0].topic != topic:
                found = self._tables[topic_id] = (TierTable(self.location, topic, topic_id, self.storage_options),
                                                  threading.Lock())
            return found

    def clear(self) -> None:
        """Forget every table (the broker is closing)."""
        with self._lock:
            self._tables.clear()
