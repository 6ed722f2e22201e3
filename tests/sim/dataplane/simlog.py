"""``SimLog``: one replica's partition log on a simulated disk (the data plane's ``SimDisk``).

A log is a list of ``SimFrame``s (whole frames, dense offsets from 0), as the real
``PartitionLog`` keeps them, with the contracts the ``Partition`` shell relies on:

- ``append_leader`` stamps offsets from the LEO and the leader epoch; an epoch below the
  log's latest is refused (``FencedEpochError``), as ``PartitionLog.append_as_leader``;
- ``append_follower`` takes frames as the leader stamped them; the first must start at the
  LEO (``OffsetOutOfRangeError``), an epoch below the latest is refused;
- ``truncate_to(offset)`` drops the frame holding ``offset`` and everything after (the LEO
  may end below ``offset``), durable on return;
- ``read`` returns whole frames from the one holding ``offset``, none at or past
  ``max_offset``.

Durability: ``flushed`` counts the frames an fsync made durable.  ``flush_every`` > 0 is
``flush.messages``: fsync once that many records are unflushed (1: every append).  A
process crash (``kill``) keeps everything (the page cache survives); a power loss
(``power_loss``) drops every unflushed frame, except that with ``tear_rate`` a seeded prefix
of the unflushed tail survives (the OS wrote some pages) and the frame after it is torn
(recovery drops a torn frame whole, so a torn frame is simply absent).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from brokers.log.epoch_lookup import epoch_of_last_record
from brokers.partition.messages import LogEnds
from spark_log.errors import FencedEpochError, InvalidRequestError, OffsetOutOfRangeError
from spark_log.frame import FrameHeader

__all__ = ["SimFrame", "SimLog"]


@dataclass(frozen=True, slots=True)
class SimFrame:
    """A frame: ``values`` at offsets ``base_offset..``, written in leader epoch ``epoch`` by
    producer ``pid`` (epoch ``pepoch``) from sequence ``seq`` (-1: not idempotent)."""

    base_offset: int
    epoch: int
    pid: int
    pepoch: int
    seq: int
    values: tuple[bytes, ...]

    @property
    def count(self) -> int:
        return len(self.values)

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.values)

    def header(self) -> FrameHeader:
        return FrameHeader(base_offset=self.base_offset, frame_length=100, partition_leader_epoch=self.epoch, crc=0,
                           attributes=0, producer_epoch=self.pepoch, record_count=len(self.values),
                           first_timestamp=0, max_timestamp=0, producer_id=self.pid, base_sequence=self.seq,
                           schema_id=0)


@dataclass(slots=True)
class SimLog:
    flush_every: int = 0
    frames: list[SimFrame] = field(default_factory=list)
    flushed: int = 0            # frames made durable by an fsync
    unflushed_records: int = 0
    version: int = 0            # bumped by every change that removes records (invariants re-check)
    leo: int = 0                # the log end offset (kept with the frames)
    values: list[bytes] = field(default_factory=list)   # the record at each offset

    @property
    def ends(self) -> LogEnds:
        return LogEnds(0, self.leo)

    def epoch_entries(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for frame in self.frames:
            if not out or out[-1][0] != frame.epoch:
                out.append((frame.epoch, frame.base_offset))
        return out

    @property
    def latest_epoch(self) -> int:
        return self.frames[-1].epoch if self.frames else -1

    def last_fetched_epoch(self) -> int:
        return epoch_of_last_record(self.epoch_entries(), self.leo)

    # -- writes ---------------------------------------------------------------------------------

    def append_leader(self, frames: list[SimFrame], epoch: int) -> list[SimFrame]:
        if epoch < self.latest_epoch:
            raise FencedEpochError(f"leader epoch {epoch} is below the log's latest {self.latest_epoch}")
        offset = self.leo
        stamped = []
        for frame in frames:
            stamped.append(SimFrame(offset, epoch, frame.pid, frame.pepoch, frame.seq, frame.values))
            offset += frame.count
        self._append(stamped)
        return stamped

    def append_follower(self, frames: list[SimFrame]) -> None:
        if frames[0].base_offset != self.leo:
            raise OffsetOutOfRangeError(f"follower append at {frames[0].base_offset}, log end is {self.leo}")
        if frames[0].epoch < self.latest_epoch:
            raise InvalidRequestError(f"epoch {frames[0].epoch} below the latest {self.latest_epoch}: truncate first")
        self._append(list(frames))

    def _append(self, frames: list[SimFrame]) -> None:
        self.frames.extend(frames)
        for frame in frames:
            self.values.extend(frame.values)
        self.leo = self.frames[-1].next_offset
        self.unflushed_records += sum(f.count for f in frames)
        if self.flush_every and self.unflushed_records >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        self.flushed = len(self.frames)
        self.unflushed_records = 0

    def truncate_to(self, offset: int) -> None:
        keep = 0
        while keep < len(self.frames) and self.frames[keep].next_offset <= offset:
            keep += 1
        if keep < len(self.frames):
            self._cut(keep)
        self.flushed = min(self.flushed, len(self.frames))   # durable on return

    def _cut(self, keep: int) -> None:
        del self.frames[keep:]
        self.leo = self.frames[-1].next_offset if self.frames else 0
        del self.values[self.leo:]
        self.version += 1

    # -- reads ----------------------------------------------------------------------------------

    def frame_index(self, offset: int) -> int:
        """Index of the frame holding ``offset`` (``len(frames)`` at the LEO)."""
        lo, hi = 0, len(self.frames)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.frames[mid].next_offset <= offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def read(self, offset: int, *, max_frames: int, max_offset: int | None = None) -> list[SimFrame]:
        if offset < 0 or offset > self.leo:
            raise OffsetOutOfRangeError(f"offset {offset} outside [0, {self.leo}]")
        out: list[SimFrame] = []
        for frame in self.frames[self.frame_index(offset):]:
            if len(out) >= max_frames or (max_offset is not None and frame.base_offset >= max_offset):
                break
            out.append(frame)
        return out

    def records(self) -> list[tuple[int, bytes]]:
        return list(enumerate(self.values))

    # -- faults ---------------------------------------------------------------------------------

    def power_loss(self, rng: random.Random, tear_rate: float) -> int:
        """Drop what was not flushed (a seeded prefix of it survives with ``tear_rate``);
        returns how many frames were lost."""
        unflushed = len(self.frames) - self.flushed
        keep = rng.randint(0, unflushed) if unflushed and rng.random() < tear_rate else 0
        lost = unflushed - keep
        if lost:
            self._cut(self.flushed + keep)
        self.flushed = len(self.frames)   # recovery syncs what it keeps
        self.unflushed_records = 0
        return lost
