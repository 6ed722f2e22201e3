"""``IsrUpdater``: the leader's ISR shrink and expand, through the controller (KIP-497).

Every ``check_interval_ms`` (half of ``replica.lag.time.max.ms``) and whenever a fetch
reports a follower that may rejoin (``poke``), for each partition this broker leads:

- *shrink*: ISR followers not caught up within ``replica.lag.time.max.ms`` are removed;
- *expand*: followers outside the ISR whose LEO reached the HW and the start of the
  current leader epoch are added.

With ``alter_partitions`` (the controller's batched call, isr.proto) one round asks for
every partition's change in one call per ``batch_max`` partitions, committed in one
metadata proposal: after a broker restarts under 1,000 partitions its replicas rejoin the
ISRs in a few calls instead of one controller round trip (a Raft commit) each.  Each
item's answer is handled exactly as a single call's.

The decision is the partition's (``Partition.isr_change``, made by its pure core with the
partition's injected clock); this thread only asks the controller.  While the expansion is in
  flight the HW already counts them (Kafka's "maximal ISR"), so a record acknowledged in
  that window is on the new member too.

The request is ``AlterPartition(broker_id, broker_epoch, leader_epoch, partition_epoch,
new_isr)``.  A stale leader (the controller moved leadership, or the broker's registration
was replaced) gets ``FencedEpochError``: nothing changes locally, and it cannot shrink the
ISR to itself to acknowledge acks=all writes alone.  The accepted ISR reaches the partition
through the metadata image (``Partition.become``), never from the response alone.  The
joiners of an expansion count in the HW from the request until the image shows a new
partition epoch, *whatever the answer*: an accepted expansion is committed before this
broker's image shows it, and a second request built on the old epoch (the next check, or a
retry after a timeout) is then fenced as stale; dropping the joiners on that answer lets the
HW pass records a joiner lacked while the controller already had it in the ISR, and a
preferred-leader election of that joiner can then truncate acknowledged records.  Only a
definite refusal (an invalid request at the current epoch) stops the counting
(``Partition.clear_pending_isr``).

Controller calls run on this thread, never under a partition lock.  Thread-safety:
``poke``/``stop`` from any thread.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Protocol, Sequence

from brokers.metadata.alter_isr import AlterIsr
from brokers.metadata.image import PartitionInfo
from brokers.partition import IsrChange, Partition
from spark_log.errors import FencedEpochError, InvalidRequestError, SparkLogError, UnknownTopicOrPartitionError

__all__ = ["IsrUpdater", "AlterPartition", "AlterPartitions"]

log = logging.getLogger(__name__)


class AlterPartition(Protocol):
    """The controller's AlterPartition (``ControllerClient.alter_partition``)."""

    def __call__(self, *, topic: str, partition: int, broker_id: int, broker_epoch: int, leader_epoch: int,
                 partition_epoch: int, new_isr: Sequence[int]) -> PartitionInfo: ...


class AlterPartitions(Protocol):
    """The controller's batched AlterPartition (``ControllerClient.alter_partitions``): per
    item, in order, the new state or the typed refusal; raises when the whole call failed."""

    def __call__(self, items: Sequence[AlterIsr]) -> Sequence[PartitionInfo | SparkLogError]: ...


