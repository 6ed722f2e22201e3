"""``ReplicaManager``: replication wired into one broker.

- ``on_reconciled(image)`` (called by the ``PartitionManager`` after it applied a metadata
  image, so every hosted ``Partition`` already knows its leader, epochs and ISR) assigns
  every partition this broker follows to the ``ReplicaFetcher`` of its leader, starting
  fetchers for new leaders and stopping those left with nothing to fetch;
- ``handle_fetch`` answers follower fetches (``LeaderFetchHandler``);
- an ``IsrUpdater`` shrinks and expands the ISRs of the partitions led here;
- ``check_min_insync(partition)``: acks=all is refused with ``NotEnoughReplicasError``
  while the ISR is smaller than the topic's ``min.insync.replicas``.

Lifecycle: ``start`` after the partition manager, ``stop`` before it (fetchers first, so no
follower append races the closing of a log).  Thread-safety: every method may be called
from any thread; fetcher bookkeeping is under ``_lock``.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from brokers.metadata.image import MetadataImage
from brokers.net.faults import FetchFaults
from spark_log.clock import Clock
from spark_log.errors import NotEnoughReplicasError, SparkLogError
from spark_log.proto import broker_pb2 as pb

from .fetcher import ReplicaFetcher
from .isr import IsrUpdater
from .leader_fetch import LeaderFetchHandler

__all__ = ["ReplicaManager", "check_min_insync"]

log = logging.getLogger(__name__)


def check_min_insync(partition: Any) -> None:
    """Refuse acks=all when the ISR is below ``min.insync.replicas`` (nothing is appended)."""
    with partition.cond:
        isr, needed = len(partition.replica.isr), partition.config.min_insync_replicas
    if isr < needed:
        raise NotEnoughReplicasError(
            f"{partition.topic}-{partition.partition} has {isr} in-sync replicas; min.insync.replicas={needed} "
            f"(acks=all refused)")


class ReplicaManager:
    def __init__(self, *, broker_id: int, manager: Any, clock: Clock, broker_epoch: Callable[[], int],
                 alter_partition: Callable[..., object], to_pb: Callable[[SparkLogError], pb.Error],
                 lag_time_max_ms: int = 10_000, fetch_wait_max_ms: int = 200) -> None:
        self.broker_id = broker_id
        self.manager = manager
        self.faults = FetchFaults.from_env(broker_id)
        self.fetch_wait_max_ms = fetch_wait_max_ms
        self.isr = IsrUpdater(broker_id=broker_id, broker_epoch=broker_epoch, partitions=self._led,
                              alter_partition=alter_partition, clock=clock, lag_time_max_ms=lag_time_max_ms)
        self.leader_fetch = LeaderFetchHandler(manager=manager, clock=clock, faults=self.faults, to_pb=to_pb,
                                               on_expandable=self.isr.poke)
        self._lock = threading.Lock()
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._stopped = False

    def start(self) -> None:
        self.isr.start()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            fetchers, self._fetchers = list(self._fetchers.values()), {}
        for fetcher in fetchers:
            fetcher.stop()
        self.isr.stop()

    def _led(self) -> list:
        return [p for p in self.manager.hosted() if p.is_leader]

    def handle_fetch(self, request: pb.FetchRequest, is_active: Callable[[], bool]) -> pb.FetchResponse:
        return self.leader_fetch.handle(request, is_active=is_active)

    def on_reconciled(self, image: MetadataImage) -> None:
        wanted: dict[int, dict[tuple[str, int], Any]] = {}
        for partition in self.manager.hosted():
            leader = partition.leader_id
            if partition.is_leader or leader is None or leader == self.broker_id:
                continue
            wanted.setdefault(leader, {})[(partition.topic, partition.partition)] = partition
        stale: list[ReplicaFetcher] = []
        with self._lock:
            if self._stopped:
                return
            for leader_id, fetcher in list(self._fetchers.items()):
                address = image.broker_address(leader_id)
                if leader_id not in wanted or address != fetcher.address:
                    stale.append(self._fetchers.pop(leader_id))
            for leader_id, partitions in wanted.items():
                fetcher = self._fetchers.get(leader_id)
                if fetcher is None:
                    address = image.broker_address(leader_id)
                    if address is None:
                        continue
                    fetcher = ReplicaFetcher(broker_id=self.broker_id, leader_id=leader_id, address=address,
                                             faults=self.faults, fetch_wait_max_ms=self.fetch_wait_max_ms)
                    self._fetchers[leader_id] = fetcher
                    fetcher.start()
                fetcher.set_partitions(partitions)
        for fetcher in stale:
            fetcher.stop(join=False)  # never hold up the reconcile thread on a dead leader
