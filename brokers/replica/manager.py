"""``ReplicaManager``: the replication threads of one broker.

- ``on_reconciled(image)`` (called by the ``PartitionManager`` after it applied a metadata
  image, so every hosted ``Partition`` already knows its leader, epochs and ISR) assigns
  every partition this broker follows to the ``ReplicaFetcher`` of its leader, starting
  fetchers for new leaders and stopping those left with nothing to fetch;
- fetchers use gRPC, or with ``use_data_listener`` the leader's binary data listener when it
  has one (``replica_fetch_transport``; ``fetcher.py``);
- an ``IsrUpdater`` shrinks and expands the ISRs of the partitions led here (``poke`` it
  when a follower may rejoin: the leader's fetch handler does).

The leader's side of replication (answering follower fetches) is a gRPC handler
(``brokers.server.leader_fetch``); acks=all and ``min.insync.replicas`` are the partition's
(``Partition.append_as_leader``).

Lifecycle: ``start`` after the partition manager, ``stop`` before it (fetchers first, so no
follower append races the closing of a log).  Thread-safety: every method may be called
from any thread; fetcher bookkeeping is under ``_lock``.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from brokers.metadata.image import MetadataImage
from brokers.net.channels import PLAINTEXT, Channels
from brokers.net.faults import FetchFaults
from brokers.partition import Partition

from .fetcher import DataAddresses, ReplicaFetcher
from .isr import AlterPartition, AlterPartitions, IsrUpdater

__all__ = ["ReplicaManager"]

log = logging.getLogger(__name__)


class ReplicaManager:
    """Fetchers and the ISR updater of broker ``broker_id``; ``hosted()`` lists its replicas."""

    def __init__(self, *, broker_id: int, hosted: Callable[[], list[Partition]], faults: FetchFaults,
                 broker_epoch: Callable[[], int], alter_partition: AlterPartition, lag_time_max_ms: int = 10_000,
                 fetch_wait_max_ms: int = 200, channels: Channels = PLAINTEXT,
                 alter_partitions: AlterPartitions | None = None, idle_wait_max_ms: int | None = None) -> None:
        self.broker_id = broker_id
        self.channels = channels
        self._hosted = hosted
        self.faults = faults
        self.fetch_wait_max_ms = fetch_wait_max_ms
        self.idle_wait_max_ms = idle_wait_max_ms
        self.isr = IsrUpdater(broker_id=broker_id, broker_epoch=broker_epoch, partitions=self._led,
                              alter_partition=alter_partition, lag_time_max_ms=lag_time_max_ms,
                              alter_partitions=alter_partitions)
        self._lock = threading.Lock()
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._stopped = False
        self.transport = "grpc"
        self._data_peers: DataAddresses | None = None

    def use_data_listener(self, peers: DataAddresses) -> None:
        """Fetchers started from now on fetch over their leader's data listener when it has
        one (``replica_fetch_transport = "auto"``), gRPC otherwise.  Before ``start``."""
        self.transport = "auto"
        self._data_peers = peers

    def start(self) -> None:
        self.isr.start()

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop every fetcher (their calls are cancelled at once) and the ISR updater; the
        threads are joined within ``timeout_s`` in all."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            self._stopped = True
            fetchers, self._fetchers = list(self._fetchers.values()), {}
        for fetcher in fetchers:
            fetcher.stop(join=False)
        for fetcher in fetchers:
            fetcher.join(deadline - time.monotonic())
        self.isr.stop(max(0.0, deadline - time.monotonic()))

    def _led(self) -> list[Partition]:
        return [p for p in self._hosted() if p.is_leader]

    def on_reconciled(self, image: MetadataImage) -> None:
        wanted: dict[int, dict[tuple[str, int], Partition]] = {}
        for partition in self._hosted():
            lead = partition.leadership
            if lead.is_leader or lead.leader_id is None or lead.leader_id == self.broker_id:
                continue
            wanted.setdefault(lead.leader_id, {})[(partition.topic, partition.partition)] = partition
        stale: list[ReplicaFetcher] = []
        with self._lock:
            if self._stopped:
                return
            for leader_id, running in list(self._fetchers.items()):
                address = image.broker_address(leader_id)
                if leader_id not in wanted or address != running.address:
                    stale.append(self._fetchers.pop(leader_id))
            for leader_id, partitions in wanted.items():
                fetcher = self._fetchers.get(leader_id)
                if fetcher is None:
                    address = image.broker_address(leader_id)
                    if address is None:
                        continue
                    fetcher = ReplicaFetcher(broker_id=self.broker_id, leader_id=leader_id, address=address,
                                             faults=self.faults, fetch_wait_max_ms=self.fetch_wait_max_ms,
                                             channels=self.channels, idle_wait_max_ms=self.idle_wait_max_ms,
                                             transport=self.transport, data_peers=self._data_peers)
                    self._fetchers[leader_id] = fetcher
                    fetcher.start()
                fetcher.set_partitions(partitions)
        for fetcher in stale:
            fetcher.stop(join=False)  # never hold up the reconcile thread on a dead leader
