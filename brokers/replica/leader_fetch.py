"""The leader's answer to follower fetches (``FetchRequest.replica_id >= 0``).

Per partition, under the partition's lock:

1. the partition must be led here in the follower's ``current_leader_epoch`` (a lower
   epoch: ``FencedEpochError``; a higher one or no leadership: ``NotLeaderError``), and the
   fetching broker must be a replica;
2. divergence (``divergence.leader_check``): a diverging follower gets ``diverging_epoch``
   and no records; it truncates and fetches again;
3. otherwise ``fetch_offset`` is the follower's LEO: ``ReplicaState.on_follower_fetch``
   records it (and when the follower is caught up); a grown HW wakes acks=all producers
   and consumer long polls; a follower outside the ISR that caught up pokes the ISR updater;
4. frames from ``fetch_offset`` up to the LEO (not capped by the HW) are returned with the
   HW, log start and log end offsets.

Long poll as for consumers: the answer waits (at most ``max_wait_ms``) until some
partition has records, diverges or errs.  Fault hook: a leader that ``blocked`` the
fetching broker refuses the whole request (``BrokerNotAvailableError``).

Thread-safety: called from gRPC threads; all partition state is read under its lock.
"""
from __future__ import annotations

import time
from typing import Callable

from brokers.net.faults import FetchFaults
from spark_log.clock import Clock
from spark_log.errors import (
    BrokerNotAvailableError,
    FencedEpochError,
    InvalidRequestError,
    NotLeaderError,
    OffsetOutOfRangeError,
    SparkLogError,
)
from spark_log.proto import broker_pb2 as pb

from .divergence import leader_check

__all__ = ["LeaderFetchHandler"]

_DEFAULT_MAX_BYTES = 64 << 20
_MAX_WAIT_MS = 60_000


class LeaderFetchHandler:
    def __init__(self, *, manager, clock: Clock, faults: FetchFaults, to_pb: Callable[[SparkLogError], pb.Error],
                 on_expandable: Callable[[], None] = lambda: None) -> None:
        self.manager = manager
        self._on_expandable = on_expandable
        self.clock = clock
        self.faults = faults
        self._to_pb = to_pb

    def handle(self, request: pb.FetchRequest, *, is_active: Callable[[], bool] = lambda: True) -> pb.FetchResponse:
        if request.max_wait_ms < 0 or request.max_wait_ms > _MAX_WAIT_MS:
            raise InvalidRequestError(f"max_wait_ms must be within 0..{_MAX_WAIT_MS}, got {request.max_wait_ms}")
        self.faults.refresh()
        if self.faults.blocked(request.replica_id):
            raise BrokerNotAvailableError(f"replica fetches from broker {request.replica_id} are blocked (fault hook)")
        deadline = time.monotonic() + request.max_wait_ms / 1000
        while True:
            seen = self.manager.data_version
            response, done, notified = self._answer(request)
            remaining = deadline - time.monotonic()
            if done or remaining <= 0 or not is_active():
                return response
            if self.manager.data_version == seen + notified:
                seen += notified  # only our own HW notifications moved it: nothing new to answer with
            self.manager.wait_for_data(seen, remaining)

    def _answer(self, request: pb.FetchRequest) -> tuple[pb.FetchResponse, bool, int]:
        """(answer, whether to send it now, how many HW notifications it sent: each bumped the
        manager's ``data_version`` by one)."""
        response = pb.FetchResponse()
        budget = request.max_bytes or _DEFAULT_MAX_BYTES
        done = False
        grown = []
        for wanted in request.partitions:
            result = response.partitions.add(topic=wanted.topic, partition=wanted.partition, high_watermark=-1,
                                             last_stable_offset=-1, log_start_offset=-1, log_end_offset=-1,
                                             next_fetch_offset=wanted.fetch_offset, preferred_read_replica=-1)
            try:
                sent, stop, partition = self._one(request.replica_id, wanted, result, budget)
            except SparkLogError as exc:
                result.error.CopyFrom(self._to_pb(exc))
                done = True
                continue
            if partition is not None:
                grown.append(partition)
            budget -= sent
            done = done or stop or sent > 0
        for partition in grown:
            partition.notify_replication()
        return response, done, len(grown)

    def _one(self, replica_id: int, wanted: pb.FetchPartition, result: pb.FetchPartitionResult, budget: int):
        partition = self.manager.get(wanted.topic, wanted.partition)
        with partition.cond:
            state = partition.replica
            if not partition.is_leader:
                raise NotLeaderError(f"this broker no longer leads {wanted.topic}-{wanted.partition}")
            if wanted.current_leader_epoch >= 0 and wanted.current_leader_epoch != partition.leader_epoch:
                if wanted.current_leader_epoch < partition.leader_epoch:
                    raise FencedEpochError(f"follower's leader epoch {wanted.current_leader_epoch} is stale; "
                                           f"the current one is {partition.leader_epoch}")
                raise NotLeaderError(f"this broker has not seen leader epoch {wanted.current_leader_epoch} of "
                                     f"{wanted.topic}-{wanted.partition}")
            if replica_id not in state.replicas:
                raise NotLeaderError(f"broker {replica_id} is not a replica of {wanted.topic}-{wanted.partition}")
            log = partition.log
            start, end = log.log_start_offset, log.log_end_offset
            result.log_start_offset, result.log_end_offset = start, end
            diverging = leader_check(log.epoch_entries(), log_start_offset=start, log_end_offset=end,
                                     fetch_offset=wanted.fetch_offset, last_fetched_epoch=wanted.last_fetched_epoch)
            if diverging is not None:
                result.diverging_epoch.epoch, result.diverging_epoch.end_offset = diverging
                result.high_watermark = result.last_stable_offset = partition.high_watermark
                return 0, True, None
            if wanted.fetch_offset < start:
                raise OffsetOutOfRangeError(f"fetch offset {wanted.fetch_offset} is below the log start {start}")
            grew = state.on_follower_fetch(replica_id, fetch_offset=wanted.fetch_offset, log_end_offset=end,
                                           now_ms=self.clock.monotonic_ms())
            if replica_id not in state.isr and replica_id in state.expandable() and replica_id not in state.pending_isr:
                self._on_expandable()
            hw = partition.high_watermark
            result.high_watermark = result.last_stable_offset = hw
            if wanted.fetch_offset >= end or budget <= 0:
                return 0, False, partition if grew else None
            limit = budget if wanted.partition_max_bytes <= 0 else min(budget, wanted.partition_max_bytes)
            read = log.read(wanted.fetch_offset, max_bytes=max(1, limit))
            data = bytes(read.data)
        result.records = data
        result.next_fetch_offset = read.next_offset
        return len(data), False, partition if grew else None
