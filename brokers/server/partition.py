"""``Partition``: one partition replica hosted by this broker.

It owns the replica's ``PartitionLog``, its lock, its idempotent-producer state and its
leadership as the metadata image last said (leader id and epoch).  Every log call happens
under ``self.cond`` (a ``threading.Condition`` whose ``notify_all`` also wakes produce
calls waiting for a sequence gap to close).

High watermark: ``self.replica`` (``brokers.replica.replica_state.ReplicaState``) keeps the
followers' positions, the ISR and the HW (min LEO over the ISR; RF=1: the LEO).  Followers
append with ``append_as_follower`` / ``truncate_as_follower`` (``brokers.replica.fetcher``).
``wait_for_high_watermark`` (acks=all) fails with ``NotLeaderError`` once leadership or the
leader epoch changed: a former leader never acknowledges from a follower's HW.

Append protocol (``append``): whole frames from one ``PartitionRecords`` entry, already
validated by the produce path (CRC, size, schema id).  Idempotence is decided for the entry
as a unit: its frames must share one producer id and epoch and have contiguous sequences;
either all are new (appended atomically) or all are duplicates (acknowledged with their
original offsets).  A sequence gap waits on ``cond`` up to ``gap_timeout_s`` for the
missing frames (pipelined calls may arrive out of order).

Thread-safety: every public method takes ``cond``; the object is shared by request threads.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from brokers.log.partition_log import PartitionLog, ReadResult
from spark_log.clock import Clock, SystemClock
from spark_log.config import TopicConfig
from spark_log.errors import InvalidRequestError, NotLeaderError, OutOfOrderSequenceError, UnknownTopicOrPartitionError
from spark_log.frame import FrameHeader, iter_frames

from brokers.replica.replica_state import ReplicaState, ReplicaView

from .producer_state import ProducerStateTable, Verdict

__all__ = ["Partition", "AppendOutcome", "METADATA_FILE", "read_topic_id"]

log = logging.getLogger(__name__)

METADATA_FILE = "partition.metadata"
_REBUILD_READ_BYTES = 8 << 20


def read_topic_id(directory: Path) -> str | None:
    """The topic id a partition directory belongs to, or None if it is not one of ours."""
    try:
        return str(json.loads((directory / METADATA_FILE).read_text())["topic_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    base_offset: int
    last_offset: int
    duplicate: bool
    log_start_offset: int
    high_watermark: int
    leader_epoch: int = -1  # the epoch this broker led in when it appended (or found the duplicate)


class Partition:
    """One hosted replica (see the module docstring)."""

    def __init__(self, *, topic: str, partition: int, topic_id: str, directory: Path, config: TopicConfig,
                 clock: Clock | None = None, on_append: Callable[[], None] = lambda: None, broker_id: int = -1) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.directory = directory
        self.config = config
        self.cond = threading.Condition()
        self._clock = clock or SystemClock()
        self._on_append = on_append
        self.leader_id: int | None = None
        self.leader_epoch = 0
        self.is_leader = False
        self.replica = ReplicaState(broker_id=broker_id)
        self.removed = False  # closed or deleted: requests still holding it get a retriable error
        directory.mkdir(parents=True, exist_ok=True)
        existing = read_topic_id(directory)
        if existing is None:
            (directory / METADATA_FILE).write_text(json.dumps({"topic": topic, "partition": partition, "topic_id": topic_id}))
        self.log = PartitionLog(directory, config, clock=self._clock)
        self.producers = ProducerStateTable()
        self._rebuild_producer_state()

    def _rebuild_producer_state(self) -> None:
        offset = self.log.log_start_offset
        end = self.log.log_end_offset
        while offset < end:
            result = self.log.read(offset, max_bytes=_REBUILD_READ_BYTES)
            if not len(result.data):
                break
            for _, header in iter_frames(result.data, verify=False):
                self.producers.record(header.producer_id, header.producer_epoch, header.base_sequence,
                                      header.record_count, header.base_offset, header.max_timestamp)
            offset = result.next_offset

    # -- leadership (from the metadata image) -------------------------------------------------

    def become(self, *, leader_id: int | None, leader_epoch: int, is_leader: bool, config: TopicConfig,
               replicas: tuple[int, ...] = (), isr: tuple[int, ...] = (), partition_epoch: int = -1) -> None:
        with self.cond:
            self.leader_id, self.leader_epoch, self.is_leader = leader_id, leader_epoch, is_leader
            if config != self.config:  # PartitionLog takes its config at open: reopen (a clean close is cheap)
                self.log.close()
                self.config = config
                self.log = PartitionLog(self.directory, config, clock=self._clock)
            if is_leader:
                self.replica.become_leader(leader_epoch=leader_epoch, partition_epoch=partition_epoch, replicas=replicas,
                                           isr=isr, log_end_offset=self.log.log_end_offset,
                                           log_start_offset=self.log.log_start_offset, now_ms=self._clock.monotonic_ms())
            else:
                self.replica.become_follower(leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                                             replicas=replicas, isr=isr, log_end_offset=self.log.log_end_offset)
            self.cond.notify_all()

    # -- offsets --------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return min(self.replica.high_watermark, self.log.log_end_offset)

    def offsets(self) -> tuple[int, int, int]:
        """``(log start, high watermark, log end)`` read together."""
        with self.cond:
            self._check_open()
            return self.log.log_start_offset, self.high_watermark, self.log.log_end_offset

    def replication_view(self) -> tuple[ReplicaView, int, int]:
        """``(ReplicaView, log start, high watermark)`` read together (describe); the view's
        LEO of this broker is the log's."""
        with self.cond:
            self._check_open()
            view = self.replica.view(log_end_offset=self.log.log_end_offset, now_ms=self._clock.monotonic_ms())
            return view, self.log.log_start_offset, self.high_watermark

    # -- append ---------------------------------------------------------------------------

    def append(self, frames: memoryview, headers: list[FrameHeader], *, gap_timeout_s: float,
               notify: bool = True) -> AppendOutcome:
        """Append one entry's frames as leader (see the module docstring); raises typed errors
        (``NotLeaderError`` via the caller's checks, ``FencedEpochError``,
        ``OutOfOrderSequenceError``, ``DuplicateSequenceError``, ``CorruptRecordError``,
        ``RecordTooLargeError``, ``StorageError``) and then appends nothing.  ``notify=False``
        leaves waking the long polls (``on_append``) to the caller, which appends more first."""
        first = headers[0]
        pid, epoch = first.producer_id, first.producer_epoch
        count = 0
        for header in headers:
            if header.producer_id != pid or header.producer_epoch != epoch:
                raise InvalidRequestError("frames of one partition entry must share producer id and epoch")
            if pid >= 0 and header.base_sequence != first.base_sequence + count:
                raise OutOfOrderSequenceError("frames of one partition entry must have contiguous sequences")
            count += header.record_count
        deadline = time.monotonic() + gap_timeout_s
        with self.cond:
            while True:
                self._check_leader()
                check = self.producers.check(pid, epoch, first.base_sequence, count)
                if check.verdict is not Verdict.GAP:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    known = self.producers.last_sequence(pid)
                    raise OutOfOrderSequenceError(
                        f"producer {pid} epoch {epoch}: sequence {first.base_sequence} arrived but "
                        + (f"the last appended is {known[1]} in epoch {known[0]}" if known else "nothing was appended yet")
                    )
                self.cond.wait(remaining)
            if check.verdict is Verdict.DUPLICATE:
                return AppendOutcome(check.first_offset, check.last_offset, True, self.log.log_start_offset,
                                     self.high_watermark, self.leader_epoch)
            info = self.log.append_as_leader(frames, leader_epoch=self.leader_epoch)
            self.replica.maybe_advance(self.log.log_end_offset)
            if pid >= 0:
                offset = info.first_offset
                for header in headers:
                    self.producers.record(pid, epoch, header.base_sequence, header.record_count, offset,
                                          header.max_timestamp)
                    offset += header.record_count
            self.cond.notify_all()
            outcome = AppendOutcome(info.first_offset, info.last_offset, False, self.log.log_start_offset,
                                    self.high_watermark, self.leader_epoch)
        if notify:
            self._on_append()
        return outcome

    def _check_open(self) -> None:
        if self.removed:
            raise UnknownTopicOrPartitionError(f"{self.topic}-{self.partition} was just removed from this broker")

    def _check_leader(self) -> None:
        self._check_open()
        if not self.is_leader:
            raise NotLeaderError(f"this broker no longer leads {self.topic}-{self.partition}")

    def wait_for_high_watermark(self, offset: int, timeout_s: float, *, leader_epoch: int | None = None) -> bool:
        """Block until the high watermark passes ``offset`` (acks=all); RF=1: at once.  False
        after ``timeout_s``; ``NotLeaderError`` once this broker stops leading in
        ``leader_epoch`` (default: the epoch at the call; pass ``AppendOutcome.leader_epoch``
        when other work ran between the append and the wait)."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            epoch = self.leader_epoch if leader_epoch is None else leader_epoch
            while True:
                if not self.is_leader or self.leader_epoch != epoch or self.removed:
                    raise NotLeaderError(f"{self.topic}-{self.partition}: leadership changed before offset {offset} "
                                         "was replicated; it was not acknowledged")
                if self.high_watermark > offset:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.cond.wait(remaining)

    # -- follower -------------------------------------------------------------------------

    def append_as_follower(self, frames: memoryview) -> None:
        """Append frames fetched from the leader (offsets and epochs as the leader stamped
        them); the producer state follows.  Caller holds ``cond``."""
        info = self.log.append_as_follower(frames)
        for _, header in iter_frames(frames, verify=False):
            self.producers.record(header.producer_id, header.producer_epoch, header.base_sequence,
                                  header.record_count, header.base_offset, header.max_timestamp)
        del info

    def truncate_as_follower(self, offset: int) -> None:
        """Drop records >= ``offset`` (divergence from the leader); the producer state is rebuilt.
        Caller holds ``cond``."""
        self.log.truncate_to(offset)
        self.replica.high_watermark = min(self.replica.high_watermark, self.log.log_end_offset)
        self.producers = ProducerStateTable()
        self._rebuild_producer_state()

    def notify_replication(self) -> None:
        """The HW moved: wake acks=all waiters and long polls."""
        with self.cond:
            self.cond.notify_all()
        self._on_append()

    # -- read -----------------------------------------------------------------------------

    def read(self, offset: int, *, max_bytes: int, for_consumer: bool = True,
             max_offset: int | None = None) -> tuple[ReadResult, int, int, int]:
        """Frames from ``offset`` (consumers: below the high watermark; none whose base offset
        is >= ``max_offset`` when given) and ``(result, log start, high watermark, log end)``;
        ``OffsetOutOfRangeError`` outside the log."""
        with self.cond:
            self._check_open()
            hw = self.high_watermark
            bound = hw if for_consumer else None
            if max_offset is not None:
                bound = max_offset if bound is None else min(bound, max_offset)
            result = self.log.read(offset, max_bytes=max_bytes, max_offset=bound)
            return result, self.log.log_start_offset, hw, self.log.log_end_offset

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        with self.cond:
            self._check_open()
            return self.log.offset_for_timestamp(timestamp_ms)

    def maintenance(self) -> None:
        """Roll, retention and producer-id expiry; called periodically by the manager."""
        with self.cond:
            if self.removed:
                return
            self.log.maybe_roll()
            self.log.apply_retention()
            self.producers.expire(self._clock.wall_ms(), 7 * 24 * 3600 * 1000)

    def close(self) -> None:
        with self.cond:
            self.is_leader, self.removed = False, True
            self.log.close()
            self.cond.notify_all()

    def delete(self) -> None:
        with self.cond:
            self.is_leader, self.removed = False, True
            self.log.delete()
            self.cond.notify_all()
        try:
            (self.directory / METADATA_FILE).unlink(missing_ok=True)
            self.directory.rmdir()
        except OSError:
            pass
