"""ListOffsets by timestamp over the Delta tier (KIP-405: a remote tier's records are found by
time too): ``TierTimestamps.first_at_or_after`` searches the range the partition's TIERED
frames say the tier holds, before the brokers' local log is searched, so a reader starting
from a time (``Consumer.offsets_for_times``, the connectors' ``startingTimestamp``) does not
skip the tiered records.

Thread-safety: called from gRPC threads; the tables are ``tier_tables.TierTables``'.
"""
from __future__ import annotations

from brokers.partition.partition import Partition

from .tier_tables import TierTables

__all__ = ["TierTimestamps"]


class TierTimestamps:
    def __init__(self, *, location: str, storage_options: dict[str, str] | None = None) -> None:
        self.location = location
        self._tables = TierTables(location, storage_options)

    def first_at_or_after(self, partition: Partition, timestamp_ms: int, below: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the tier's first record of ``partition`` below ``below``
        with a timestamp at least ``timestamp_ms``; None when the topic is not tiered, the tier
        holds nothing, or no such record."""
        if not partition.config.remote_storage_enable or not self.location:
            return None
        status = partition.tier_status()
        if status.tier_start >= min(status.tiered_end, below):
            return None
        table, lock = self._tables.get(partition.topic, partition.topic_id)
        with lock:
            return table.first_at_or_after(partition.partition, timestamp_ms, status.tier_start,
                                           min(status.tiered_end, below))
