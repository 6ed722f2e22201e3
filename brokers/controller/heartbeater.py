"""BrokerHeartbeater: a broker's registration and lease renewal, in one thread.

Registers ``broker_id`` with a fresh incarnation id (one per process start), then
heartbeats every ``interval_ms``.  ``FencedEpochError`` (the controller lost or replaced
the registration) makes it register again with the same incarnation; other errors
(no controller reachable) are retried on the next beat.  ``broker_epoch`` is the
current registration's epoch (None until registered); ``fenced`` the controller's
last answer.  ``wait_registered(timeout_s)`` blocks until the first registration.
``first_metadata_offset`` is the controller's metadata offset in the first heartbeat
answer of this process (None before): the broker serves partitions only once its own
image has reached it (``PartitionManager``'s metadata floor).

Thread-safety: ``start``/``stop`` from the owning thread; attributes are plain reads.
"""
from __future__ import annotations

import logging
import threading
import uuid

from spark_log.errors import FencedEpochError, SparkLogError

from .client import ControllerClient

__all__ = ["BrokerHeartbeater"]

log = logging.getLogger(__name__)


class BrokerHeartbeater:
    def __init__(
        self,
        client: ControllerClient,
        *,
        broker_id: int,
        address: str,
        rack: str = "",
        interval_ms: int = 500,
        incarnation: str | None = None,
    ) -> None:
        self.client = client
        self.broker_id = broker_id
        self.address = address
        self.rack = rack
        self.interval_s = interval_ms / 1000
        self.incarnation = incarnation or uuid.uuid4().hex
        self.broker_epoch: int | None = None
        self.fenced = True
        self.first_metadata_offset: int | None = None
        self._registered = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stopped.clear()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.broker_id}", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the thread (a call in flight ends at its RPC deadline, or at once when the
        node closes the client); joined for at most ``timeout_s``."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=max(0.0, timeout_s))
            self._thread = None

    def wait_registered(self, timeout_s: float) -> bool:
        return self._registered.wait(timeout_s)

    def beat(self) -> None:
        """One registration or heartbeat round (the thread's body; public for tests)."""
        if self.broker_epoch is None:
            self.broker_epoch = self.client.register_broker(
                broker_id=self.broker_id, incarnation=self.incarnation, address=self.address, rack=self.rack
            )
            self.fenced = False
            self._registered.set()
            log.info("broker %d registered with epoch %d", self.broker_id, self.broker_epoch)
            return
        try:
            result = self.client.heartbeat(broker_id=self.broker_id, broker_epoch=self.broker_epoch)
            self.fenced = result.fenced
            if self.first_metadata_offset is None:
                self.first_metadata_offset = result.metadata_offset
        except FencedEpochError as exc:
            log.warning("broker %d must register again: %s", self.broker_id, exc.message)
            self.broker_epoch = None
            self.fenced = True

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self.beat()
            except SparkLogError as exc:
                log.debug("broker %d heartbeat failed: %s", self.broker_id, exc)
            except Exception:  # noqa: BLE001 - keep heartbeating
                log.exception("broker %d heartbeat failed", self.broker_id)
            self._stopped.wait(self.interval_s)
