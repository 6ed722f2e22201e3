"""``IsrUpdater``: the leader's ISR shrink and expand, through the controller (KIP-497).

Every ``check_interval_ms`` (half of ``replica.lag.time.max.ms``) and whenever a fetch
reports a follower that may rejoin (``poke``), for each partition this broker leads:

- *shrink*: ISR followers not caught up within ``replica.lag.time.max.ms``
  (``ReplicaState.out_of_sync``) are removed;
- *expand*: followers outside the ISR whose LEO reached the HW and the start of the
  current leader epoch (``ReplicaState.expandable``) are added.  While the expansion is in
  flight the HW already counts them (Kafka's "maximal ISR"), so a record acknowledged in
  that window is on the new member too.

The request is ``AlterPartition(broker_id, broker_epoch, leader_epoch, partition_epoch,
new_isr)``.  A stale leader (the controller moved leadership, or the broker's registration
was replaced) gets ``FencedEpochError``: nothing changes locally, and it cannot shrink the
ISR to itself to acknowledge acks=all writes alone.  The accepted ISR reaches the partition
through the metadata image (``Partition.become``), never from the response alone.

Controller calls run on this thread, never under a partition lock.  Thread-safety:
``poke``/``stop`` from any thread.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

from spark_log.clock import Clock
from spark_log.errors import FencedEpochError, SparkLogError

__all__ = ["IsrUpdater"]

log = logging.getLogger(__name__)


class IsrUpdater:
    def __init__(self, *, broker_id: int, broker_epoch: Callable[[], int], partitions: Callable[[], list],
                 alter_partition: Callable[..., object], clock: Clock, lag_time_max_ms: int) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._partitions = partitions
        self._alter = alter_partition
        self._clock = clock
        self.lag_time_max_ms = lag_time_max_ms
        self.check_interval_ms = max(50, lag_time_max_ms // 2)
        self._cond = threading.Condition()
        self._poked = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=f"isr-{broker_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(timeout=15)

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
            for partition in self._partitions():
                try:
                    self.check(partition)
                except Exception:  # noqa: BLE001 - the next round retries
                    log.exception("ISR check of %s-%d failed", partition.topic, partition.partition)

    def check(self, partition) -> None:
        """One shrink/expand decision for ``partition`` (see the module docstring)."""
        with partition.cond:
            state = partition.replica
            if not partition.is_leader or not state.is_leader:
                return
            out = state.out_of_sync(now_ms=self._clock.monotonic_ms(), lag_ms=self.lag_time_max_ms)
            join = state.expandable()
            if not out and not join:
                return
            new_isr = tuple(r for r in state.isr if r not in out) + tuple(r for r in join if r not in state.isr)
            if join:
                state.pending_isr = tuple(sorted(set(state.isr) | set(join)))
            request = dict(topic=partition.topic, partition=partition.partition, leader_epoch=state.leader_epoch,
                           partition_epoch=state.partition_epoch, new_isr=new_isr)
        epoch = self._broker_epoch()
        if epoch < 0:
            return
        log.info("%s-%d: ISR %s -> %s (out of sync %s, caught up %s)", request["topic"], request["partition"],
                 list(state.isr), list(new_isr), list(out), list(join))
        try:
            self._alter(broker_id=self.broker_id, broker_epoch=epoch, **request)
        except FencedEpochError as exc:
            log.info("ISR change of %s-%d fenced: %s", request["topic"], request["partition"], exc)
            self._clear_pending(partition)
        except SparkLogError as exc:
            log.warning("ISR change of %s-%d failed: %s", request["topic"], request["partition"], exc)
            self._clear_pending(partition)

    @staticmethod
    def _clear_pending(partition) -> None:
        with partition.cond:
            partition.replica.pending_isr = ()
