"""``Partition``: one partition replica hosted by this broker (Kafka's Partition over UnifiedLog).

The only owner of the replica's state: its ``PartitionLog``, its lock, and (through the
pure ``PartitionCore``) its leadership, high watermark and last stable offset, replica/ISR
state and idempotent-producer table.  Produce, consumer fetch, the leader's answer to
follower fetches, the follower fetcher, describe, list-offsets and the ISR updater call the
typed methods below; nothing else touches the lock, the log or the state.

The shell does IO and waiting; every decision is the core's (``core.py``), called under the
lock with the log facts of the moment (``LogEnds``, epoch entries) and the injected clock's
``monotonic_ms``.  Deadlines (a producer's sequence gap, an acks=all wait) are taken from
the injected clock too; ``Condition.wait`` gets the remaining real seconds computed from it.

Waiting and waking: ``_cond`` (a ``threading.Condition``) is notified on every append, on
leadership changes and when the HW grows, which wakes acks=all waiters and produce calls
waiting for a sequence gap.  Long polls (consumers and followers) wait on the broker's
data condition instead: ``on_append`` bumps it (``wake_long_polls``); an append with
``notify=False`` leaves that to the caller, which appends more first (one wake-up per
Produce request).

Compaction (``compacting.py``, a mixin of this class: plans, cleans, describe) shares the
same lock and state.

Thread-safety: every public method may be called from any thread; each takes the lock at
most once (a wait releases it while waiting).  ``leadership`` / ``is_leader`` /
``leader_id`` / ``leader_epoch`` / ``removed`` read a snapshot without the lock.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from brokers.log.append import CheckedFrames, check_frames
from brokers.log.epoch_lookup import UNDEFINED_EPOCH, end_offset_for_epoch
from brokers.log.partition_log import PartitionLog
from spark_log.clock import Clock, SystemClock
from spark_log.config import TopicConfig
from spark_log.errors import InvalidRequestError
from spark_log.frame import FrameHeader, encode_marker, iter_frames, marker_of

from .cleaning import Cleaning
from .compacting import CompactingPartition
from .core import PartitionCore
from .directory import METADATA_FILE, write_metadata
from .messages import (
    AppendOutcome,
    Duplicate,
    FetchedData,
    FetchPosition,
    FollowerFetch,
    FollowerFetchAnswer,
    Isolation,
    IsrChange,
    LeaderAndIsr,
    Leadership,
    LogEnds,
    PartitionOffsets,
    PartitionRead,
    ReplicationView,
    SequenceGap,
)
from .producer_state import ProducerRun
from .tiered import TieredPartition
from .tiering import TierState
from .txn_index import AbortedTxn

__all__ = ["Partition"]

log = logging.getLogger(__name__)

_REPLAY_READ_BYTES = 8 << 20


class Partition(CompactingPartition, TieredPartition):
    """One hosted replica (see the module docstring).  Opening it opens (and recovers) the
    log in ``directory`` and replays the producer state from it."""

    def __init__(self, *, topic: str, partition: int, topic_id: str, directory: Path, config: TopicConfig,
                 broker_id: int = -1, clock: Clock | None = None, on_append: Callable[[], None] = lambda: None,
                 on_compaction_work: Callable[[], None] = lambda: None) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.directory = directory
        self._config = config
        self._clock: Clock = clock or SystemClock()
        self._on_append = on_append
        self._on_compaction_work = on_compaction_work  # a committed plan waits: wake the cleaner
        self._cond = threading.Condition()
        self._core = PartitionCore(name=f"{topic}-{partition}", broker_id=broker_id)
        write_metadata(directory, topic=topic, partition=partition, topic_id=topic_id)
        self._log = PartitionLog(directory, config, clock=self._clock)
        self._cleaning = Cleaning.open(directory, log_start_offset=self._log.log_start_offset)
        self._tier = TierState()
        self._replay_producers()

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition}, {self._core.leadership})"

    # -- snapshots readable without the lock ------------------------------------------------

    @property
    def leadership(self) -> Leadership:
        return self._core.leadership

    @property
    def is_leader(self) -> bool:
        return self._core.leadership.is_leader

    @property
    def leader_id(self) -> int | None:
        return self._core.leadership.leader_id

    @property
    def leader_epoch(self) -> int:
        return self._core.leadership.leader_epoch

    @property
    def removed(self) -> bool:
        """Closed or deleted: requests still holding it get a retriable error."""
        return self._core.removed

    @property
    def config(self) -> TopicConfig:
        return self._config

    # -- leadership (from the metadata image) -----------------------------------------------

    def become(self, state: LeaderAndIsr, *, config: TopicConfig) -> None:
        """Lead or follow as ``state`` says (leader when its ``leader_id`` is this broker);
        a changed ``config`` reopens the log with it."""
        with self._cond:
            if config != self._config:  # PartitionLog takes its config at open: reopen (a clean close is cheap)
                self._log.close()
                self._config = config
                self._log = PartitionLog(self.directory, config, clock=self._clock)
            self._core.become(state, self._ends(), self._clock.monotonic_ms())
            self._cond.notify_all()

    # -- offsets ----------------------------------------------------------------------------

    def _ends(self) -> LogEnds:
        return LogEnds(self._log.log_start_offset, self._log.log_end_offset)

    @property
    def high_watermark(self) -> int:
        with self._cond:
            return self._core.high_watermark(self._log.log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        with self._cond:
            return self._core.last_stable_offset(self._log.log_end_offset)

    def offsets(self) -> PartitionOffsets:
        """Log start, HW, LSO and LEO read together; ``UnknownTopicOrPartitionError`` once removed."""
        with self._cond:
            self._core.check_open()
            return self._core.offsets(self._ends())

    def listable_offsets(self) -> PartitionOffsets:
        """``offsets()`` as a client may be told them (ListOffsets):
        ``OffsetNotAvailableError`` while a new leader's high watermark is below the start
        of its epoch (``PartitionCore.listable_offsets``)."""
        with self._cond:
            self._core.check_open()
            return self._core.listable_offsets(self._ends())

    def storage_stats(self) -> tuple[PartitionOffsets, int, int]:
        """``(offsets, log size in bytes, segment count)`` read together (metrics)."""
        with self._cond:
            self._core.check_open()
            return (self._core.offsets(self._ends()), self._log.size_bytes,
                    len(self._log.segment_base_offsets))

    def replication_view(self) -> ReplicationView:
        """The replication state and offsets, read together (describe)."""
        with self._cond:
            self._core.check_open()
            ends = self._ends()
            return ReplicationView(self._core.replica_view(ends.log_end_offset, self._clock.monotonic_ms()),
                                   self._core.offsets(ends))

    def log_size_bytes(self) -> int:
        """Bytes of this replica's log on disk (describe)."""
        with self._cond:
            self._core.check_open()
            return self._log.size_bytes

    # -- produce ----------------------------------------------------------------------------

    def append_as_leader(self, frames: CheckedFrames, *, required_leader_epoch: int = -1, acks_all: bool = False,
                         gap_timeout_ms: int = 10_000, notify: bool = True) -> AppendOutcome:
        """Append one produce entry's checked frames as leader, or acknowledge a duplicate.

        Idempotence is decided for the entry as a unit (``ProducerRun``); a sequence gap
        waits up to ``gap_timeout_ms`` (injected clock) for the missing frames, then raises
        ``OutOfOrderSequenceError``.  ``acks_all`` refuses with ``NotEnoughReplicasError``
        while the ISR is below ``min.insync.replicas``.  Other refusals: see
        ``PartitionCore.decide_produce``; ``StorageError`` from the disk.  Nothing is appended
        on any error.  ``notify=False`` leaves waking the long polls (``wake_long_polls``)
        to the caller, which appends more first."""
        headers = frames.headers
        run = ProducerRun.of(headers)
        transactional = headers[0].is_transactional
        if any(h.is_transactional != transactional for h in headers) or (transactional and run.producer_id < 0):
            raise InvalidRequestError("the frames of one entry must all be transactional (with a producer id) or none")
        min_isr = self._config.min_insync_replicas if acks_all else None
        deadline_ms = self._clock.monotonic_ms() + gap_timeout_ms
        core = self._core
        with self._cond:
            while True:
                decision = core.decide_produce(run, required_leader_epoch=required_leader_epoch,
                                               min_insync_replicas=min_isr)
                if not isinstance(decision, SequenceGap):
                    break
                remaining_ms = deadline_ms - self._clock.monotonic_ms()
                if remaining_ms <= 0:
                    raise core.sequence_gap_error(run)
                self._cond.wait(remaining_ms / 1000)
            plog = self._log
            if isinstance(decision, Duplicate):
                return AppendOutcome(decision.first_offset, decision.last_offset, True, plog.log_start_offset,
                                     core.high_watermark(plog.log_end_offset), core.leader_epoch)
            info = plog.append_as_leader(frames, leader_epoch=core.leader_epoch)
            end = plog.log_end_offset
            core.on_leader_append(run, headers, info.first_offset, end, self._clock.wall_ms())
            self._cond.notify_all()
            outcome = AppendOutcome(info.first_offset, info.last_offset, False, plog.log_start_offset,
                                    core.high_watermark(end), core.leader_epoch)
        if notify:
            self._on_append()
        return outcome

    def in_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether ``producer_id`` has a transaction open here in ``producer_epoch`` (a
        transactional write needs no verification with the coordinator then)."""
        with self._cond:
            return self._core.in_transaction(producer_id, producer_epoch)

    def append_marker(self, *, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      notify: bool = True) -> AppendOutcome:
        """Append a transaction marker as leader (the coordinator's WriteTxnMarkers): ends
        ``producer_id``'s transaction here and moves it to ``producer_epoch``.  Raises
        ``NotLeaderError`` / ``FencedEpochError`` (a stale marker) / ``StorageError``;
        the caller waits for the high watermark like an acks=all produce."""
        data = encode_marker(commit, producer_id=producer_id, producer_epoch=producer_epoch,
                             coordinator_epoch=coordinator_epoch, timestamp_ms=self._clock.wall_ms())
        frames = check_frames(data, max_message_bytes=max(len(data), self._config.max_message_bytes),
                              topic=self.topic)
        with self._cond:
            core, plog = self._core, self._log
            core.check_marker(producer_id, producer_epoch)
            info = plog.append_as_leader(frames, leader_epoch=core.leader_epoch)
            end = plog.log_end_offset
            core.on_leader_marker(producer_id, producer_epoch, commit, info.first_offset, end)
            self._cond.notify_all()
            outcome = AppendOutcome(info.first_offset, info.last_offset, False, plog.log_start_offset,
                                    core.high_watermark(end), core.leader_epoch)
        if notify:
            self._on_append()
        return outcome

    def wait_for_high_watermark(self, offset: int, timeout_ms: int, *, leader_epoch: int | None = None,
                                acks_all: bool = False) -> bool:
        """Block until the high watermark passes ``offset`` (acks=all); RF=1: at once.  False
        after ``timeout_ms`` (injected clock); ``NotLeaderError`` once this broker stops
        leading in ``leader_epoch`` (default: the epoch at the call; pass
        ``AppendOutcome.leader_epoch`` when other work ran between the append and the wait).
        ``acks_all`` (a producer's acks=all): ``NotEnoughReplicasAfterAppendError`` when the
        ISR is below ``min.insync.replicas`` once the HW passed it
        (``PartitionCore.replicated``)."""
        deadline_ms = self._clock.monotonic_ms() + timeout_ms
        min_isr = self._config.min_insync_replicas if acks_all else None
        with self._cond:
            epoch = self._core.leader_epoch if leader_epoch is None else leader_epoch
            while not self._core.replicated(offset, epoch, self._log.log_end_offset, min_isr):
                remaining_ms = deadline_ms - self._clock.monotonic_ms()
                if remaining_ms <= 0:
                    return False
                self._cond.wait(remaining_ms / 1000)
            return True

    # -- consumers ---------------------------------------------------------------------------

    def read(self, offset: int, *, max_bytes: int, max_offset: int | None = None,
             isolation: Isolation = Isolation.READ_UNCOMMITTED) -> PartitionRead:
        """Whole frames from ``offset`` below the high watermark (``READ_COMMITTED``: the last
        stable offset) and, when given, ``max_offset``, with the offsets of the moment.
        ``OffsetOutOfRangeError`` outside the log; ``UnknownTopicOrPartitionError`` once removed."""
        with self._cond:
            self._core.check_open()
            ends = self._ends()
            bound = self._core.read_bound(isolation, ends.log_end_offset, max_offset)
            result = self._log.read(offset, max_bytes=max_bytes, max_offset=bound)
            aborted: tuple[AbortedTxn, ...] = ()
            if isolation is Isolation.READ_COMMITTED and len(result.data):
                first = next(iter_frames(result.data, verify=False))[1].base_offset
                aborted = tuple(self._core.aborted_between(first, result.next_offset))
            return PartitionRead(result, self._core.offsets(ends), aborted)

    def consumer_divergence(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """KIP-320 for a consumer at ``fetch_offset`` whose last record was in
        ``last_fetched_epoch``: ``(epoch, end_offset)``, this log's largest epoch up to that
        one and where it ends, when it ends below ``fetch_offset`` (records the consumer read
        are not in this log: an unclean election replaced them); None otherwise.  An epoch
        above every epoch of this log (a new leader that has not written yet) ends at this
        log's end."""
        if last_fetched_epoch < 0:
            return None
        with self._cond:
            self._core.check_open()
            entries, log_end = self._log.epoch_entries(), self._ends().log_end_offset
        epoch, end = end_offset_for_epoch(entries, last_fetched_epoch, log_end)
        if epoch == UNDEFINED_EPOCH:
            epoch, end = (entries[-1][0] if entries else UNDEFINED_EPOCH), log_end
        return None if end >= fetch_offset else (epoch, end)

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """The base offset of the first frame whose max timestamp is >= ``timestamp_ms``."""
        with self._cond:
            self._core.check_open()
            return self._log.offset_for_timestamp(timestamp_ms)

    # -- replication: the leader's side -----------------------------------------------------

    def answer_follower_fetch(self, fetch: FollowerFetch, *, max_bytes: int) -> FollowerFetchAnswer:
        """Count a follower's fetch and read what it should get: a diverging hint, or up to
        ``max_bytes`` (<= 0: nothing) of whole frames from its ``fetch_offset`` up to the
        LEO.  A grown HW wakes acks=all waiters here; the caller wakes the long polls
        (``wake_long_polls``) once it answered.  Raises what
        ``PartitionCore.on_follower_fetch`` raises."""
        with self._cond:
            plog = self._log
            ends = self._ends()
            decision = self._core.on_follower_fetch(fetch, ends, plog.epoch_entries(), self._clock.monotonic_ms())
            if decision.hw_grew:
                self._cond.notify_all()
                self._signal_compaction()
            records: bytes | memoryview = b""
            next_offset = fetch.fetch_offset
            if decision.diverging is None and fetch.fetch_offset < ends.log_end_offset and max_bytes > 0:
                read = plog.read(fetch.fetch_offset, max_bytes=max_bytes)
                records, next_offset = read.data, read.next_offset  # a view: copied once, into the answer
            offsets = self._core.offsets(ends)
            token = None
            if decision.diverging is None and not decision.expand_candidate and \
                    fetch.fetch_offset == ends.log_end_offset:
                token = self._core.settle_token(offsets)
            return FollowerFetchAnswer(decision.diverging, records, next_offset, offsets,
                                       decision.hw_grew, decision.expand_candidate, token)

    def settled_follower_fetch(self, replica_id: int, token: tuple[object, ...]) -> bool:
        """The same fetch of ``replica_id`` as the one answered with ``token``
        (``FollowerFetchAnswer.settle_token``): True when nothing it depends on changed since
        (it is counted as a fetch now, and its answer would be the one already given); False:
        answer it in full with ``answer_follower_fetch``.  One lock round trip, no read."""
        with self._cond:
            core = self._core
            if core.settle_token(core.offsets(self._ends())) != token:
                return False
            core.on_settled_follower_fetch(replica_id, self._clock.monotonic_ms())
            return True

    def wake_long_polls(self) -> None:
        """Wake the broker's long polls (consumers, followers): the HW moved or data arrived."""
        self._on_append()

    # -- replication: the follower's side ---------------------------------------------------

    def fetch_position(self, leader_id: int) -> FetchPosition | None:
        """What to fetch from ``leader_id``; None when this replica does not follow it."""
        with self._cond:
            return self._core.fetch_position(leader_id, self._ends(), self._log.epoch_entries())

    def apply_fetched(self, leader_id: int, leader_epoch: int, fetched: FetchedData) -> None:
        """Apply the leader's answer to a fetch built in ``leader_epoch`` (discarded if this
        replica no longer follows ``leader_id`` in it): truncate on a diverging hint, else
        append the frames at or past our LEO (frames below it, when the answer starts inside
        a frame we hold, are skipped) and take the leader's HW.  Follower appends verify
        every frame (``PartitionLog.append_as_follower``).  Raises ``CorruptRecordError``,
        ``OffsetOutOfRangeError``, ``InvalidRequestError`` or ``StorageError`` (nothing
        appended)."""
        with self._cond:
            core, plog = self._core, self._log
            if not core.follows(leader_id, leader_epoch):
                return
            if fetched.diverging is not None:
                leo = plog.log_end_offset
                cut = core.truncation_offset(fetched.diverging, leo, plog.epoch_entries())
                log.info("%s-%d diverged from leader %d at epoch %d: truncating %d -> %d", self.topic, self.partition,
                         leader_id, fetched.diverging.epoch, leo, cut)
                plog.truncate_to(cut)
                core.on_truncated(plog.log_end_offset)
                self._replay_producers()
                return
            data = fetched.records
            appended: list[FrameHeader] = []
            if len(data):
                leo = plog.log_end_offset
                skip = 0
                for position, header in iter_frames(data, verify=False):
                    if not appended and header.base_offset < leo:
                        skip = position + header.frame_length
                    else:
                        appended.append(header)
                if appended:
                    plog.append_as_follower(memoryview(data)[skip:])
                    seen = self._clock.wall_ms()
                    if any(header.is_control for header in appended):
                        core.record_frames(appended, _markers(data), seen)
                        self._note_plans(data)
                        self._note_tier(memoryview(data)[skip:])
                    else:
                        core.record_frames(appended, seen_wall_ms=seen)
            if core.on_leader_high_watermark(fetched.high_watermark, plog.log_end_offset) or appended:
                self._signal_compaction()  # an idle answer (no frames, the same HW) has nothing new for it

    def start_at_leader_log_start(self, leader_id: int, leader_epoch: int, leader_log_start: int) -> None:
        """The leader answered ``OffsetOutOfRangeError``: this replica's log ends below the
        leader's log start (retention, or a tiered topic's local retention, deleted what it
        still needed).  Start over, empty, at the leader's log start (Kafka's
        ``truncateFullyAndStartAt``); a no-op unless this replica follows ``leader_id`` in
        ``leader_epoch`` and its log really ends below ``leader_log_start``."""
        with self._cond:
            core, plog = self._core, self._log
            if not core.follows(leader_id, leader_epoch) or plog.log_end_offset >= leader_log_start:
                return
            log.info("%s-%d: log ends at %d, below leader %d's log start %d: starting over there", self.topic,
                     self.partition, plog.log_end_offset, leader_id, leader_log_start)
            plog.truncate_fully_and_start_at(leader_log_start)
            core.on_truncated(plog.log_end_offset)
            self._replay_producers()

    # -- ISR ----------------------------------------------------------------------------------

    def isr_change(self, lag_ms: int) -> IsrChange | None:
        """The ISR change to request from the controller, if any (``PartitionCore.isr_change``)."""
        with self._cond:
            return self._core.isr_change(self._clock.monotonic_ms(), lag_ms)

    def clear_pending_isr(self) -> None:
        """The controller refused the expansion: stop counting the joiners in the HW."""
        with self._cond:
            self._core.clear_pending_isr()

    # -- upkeep and lifecycle ---------------------------------------------------------------

    def _replay_producers(self) -> None:
        """Rebuild the producer state and the plans the log holds from the log (open,
        truncation).  Caller holds the lock (or owns the object alone)."""
        plog = self._log
        offset, end = plog.log_start_offset, plog.log_end_offset
        self._cleaning.state.on_replay_start()
        self._tier.reset()
        while offset < end:
            result = plog.read(offset, max_bytes=_REPLAY_READ_BYTES)
            if not len(result.data):
                break
            headers = [header for _, header in iter_frames(result.data, verify=False)]
            if any(header.is_control for header in headers):
                self._core.record_frames(headers, _markers(result.data))
                self._note_plans(result.data)
                self._note_tier(result.data)
            else:
                self._core.record_frames(headers)
            offset = result.next_offset

    def maintenance(self) -> None:
        """Roll, retention and producer-id expiry; called periodically by the manager."""
        with self._cond:
            if self._core.removed:
                return
            self._log.maybe_roll()
            if self._config.remote_storage_enable:
                self._tiered_retention()   # tiered.py: only what the Delta tier holds
            else:   # only below this replica's HW (a follower's: the leader's, capped by its LEO)
                self._log.apply_retention(high_watermark=self._core.high_watermark(self._log.log_end_offset))
            self._core.trim_transactions(self._log.log_start_offset)
            self._core.expire_producers(self._clock.wall_ms())
            retired = self._log.take_retired()
        for segment in retired:  # outside the lock: closing frees the deleted files' pages
            segment.close()

    def close(self) -> None:
        """Close the log (flushed); requests still holding the replica get a retriable error."""
        with self._cond:
            self._core.close()
            self._log.close()
            self._cond.notify_all()

    def delete(self) -> None:
        """Close and delete the replica's directory."""
        with self._cond:
            self._core.close()
            self._log.delete()
            self._cond.notify_all()
        try:
            (self.directory / METADATA_FILE).unlink(missing_ok=True)
            self.directory.rmdir()
        except OSError:
            pass


def _markers(data: bytes | memoryview) -> dict[int, bool]:
    """The transaction markers among ``data``'s frames: base offset -> commit."""
    out: dict[int, bool] = {}
    for position, header in iter_frames(data, verify=False):
        if header.is_control and header.is_transactional:
            commit = marker_of(data, header, position)
            if commit is not None:
                out[header.base_offset] = commit
    return out
