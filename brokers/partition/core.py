"""``PartitionCore``: one partition replica's decisions, as a pure state machine.

The core owns the replica's leadership (as the metadata image last said), its replication
state (``ReplicaState``: follower positions, ISR, pending ISR, high watermark) and its
idempotent-producer table (``ProducerStateTable``).  It has no lock, thread, clock or disk:
times come in as ``now_ms``, log facts (``LogEnds``: log start and LEO; the leader-epoch
entries ``[(epoch, start_offset), ...]``) come in as values, and decisions come out as the
typed values of ``messages.py``.  Refusals are raised as typed ``SparkLogError``s, and a call
that raises changes nothing.  The shell (``partition.Partition``) holds the lock, the
``PartitionLog``, the clock and the waiters, and calls the core under its lock.

What it decides:

- high watermark: ``min(LEO of every ISR member)`` (``ReplicaState``), capped by this
  replica's LEO; the last stable offset is the first offset of the oldest open transaction (``txn_index.py``), capped by the HW
  (``last_stable_offset``, the one place to change then);
- produce (``decide_produce``): leadership, epoch fencing of the producer's
  ``current_leader_epoch``, ``min.insync.replicas`` for acks=all, then the producer-sequence
  rule (append / duplicate with the original offsets / gap to wait for / fenced /
  out of order: ``producer_state.py``); ``on_leader_append`` records what was appended and
  advances the high watermark; ``replicated`` says whether an acks=all wait is over;
- follower fetches at the leader (``on_follower_fetch``): epoch fencing, membership,
  divergence (``divergence.leader_check``), the follower's progress, whether the high
  watermark grew and whether the follower may rejoin the ISR;
- following (``fetch_position``, ``follows``, ``truncation_offset`` (KIP-595),
  ``on_follower_append``, ``on_truncated``, ``on_leader_high_watermark``);
- a client's leader epoch (``check_client_leader_epoch``: ListOffsets and consumer fetches,
  KIP-320): older than the replica's is ``FencedLeaderEpochError``, newer is
  ``UnknownLeaderEpochError``, -1 is not checked;
- ISR changes (``isr_change``): shrink candidates (not caught up within
  ``replica.lag.time.max.ms``) and expand candidates (caught up to the HW and the epoch's
  start), with the expansion counted in the HW from the request until the metadata image
  settles it (a new partition epoch), whatever the answer said.

Thread-safety: none; one caller at a time (the shell's lock).
"""
from __future__ import annotations

from typing import Iterable, Sequence

