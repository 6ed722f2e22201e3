"""Rebuilding a ``GroupShard`` from its ``__consumer_offsets`` partition (a new leader's first act).

``load(partition, leader_epoch, shard, now_ms)``:

1. notes the log end offset ``E`` (the new leader's log is the truth now: its tail, maybe
   appended by the previous leader and not yet replicated, stays and will be);
2. waits until the high watermark reaches ``E`` (the followers fetched in the new epoch),
   so only durable records are replayed and none is replayed that a later failover
   could take back; ``NotLeaderError`` if leadership moves meanwhile;
3. replays every frame from the log start to ``E`` through ``shard.apply``, in offset
   order, moving by each read's ``next_offset`` so it crosses the gaps a compacted log
   has.  Control frames (transaction markers) are skipped; a record it cannot decode is
   logged and skipped (only the coordinator writes this topic; produce to it is refused);
4. restarts the members' session and rebalance timers from the time the replay ended
   (``GroupShard.restart_timers``): the members could not reach a loading coordinator, so
   a load slower than a session must not expire them all at the first tick.

Returns ``E``, the offset from which this leader's own appends follow.
"""
from __future__ import annotations

import logging
from typing import Callable, Protocol

from spark_log.errors import CorruptRecordError, RequestTimeoutError
from spark_log.frame import ATTR_CONTROL, iter_frames

from brokers.partition import PartitionOffsets, PartitionRead

from .core import GroupShard
from .records import decode, from_frame

__all__ = ["load", "replay", "LoadablePartition"]

log = logging.getLogger(__name__)

_READ_BYTES = 8 << 20


class LoadablePartition(Protocol):
    """The part of ``brokers.partition.Partition`` a load reads."""

    def offsets(self) -> PartitionOffsets: ...
    def wait_for_high_watermark(self, offset: int, timeout_ms: int, *, leader_epoch: int | None = None) -> bool: ...
    def read(self, offset: int, *, max_bytes: int, max_offset: int | None = None) -> PartitionRead: ...


def load(partition: LoadablePartition, *, leader_epoch: int, shard: GroupShard, now_ms: Callable[[], int],
         wait_ms: int = 60_000, name: str = "") -> int:
    """Replay ``partition`` into ``shard`` (module docstring); returns the log end offset
    replayed to.  Raises ``NotLeaderError`` (leadership moved), ``RequestTimeoutError`` (the
    high watermark did not reach the log end within ``wait_ms``)."""
    now = now_ms()
    end = replay(partition, leader_epoch=leader_epoch, apply=lambda key, value: shard.apply(decode(key, value), now),
                 wait_ms=wait_ms, name=name)
    shard.restart_timers(now_ms())  # serving starts now, not when the load began
    return end


def replay(partition: LoadablePartition, *, leader_epoch: int, apply: Callable[[bytes, bytes | None], None],
           wait_ms: int = 60_000, name: str = "") -> int:
    """The replay of ``load`` for any coordinator whose state is keyed bytes rows of the
    bytes schema (the group and transaction coordinators): ``apply(key, value)`` per row in
    offset order; a row it refuses with ``CorruptRecordError`` is logged and skipped."""
    offsets = partition.offsets()
    end = offsets.log_end_offset
    if end > 0 and not partition.wait_for_high_watermark(end - 1, wait_ms, leader_epoch=leader_epoch):
        raise RequestTimeoutError(f"{name}: the high watermark did not reach {end} within {wait_ms} ms")
    offset = partition.offsets().log_start_offset
    applied = skipped = 0
    while offset < end:
        read = partition.read(offset, max_bytes=_READ_BYTES, max_offset=end).result
        data = read.data
        if not len(data) or read.next_offset <= offset:
            break
        for position, header in iter_frames(data, verify=True):
            if header.attributes & ATTR_CONTROL or header.next_offset <= offset:
                continue
            try:
                rows = list(from_frame(memoryview(data)[position:position + header.frame_length]))
            except CorruptRecordError as exc:
                log.error("%s: skipping frame at offset %d: %s", name, header.base_offset, exc)
                skipped += header.record_count
                continue
            for key, value in rows:
                try:
                    apply(key, value)
                except CorruptRecordError as exc:
                    log.error("%s: skipping a record of the frame at offset %d: %s", name, header.base_offset, exc)
                    skipped += 1
                    continue
                applied += 1
        offset = read.next_offset
    log.info("%s: loaded %d records up to offset %d (%d skipped)", name, applied, end, skipped)
    return end
