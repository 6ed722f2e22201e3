"""ListOffsets by timestamp over the Delta tier (KIP-405: a remote tier's records are found by
time too): ``TierTimestamps.first_at_or_after`` searches the range the partition's TIERED
frames say the tier holds, before the brokers' local log is searched, so a reader starting
from a time (``Consumer.offsets_for_times``, the connectors' ``startingTimestamp``) does not
skip the tiered records.

Thread-safety: called from gRPC threads; one ``TierTable`` per topic id, each used under its
own lock.
"""
from __future__ import annotations

import threading

from brokers.partition.partition import Partition
from spark_log.tier import TierTable

__all__ = ["TierTimestamps"]


class TierTimestamps:
    def __init__(self, *, location: str, storage_options: dict[str, str] | None = None) -> None:
        self.location = location
        self.storage_options = storage_options
        self._lock = threading.Lock()
        self._tables: dict[str, tuple[TierTable, threading.Lock]] = {}   # by topic id

    def first_at_or_after(self, partition: Partition, timestamp_ms: int, below: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the tier's first record of ``partition`` below ``below``
        with a timestamp at least ``timestamp_ms``; None when the topic is not tiered, the tier
        holds nothing, or no such record."""
        if not partition.config.remote_storage_enable or not self.location:
            return None
        status = partition.tier_status()
        if status.tier_start >= min(status.tiered_end, below):
            return None
        table, lock = self._table(partition.topic, partition.topic_id)
        with lock:
            return table.first_at_or_after(partition.partition, timestamp_ms, status.tier_start,
                                           min(status.tiered_end, below))

    def _table(self, topic: str, topic_id: str) -> tuple[TierTable, threading.Lock]:
        with self._lock:
            found = self._tables.get(topic_id)
            if found is None or found[0].topic != topic:
                found = self._tables[topic_id] = (TierTable(self.location, topic, topic_id, self.storage_options),
                                                  threading.Lock())
            return found