from spark_log.errors import (
    FencedEpochError,
    FencedLeaderEpochError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from spark_log.frame import FrameHeader

from .divergence import epoch_of_last_record, follower_truncation_offset, leader_check
from .messages import (
    APPEND,
    NO_LEADERSHIP,
    SEQUENCE_GAP,
    Diverging,
    Duplicate,
    FetchPosition,
    FollowerFetch,
    FollowerFetchDecision,
    IsrChange,
    LeaderAndIsr,
    Leadership,
    LogEnds,
    PartitionOffsets,
    ProduceDecision,
    Isolation,
)
from .producer_state import PRODUCER_ID_EXPIRATION_MS, ProducerRun, ProducerStateTable, Verdict
from .replica_state import ReplicaState, ReplicaView
from .txn_index import AbortedTxn, TxnIndex

__all__ = ["PartitionCore"]

EpochEntries = Sequence[tuple[int, int]]


def check_client_leader_epoch(name: str, requested: int, current: int) -> None:
    """A client's request (ListOffsets, a consumer fetch) names the leader epoch its
    metadata holds (``requested``; < 0: not checked, old clients and tools).  Kafka's rule
    (KIP-320): an older epoch than this replica's (``current``) is ``FencedLeaderEpochError``
    (the client's metadata is stale: it refreshes and asks again); a newer one is
    ``UnknownLeaderEpochError`` (this broker's metadata is behind, or it is a deposed leader
    cut off from the controller: the client asks elsewhere).  Both retriable."""
    if requested < 0 or requested == current:
        return
    if requested < current:
        raise FencedLeaderEpochError(f"{name}: the request's leader epoch {requested} is older than this "
                                     f"broker's ({current}); refresh metadata", leader_epoch=current)
    raise UnknownLeaderEpochError(f"{name}: this broker knows leader epoch {current}, the request names "
                                  f"{requested}: its metadata is behind", leader_epoch=current)


class PartitionCore:
    """One replica's decisions (module docstring).  ``name`` ("topic-partition") only
    appears in error messages; ``broker_id`` is this broker."""

    def __init__(self, *, name: str, broker_id: int) -> None:
        self.name = name
        self.broker_id = broker_id
        self.leadership: Leadership = NO_LEADERSHIP
        self.removed = False
        self._replica = ReplicaState(broker_id=broker_id)
        self._producers = ProducerStateTable()
        self._txns = TxnIndex()

    # -- leadership ------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leadership.is_leader

    @property
    def leader_epoch(self) -> int:
        return self.leadership.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return self._replica.isr

    def become(self, state: LeaderAndIsr, log: LogEnds, now_ms: int) -> None:
        """Apply the metadata image's view: lead when ``state.leader_id`` is this broker,
        else follow (a new leader epoch forgets the followers' positions)."""
        is_leader = state.leader_id == self.broker_id
        self.leadership = Leadership(state.leader_id, state.leader_epoch, is_leader)
        if is_leader:
            self._replica.become_leader(leader_epoch=state.leader_epoch, partition_epoch=state.partition_epoch,
                                        replicas=state.replicas, isr=state.isr, log_end_offset=log.log_end_offset,
                                        log_start_offset=log.log_start_offset, now_ms=now_ms)
        else:
            self._replica.become_follower(leader_epoch=state.leader_epoch, partition_epoch=state.partition_epoch,
                                          replicas=state.replicas, isr=state.isr, log_end_offset=log.log_end_offset)

    def close(self) -> None:
        """The replica was closed or deleted: it leads nothing and refuses requests."""
        self.removed = True
        self.leadership = Leadership(self.leadership.leader_id, self.leadership.leader_epoch, False)

    def check_open(self) -> None:
        """``UnknownTopicOrPartitionError`` (retriable) once closed: a request still holding
        the replica asks again and finds the new one."""
        if self.removed:
            raise UnknownTopicOrPartitionError(f"{self.name} was just removed from this broker")

    def _check_leader(self) -> None:
        self.check_open()
        if not self.leadership.is_leader:
            raise NotLeaderError(f"this broker no longer leads {self.name}")

    # -- offsets ---------------------------------------------------------------------------

    def high_watermark(self, log_end_offset: int) -> int:
        return min(self._replica.high_watermark, log_end_offset)

    def last_stable_offset(self, log_end_offset: int) -> int:
        """The first offset of the oldest open transaction, capped by the high watermark."""
        return self._txns.last_stable_offset(self.high_watermark(log_end_offset))

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with records in ``[start, end)`` (a read_committed fetch)."""
        return self._txns.aborted_between(start, end)

    def in_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether ``producer_id`` has a transaction open here in ``producer_epoch`` (its
        writes need no verification with the coordinator: KIP-890)."""
        known = self._producers.last_sequence(producer_id)
        return self._txns.is_open(producer_id) and known is not None and known[0] == producer_epoch

    def offsets(self, log: LogEnds) -> PartitionOffsets:
        return PartitionOffsets(log.log_start_offset, self.high_watermark(log.log_end_offset),
                                self.last_stable_offset(log.log_end_offset), log.log_end_offset)

    def listable_offsets(self, log: LogEnds) -> PartitionOffsets:
        """The offsets a client may be told (ListOffsets: "latest" is the high watermark).
        A leader whose high watermark has not reached the start of its leader epoch (its
        LEO when it was elected) raises ``OffsetNotAvailableError`` (retriable; Kafka's
        KIP-207): until every ISR member fetched in the new epoch its high watermark is
        the one it knew as a follower, which may be below offsets the previous leader
        already acknowledged, so "latest" would go backwards and hide acknowledged records."""
        offsets = self.offsets(log)
        start = self._replica.leader_epoch_start_offset
        if self.leadership.is_leader and offsets.high_watermark < start:
            raise OffsetNotAvailableError(
                f"{self.name}: the leader of epoch {self.leadership.leader_epoch} has not caught its high watermark "
                f"({offsets.high_watermark}) up with the start of its epoch ({start}) yet")
        return offsets

    def read_bound(self, isolation: Isolation, log_end_offset: int, max_offset: int | None) -> int:
        """The offset a consumer read stops before: the HW (read_uncommitted) or the LSO
        (read_committed), and ``max_offset`` when given."""
        bound = (self.high_watermark(log_end_offset) if isolation is Isolation.READ_UNCOMMITTED
                 else self.last_stable_offset(log_end_offset))
        return bound if max_offset is None else min(bound, max_offset)

    # -- produce ---------------------------------------------------------------------------

    def decide_produce(self, run: ProducerRun, *, required_leader_epoch: int = -1,
                       min_insync_replicas: int | None = None) -> ProduceDecision:
        """Whether to append a producer's entry.  Raises ``UnknownTopicOrPartitionError``
        (removed), ``NotLeaderError`` (not leading, or a ``required_leader_epoch`` >= 0 this
        broker has not seen), ``FencedEpochError`` (a lower one; or a fenced producer
        epoch), ``NotEnoughReplicasError`` (acks=all: pass ``min_insync_replicas``; the ISR
        is smaller), ``OutOfOrderSequenceError`` / ``DuplicateSequenceError`` (sequences)."""
        self._check_leader()
        current = self.leadership.leader_epoch
        if required_leader_epoch >= 0 and required_leader_epoch != current:
            if required_leader_epoch < current:
                raise FencedEpochError(f"leader epoch {required_leader_epoch} is stale; current is {current}")
            raise NotLeaderError(f"this broker has not seen leader epoch {required_leader_epoch} yet")
        if min_insync_replicas is not None and len(self._replica.isr) < min_insync_replicas:
            raise NotEnoughReplicasError(
                f"{self.name} has {len(self._replica.isr)} in-sync replicas; min.insync.replicas={min_insync_replicas} "
                f"(acks=all refused)")
        check = self._producers.check(run.producer_id, run.producer_epoch, run.first_sequence, run.record_count)
        if check.verdict is Verdict.GAP:
            return SEQUENCE_GAP
        if check.verdict is Verdict.DUPLICATE:
            return Duplicate(check.first_offset, check.last_offset)
        return APPEND

    def sequence_gap_error(self, run: ProducerRun) -> OutOfOrderSequenceError:
        """The error for a gap that did not close in time."""
        known = self._producers.last_sequence(run.producer_id)
        return OutOfOrderSequenceError(
            f"producer {run.producer_id} epoch {run.producer_epoch}: sequence {run.first_sequence} arrived but "
            + (f"the last appended is {known[1]} in epoch {known[0]}" if known else "nothing was appended yet"))

    def on_leader_append(self, run: ProducerRun, headers: Sequence[FrameHeader], first_offset: int,
                         log_end_offset: int, now_wall_ms: int = -1) -> bool:
        """The entry ``decide_produce`` allowed was appended at ``first_offset`` (at wall time
        ``now_wall_ms``); the log now ends at ``log_end_offset``.  Records its sequences; True
        when the HW grew (RF=1)."""
        if run.producer_id >= 0:
            offset = first_offset
            for header in headers:
                self._producers.record(run.producer_id, run.producer_epoch, header.base_sequence, header.record_count,
                                       offset, max(header.max_timestamp, now_wall_ms))
                offset += header.record_count
            if headers[0].is_transactional:
                self._txns.on_data(run.producer_id, first_offset)
        return self._replica.maybe_advance(log_end_offset)

    def check_marker(self, producer_id: int, producer_epoch: int) -> None:
        """Whether this leader takes a marker of ``producer_id`` in ``producer_epoch``:
        ``FencedEpochError`` when the producer already wrote in a later epoch (a marker
        from a coordinator that lost its place), or when the producer has a transaction
        open here in ``producer_epoch`` or later.  A marker is written in the epoch after
        the data it closes (``MarkerSender``), so such a marker closed an earlier
        transaction: a late copy of it (a deposed coordinator's resend) must not end the
        open one, whose records would then be read as committed and never enter the
        aborted index.  A copy arriving when nothing is open finds nothing to end."""
        self._check_leader()
        known = self._producers.last_sequence(producer_id)
        if known is not None and producer_epoch < known[0]:
            raise FencedEpochError(f"{self.name}: marker of producer {producer_id} in epoch {producer_epoch} is "
                                   f"stale; the producer wrote in epoch {known[0]}")
        if known is not None and producer_epoch <= known[0] and self._txns.is_open(producer_id):
            raise FencedEpochError(f"{self.name}: marker of producer {producer_id} in epoch {producer_epoch} is "
                                   f"stale; its transaction open here was written in epoch {known[0]}")

    def on_leader_marker(self, producer_id: int, producer_epoch: int, commit: bool, offset: int,
                         log_end_offset: int) -> bool:
        """A marker was appended at ``offset``: the transaction is decided and the producer
        moves to ``producer_epoch`` (a late write of an older epoch is fenced).  True when
        the HW grew."""
        self._producers.bump(producer_id, producer_epoch)
        self._txns.on_marker(producer_id, commit, offset)
        return self._replica.maybe_advance(log_end_offset)

    def replicated(self, offset: int, leader_epoch: int, log_end_offset: int,
                   min_insync_replicas: int | None = None) -> bool:
        """acks=all: whether the HW passed ``offset``.  ``NotLeaderError`` once this broker
        no longer leads in ``leader_epoch`` (or was removed): never acknowledged then.
        With ``min_insync_replicas``: ``NotEnoughReplicasAfterAppendError`` when the HW
        passed it with fewer in-sync replicas than that (Kafka's check when an acks=all
        produce completes): the ISR checked at the append may have shrunk since, and the HW
        then moves with the members left, so the record may be on fewer replicas than asked."""
        if not self.leadership.is_leader or self.leadership.leader_epoch != leader_epoch or self.removed:
            raise NotLeaderError(f"{self.name}: leadership changed before offset {offset} was replicated; "
                                 "it was not acknowledged")
        if self.high_watermark(log_end_offset) <= offset:
            return False
        if min_insync_replicas is not None and (members := len(self._replica.maximal_isr)) < min_insync_replicas:
            raise NotEnoughReplicasAfterAppendError(
                f"{self.name}: offset {offset} was appended, but the ISR shrank to {members} replica(s) before it was "
                f"replicated (min.insync.replicas={min_insync_replicas}): not acknowledged")
        return True

    # -- replication: the leader's side ----------------------------------------------------

    def on_follower_fetch(self, fetch: FollowerFetch, log: LogEnds, epoch_entries: EpochEntries,
                          now_ms: int) -> FollowerFetchDecision:
        """Count a follower's fetch (module docstring).  Raises ``NotLeaderError`` (not
        leading, an epoch not seen yet, not a replica), ``FencedEpochError`` (the follower's
        epoch is stale), ``OffsetOutOfRangeError`` (below the log start)."""
        if not self.leadership.is_leader:
            raise NotLeaderError(f"this broker no longer leads {self.name}")
        current = self.leadership.leader_epoch
        if fetch.current_leader_epoch >= 0 and fetch.current_leader_epoch != current:
            if fetch.current_leader_epoch < current:
                raise FencedEpochError(f"follower's leader epoch {fetch.current_leader_epoch} is stale; "
                                       f"the current one is {current}")
            raise NotLeaderError(f"this broker has not seen leader epoch {fetch.current_leader_epoch} of {self.name}")
        state = self._replica
        if fetch.replica_id not in state.replicas:
            raise NotLeaderError(f"broker {fetch.replica_id} is not a replica of {self.name}")
        start, end = log.log_start_offset, log.log_end_offset
        diverging = leader_check(epoch_entries, log_start_offset=start, log_end_offset=end,
                                 fetch_offset=fetch.fetch_offset, last_fetched_epoch=fetch.last_fetched_epoch)
        if diverging is not None:
            return FollowerFetchDecision(Diverging(*diverging), self.high_watermark(end))
        if fetch.fetch_offset < start:
            raise OffsetOutOfRangeError(f"fetch offset {fetch.fetch_offset} is below the log start {start}",
                                        log_start_offset=start)
        grew = state.on_follower_fetch(fetch.replica_id, fetch_offset=fetch.fetch_offset, log_end_offset=end,
                                       now_ms=now_ms)
        replica = fetch.replica_id
        expand = replica not in state.isr and replica not in state.pending_isr and replica in state.expandable()
        return FollowerFetchDecision(None, self.high_watermark(end), grew, expand)

    def settle_token(self, offsets: PartitionOffsets) -> tuple[object, ...]:
        """Every fact besides the request that ``on_follower_fetch`` and the answer's offsets
        depend on: leadership, removal, partition epoch, replicas, ISR (pending too) and
        ``offsets`` (log start, HW, LSO, LEO; the epoch entries change only with the LEO,
        the log start or the leadership).  The same request of a follower that was caught up
        (no divergence, no expansion) against an equal token decides the same, with only the
        follower's fetch times moving (``on_settled_follower_fetch``)."""
        state = self._replica
        return (self.leadership, self.removed, state.partition_epoch, state.replicas, state.isr, state.pending_isr,
                offsets)

    def on_settled_follower_fetch(self, replica_id: int, now_ms: int) -> None:
        """``on_follower_fetch`` of a settled fetch (``settle_token``): the follower is caught
        up now; the HW cannot grow and nothing else changes."""
        self._replica.on_settled_fetch(replica_id, now_ms=now_ms)

    # -- replication: the follower's side --------------------------------------------------

    def fetch_position(self, leader_id: int, log: LogEnds, epoch_entries: EpochEntries) -> FetchPosition | None:
        """What to fetch from ``leader_id``, or None when this replica does not follow it."""
        if self.leadership.is_leader or self.leadership.leader_id != leader_id or self.removed:
            return None
        leo = log.log_end_offset
        return FetchPosition(leo, self.leadership.leader_epoch, epoch_of_last_record(epoch_entries, leo),
                             log.log_start_offset)

    def follows(self, leader_id: int, leader_epoch: int) -> bool:
        """Whether an answer from ``leader_id`` to a fetch built in ``leader_epoch`` still
        applies (a leadership change in between discards it)."""
        lead = self.leadership
        return not lead.is_leader and not self.removed and lead.leader_id == leader_id and lead.leader_epoch == leader_epoch

    @staticmethod
    def truncation_offset(diverging: Diverging, log_end_offset: int, epoch_entries: EpochEntries) -> int:
        """Where to truncate on the leader's diverging hint (KIP-595's rule)."""
        return follower_truncation_offset(epoch_entries, log_end_offset, (diverging.epoch, diverging.end_offset))

    def on_truncated(self, log_end_offset: int) -> None:
        """The log was truncated to ``log_end_offset``: the HW is capped and the producer
        state forgotten (the caller replays the log into ``record_frames``)."""
        self._replica.high_watermark = min(self._replica.high_watermark, log_end_offset)
        self._producers = ProducerStateTable()
        self._txns.clear()

    def record_frames(self, headers: Iterable[FrameHeader], markers: dict[int, bool] | None = None,
                      seen_wall_ms: int = -1) -> None:
        """Frames in the log as stamped (a follower's append, or a replay of the log in
        offset order): the producer state and the open and aborted transactions follow
        them.  ``markers`` maps the base offset of each transaction marker among them to
        commit (True) or abort.  A frame's sequences cover its whole offset range
        (``span``), also when compaction removed some or all of its records (a version-2
        frame keeps its producer fields).  A producer's last activity is the later of its
        records' timestamps and ``seen_wall_ms`` (a follower's append time; a replay has no
        append time and uses the timestamps, as Kafka's reload does)."""
        producers, txns = self._producers, self._txns
        for header in headers:
            if header.is_transactional and header.producer_id >= 0:
                if header.is_control:
                    commit = (markers or {}).get(header.base_offset)
                    if commit is not None:
                        producers.bump(header.producer_id, header.producer_epoch)
                        txns.on_marker(header.producer_id, commit, header.base_offset)
                    continue
                if header.record_count:
                    txns.on_data(header.producer_id, header.base_offset)
            producers.record(header.producer_id, header.producer_epoch, header.base_sequence, header.span,
                             header.base_offset, max(header.max_timestamp, seen_wall_ms))

    def on_leader_high_watermark(self, leader_hw: int, log_end_offset: int) -> bool:
        """Follower: the leader answered with ``leader_hw``; ours is that, capped by our LEO.
        Whether ours changed."""
        return self._replica.on_leader_high_watermark(leader_hw, log_end_offset)

    # -- ISR -------------------------------------------------------------------------------

    def isr_change(self, now_ms: int, lag_ms: int) -> IsrChange | None:
        """The ISR change to request, if any: ISR followers not caught up within ``lag_ms``
        leave, caught-up followers outside it join (counted in the HW from now on, while the
        change is in flight: ``clear_pending_isr`` if the controller refuses it)."""
        state = self._replica
        if not self.leadership.is_leader or not state.is_leader:
            return None
        out = state.out_of_sync(now_ms=now_ms, lag_ms=lag_ms)
        join = state.expandable(now_ms=now_ms, lag_ms=lag_ms)
        if not out and not join:
            return None
        new_isr = tuple(r for r in state.isr if r not in out) + tuple(r for r in join if r not in state.isr)
        if join:
            state.pending_isr = tuple(sorted(set(state.isr) | set(state.pending_isr) | set(join)))
        return IsrChange(state.leader_epoch, state.partition_epoch, state.isr, new_isr, out, join)

    def clear_pending_isr(self) -> None:
        """The controller *definitely* refused the expansion (an invalid request at the
        current partition epoch: nothing of ours was applied at it): stop counting the
        joiners.  Never on an unknown outcome or a stale epoch: an earlier request may have
        been accepted, and until the image shows the ISR the controller holds, the high
        watermark must count every member it may hold (a leader elected from that ISR must
        have every acknowledged record).  A new partition epoch in the image clears it too."""
        self._replica.pending_isr = ()

    # -- describe and maintenance ----------------------------------------------------------

    def replica_view(self, log_end_offset: int, now_ms: int) -> ReplicaView:
        return self._replica.view(log_end_offset=log_end_offset, now_ms=now_ms)

    def expire_producers(self, now_wall_ms: int, max_idle_ms: int = PRODUCER_ID_EXPIRATION_MS) -> int:
        """Forget producers idle longer than ``max_idle_ms`` (not those with a transaction
        open here); returns how many."""
        return self._producers.expire(now_wall_ms, max_idle_ms, keep=self._txns.open_transactions())

    def trim_transactions(self, log_start_offset: int) -> None:
        """Forget aborted transactions below the log start (retention deleted them)."""
        self._txns.trim(log_start_offset)