class IsrUpdater:
    def __init__(self, *, broker_id: int, broker_epoch: Callable[[], int], partitions: Callable[[], list[Partition]],
                 alter_partition: AlterPartition, lag_time_max_ms: int,
                 alter_partitions: AlterPartitions | None = None, batch_max: int = 500) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._partitions = partitions
        self._alter = alter_partition
        self._alter_many = alter_partitions
        self.batch_max = batch_max
        self.lag_time_max_ms = lag_time_max_ms
        self.check_interval_ms = max(50, lag_time_max_ms // 2)
        self._cond = threading.Condition()
        self._poked = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=f"isr-{broker_id}", daemon=True)
        self.shrinks = 0  # ISR changes the controller accepted that removed / added replicas (metrics)
        self.expands = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop the thread (a controller call in flight fails once the node closes its
        controller client); joined for at most ``timeout_s``."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)

    def poke(self) -> None:
        with self._cond:
            self._poked = True
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._poked and not self._stopped:
                    self._cond.wait(self.check_interval_ms / 1000)
                if self._stopped:
                    return
                self._poked = False
            if self._alter_many is None:
                for partition in self._partitions():
                    try:
                        self.check(partition)
                    except Exception:  # noqa: BLE001 - the next round retries
                        log.exception("ISR check of %s-%d failed", partition.topic, partition.partition)
                continue
            try:
                self.check_all(self._partitions())
            except Exception:  # noqa: BLE001 - the next round retries
                log.exception("ISR checks failed")

    def check(self, partition: Partition) -> None:
        """One shrink/expand decision for ``partition`` (see the module docstring)."""
        change: IsrChange | None = partition.isr_change(self.lag_time_max_ms)
        if change is None:
            return
        epoch = self._broker_epoch()
        if epoch < 0:
            return
        self._log_change(partition, change)
        try:
            self._alter(topic=partition.topic, partition=partition.partition, broker_id=self.broker_id,
                        broker_epoch=epoch, leader_epoch=change.leader_epoch,
                        partition_epoch=change.partition_epoch, new_isr=change.new_isr)
        except SparkLogError as exc:
            self._settle(partition, change, exc)
        else:
            self._settle(partition, change, None)

    def check_all(self, partitions: Sequence[Partition]) -> None:
        """The decisions of every partition in ``partitions``, asked of the controller in
        batches of ``batch_max`` (``alter_partitions``: one metadata proposal per batch);
        each answer is handled as ``check`` handles its one."""
        assert self._alter_many is not None
        changes: list[tuple[Partition, IsrChange]] = []
        for partition in partitions:
            change = partition.isr_change(self.lag_time_max_ms)
            if change is not None:
                changes.append((partition, change))
        if not changes:
            return
        epoch = self._broker_epoch()
        if epoch < 0:
            return
        for start in range(0, len(changes), self.batch_max):
            batch = changes[start:start + self.batch_max]
            for partition, change in batch:
                self._log_change(partition, change)
            items = [AlterIsr(broker_id=self.broker_id, broker_epoch=epoch, topic=p.topic, partition=p.partition,
                              leader_epoch=c.leader_epoch, partition_epoch=c.partition_epoch, new_isr=tuple(c.new_isr))
                     for p, c in batch]
            try:
                outcomes: Sequence[object] = self._alter_many(items)
            except SparkLogError as exc:
                outcomes = [exc] * len(batch)
            for (partition, change), outcome in zip(batch, outcomes):
                self._settle(partition, change, outcome if isinstance(outcome, SparkLogError) else None)

    def _log_change(self, partition: Partition, change: IsrChange) -> None:
        log.info("%s-%d: ISR %s -> %s (out of sync %s, caught up %s)", partition.topic, partition.partition,
                 list(change.isr), list(change.new_isr), list(change.out_of_sync), list(change.caught_up))

    def _settle(self, partition: Partition, change: IsrChange, error: SparkLogError | None) -> None:
        """The controller's answer to one ISR change: None (accepted) or the error."""
        name = f"{partition.topic}-{partition.partition}"
        if error is None:
            if change.out_of_sync:
                self.shrinks += 1  # only this thread writes them
            if change.caught_up:
                self.expands += 1
        elif isinstance(error, (InvalidRequestError, UnknownTopicOrPartitionError)):
            # refused at the partition epoch it was built on: nothing of ours was applied
            # at that epoch (an accepted earlier request would make this one stale instead)
            log.warning("ISR change of %s refused: %s", name, error)
            partition.clear_pending_isr()
        elif isinstance(error, FencedEpochError):
            # stale epochs: the controller moved on, maybe through our own earlier request
            # (an expansion it accepted): the joiners stay counted until the image settles it
            log.info("ISR change of %s fenced: %s", name, error)
        else:
            # unknown outcome (timeout, controller unreachable or moving): it may have been
            # applied; keep counting the joiners and ask again at the next check
            log.warning("ISR change of %s failed: %s", name, error)
