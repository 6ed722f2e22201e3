"""``TieredPartition``: the tiering part of ``Partition`` (a mixin: the same object, lock and
state; split off to keep ``partition.py`` small).  The contract is ``tiering.py``'s.

- ``tier_status()``: the tier as this replica knows it plus the offsets the tiering job
  needs (log start, LSO, and ``tierable_end``: closed segments below the LSO end there).
- ``record_tiered(start, end)``: leader only; appends the TIERED frame (the caller waits for
  the high watermark, as an acks=all produce).
- ``_note_tier``: tier frames from the replay and the follower's appends.
- ``_tiered_retention``: ``maintenance``'s local retention of a tiered topic.

Thread-safety: as ``Partition``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from brokers.log.partition_log import PartitionLog
from spark_log.clock import Clock
from spark_log.config import TopicConfig
from spark_log.errors import NotLeaderError, TierOffsetInvalidError, TieringNotEnabledError
from spark_log.frame import iter_frames
from brokers.log.append import check_frames

from .core import PartitionCore
from .messages import AppendOutcome, LogEnds, PartitionOffsets
from .producer_state import ProducerRun
from .tiering import TierState, read_tier_frame, tier_frame, tier_range_error

__all__ = ["TierStatus", "TieredPartition"]


@dataclass(frozen=True, slots=True)
class TierStatus:
    remote_storage_enable: bool
    tier_start: int        # the committed tier frame's range; 0, 0: nothing tiered
    tiered_end: int
    offsets: PartitionOffsets
    tierable_end: int      # min(LSO, the active segment's base offset)
    local_bytes: int
    leader: bool
    untiered_bytes: int    # local bytes at or past tiered_end (retention.bytes counts tier + these)


class TieredPartition:
    """Tiering methods of ``Partition`` (module docstring); ``Partition`` sets the fields."""

    topic: str
    partition: int
    _cond: threading.Condition
    _core: PartitionCore
    _log: PartitionLog
    _config: TopicConfig
    _clock: Clock
    _tier: TierState
    _on_append: Callable[[], None]

    def _note_tier(self, data: bytes | memoryview) -> None:
        for position, header in iter_frames(data, verify=False):
            if header.is_control:
                found = read_tier_frame(data, header, position)
                if found is not None:
                    self._tier.note(header.base_offset, *found)

    def _tier_status(self) -> TierStatus:
        """Caller holds the lock."""
        plog = self._log
        offsets = self._core.offsets(LogEnds(plog.log_start_offset, plog.log_end_offset))
        mark = self._tier.committed(offsets.high_watermark)
        end = mark.end if mark else 0
        untiered = plog.offset_bytes(max(end, plog.log_start_offset), plog.log_end_offset)
        return TierStatus(self._config.remote_storage_enable, mark.start if mark else 0, end,
                          offsets, min(offsets.last_stable_offset, plog.active_base_offset), plog.size_bytes,
                          self._core.is_leader, untiered)

    def tier_status(self) -> TierStatus:
        with self._cond:
            self._core.check_open()
            return self._tier_status()

    def record_tiered(self, *, start: int, end: int) -> AppendOutcome | None:
        """Leader: the Delta tier durably holds ``[start, end)`` of this partition; append the
        TIERED frame (None: the latest frame says so already, nothing appended).  Raises
        ``NotLeaderError``, ``TieringNotEnabledError``, ``TierOffsetInvalidError`` (``end``
        past the last stable offset, ``start > end``, the end or start going back, or a
        range not contiguous with what is tiered: ``tiering.tier_range_error``).  The Delta
        table is not read here: the caller (``TieringHandler.commit``) checked that it holds the range."""
        with self._cond:
            core, plog = self._core, self._log
            core.check_open()
            if not core.is_leader:
                raise NotLeaderError(f"this broker no longer leads {self.topic}-{self.partition}")
            if not self._config.remote_storage_enable:
                raise TieringNotEnabledError(f"topic {self.topic!r} is not tiered: set remote.storage.enable=true")
            latest = self._tier.latest()
            if latest is not None and (latest.start, latest.end) == (start, end):
                return None
            refused = tier_range_error(latest, start=start, end=end, log_start=plog.log_start_offset,
                                       lso=core.last_stable_offset(plog.log_end_offset))
            if refused is not None:
                raise TierOffsetInvalidError(f"{self.topic}-{self.partition}: {refused}")
            data = tier_frame(start=start, end=end, timestamp_ms=self._clock.wall_ms())
            frames = check_frames(data, max_message_bytes=max(len(data), self._config.max_message_bytes),
                                  topic=self.topic)
            info = plog.append_as_leader(frames, leader_epoch=core.leader_epoch)
            core.on_leader_append(ProducerRun(-1, -1, -1, 1), (), info.first_offset, plog.log_end_offset)
            self._tier.note(info.first_offset, start, end)
            self._cond.notify_all()
            outcome = AppendOutcome(info.first_offset, info.last_offset, False, plog.log_start_offset,
                                    core.high_watermark(plog.log_end_offset), core.leader_epoch)
        self._on_append()
        return outcome

    def _tiered_retention(self) -> int:
        """Local retention of a tiered log (caller holds the lock): only below the committed
        tier frame's end (nothing is tiered: nothing goes)."""
        plog = self._log
        mark = self._tier.committed(self._core.high_watermark(plog.log_end_offset))
        if mark is None:
            return 0
        return plog.apply_tiered_retention(below=mark.end, retention_ms=self._config.effective_local_retention_ms,
                                           retention_bytes=self._config.effective_local_retention_bytes)
