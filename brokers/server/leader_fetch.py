"""The leader's answer to follower fetches (``FetchRequest.replica_id >= 0``).

Per partition, one call to ``Partition.answer_follower_fetch`` (one lock round trip), whose
core decides:

1. the partition must be led here in the follower's ``current_leader_epoch`` (a lower
   epoch: ``FencedEpochError``; a higher one or no leadership: ``NotLeaderError``), and the
   fetching broker must be a replica;
2. divergence (``brokers.partition.divergence.leader_check``): a diverging follower gets
   ``diverging_epoch`` and no records; it truncates and fetches again;
3. otherwise ``fetch_offset`` is the follower's LEO: it is counted (and when the follower
   is caught up); a grown HW wakes acks=all producers (at once) and long polls (once the
   answer is built); a follower outside the ISR that caught up pokes the ISR updater;
4. frames from ``fetch_offset`` up to the LEO (not capped by the HW) are returned with the
   HW, LSO, log start and log end offsets.

Long poll as for consumers: the answer waits (at most ``max_wait_ms``, by the broker's
injected clock) until some partition has records, diverges or errs.  Its own HW
notifications do not end the wait (each bumps the broker's ``data_version`` by one and is
discounted); a wait that runs out with nothing new returns the answer already built (an
idle round costs one pass over the partitions, not two).  Fault hook: a leader that
``blocked`` the fetching broker refuses the whole request (``BrokerNotAvailableError``).

The answer is a list of ``FetchPart`` (``wire.py``) that ``FetchHandler`` serialises with
``encode_fetch_response``: the frames read from the log are copied once, into the answer,
not three times (into the protobuf message, out of it, into gRPC).

Thread-safety: called from gRPC threads; all partition state is the ``Partition``'s.
"""
from __future__ import annotations

from typing import Callable

from brokers.net.faults import FetchFaults
from brokers.partition import FollowerFetch, Partition
from spark_log.errors import BrokerNotAvailableError, InvalidRequestError, OffsetOutOfRangeError, SparkLogError
from spark_log.proto import broker_pb2 as pb

from .errors import to_pb
from .partition_manager import PartitionManager
from .wire import RECORDS, FetchPart

__all__ = ["LeaderFetchHandler"]

_DEFAULT_MAX_BYTES = 64 << 20
_MAX_WAIT_MS = 60_000


class LeaderFetchHandler:
    """Answers follower fetches for the partitions this broker leads (module docstring)."""

    def __init__(self, *, manager: PartitionManager, faults: FetchFaults,
                 on_expandable: Callable[[], None] = lambda: None) -> None:
        self.manager = manager
        self.faults = faults
        self._clock = manager.clock
        self._on_expandable = on_expandable

    def handle(self, request: pb.FetchRequest, *, is_active: Callable[[], bool] = lambda: True) -> list[FetchPart]:
        if request.max_wait_ms < 0 or request.max_wait_ms > _MAX_WAIT_MS:
            raise InvalidRequestError(f"max_wait_ms must be within 0..{_MAX_WAIT_MS}, got {request.max_wait_ms}")
        self.faults.refresh()
        if self.faults.blocked(request.replica_id):
            raise BrokerNotAvailableError(f"replica fetches from broker {request.replica_id} are blocked (fault hook)")
        deadline_ms = self._clock.monotonic_ms() + request.max_wait_ms
        while True:
            seen = self.manager.data_version
            response, done, notified = self._answer(request)
            remaining_ms = deadline_ms - self._clock.monotonic_ms()
            if done or remaining_ms <= 0 or not is_active():
                return response
            if self.manager.data_version == seen + notified:
                seen += notified  # only our own HW notifications moved it: nothing new to answer with
            if self.manager.wait_for_data(seen, remaining_ms / 1000) == seen and \
                    self._clock.monotonic_ms() >= deadline_ms:
                return response  # an idle wait ran out with nothing new: the answer stands (no second pass)

    def _answer(self, request: pb.FetchRequest) -> tuple[list[FetchPart], bool, int]:
        """(answer, whether to send it now, how many HW notifications it sent: each bumped the
        manager's ``data_version`` by one)."""
        response: list[FetchPart] = []
        budget = request.max_bytes or _DEFAULT_MAX_BYTES
        done = False
        grown: list[Partition] = []
        expandable = False
        for wanted in request.partitions:
            result = pb.FetchPartitionResult(topic=wanted.topic, partition=wanted.partition, high_watermark=-1,
                                             last_stable_offset=-1, log_start_offset=-1, log_end_offset=-1,
                                             next_fetch_offset=wanted.fetch_offset, preferred_read_replica=-1)
            response.append((result, RECORDS, None))
            try:
                partition = self.manager.get(wanted.topic, wanted.partition)
                limit = budget if wanted.partition_max_bytes <= 0 else min(budget, wanted.partition_max_bytes)
                answer = partition.answer_follower_fetch(
                    FollowerFetch(request.replica_id, wanted.fetch_offset, wanted.current_leader_epoch,
                                  wanted.last_fetched_epoch),
                    max_bytes=max(1, limit) if budget > 0 else 0)
            except SparkLogError as exc:
                result.error.CopyFrom(to_pb(exc))
                if isinstance(exc, OffsetOutOfRangeError) and "log_start_offset" in exc.details:
                    result.log_start_offset = int(exc.details["log_start_offset"])  # the follower starts there
                done = True
                continue
            offsets = answer.offsets
            result.high_watermark, result.last_stable_offset = offsets.high_watermark, offsets.last_stable_offset
            result.log_start_offset, result.log_end_offset = offsets.log_start_offset, offsets.log_end_offset
            if answer.diverging is not None:
                result.diverging_epoch.epoch = answer.diverging.epoch
                result.diverging_epoch.end_offset = answer.diverging.end_offset
                done = True
                continue
            if answer.hw_grew:
                grown.append(partition)
            expandable = expandable or answer.expand_candidate
            if answer.records:
                response[-1] = (result, RECORDS, answer.records)
                result.next_fetch_offset = answer.next_fetch_offset
                budget -= len(answer.records)
                done = True
        if expandable:
            self._on_expandable()
        for partition in grown:
            partition.wake_long_polls()
        return response, done, len(grown)
