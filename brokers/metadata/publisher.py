"""MetadataListener: keeps the current ``MetadataImage`` of a node and publishes changes.

It is a Raft ``StateMachine`` (``apply``/``snapshot``/``restore``/``on_leader_change``):
observers (brokers that are not voters) hand it to their ``RaftNode`` directly; on
voters the ``QuorumController`` owns one and forwards to it.  Either way the broker part
finds it as ``Node.metadata``.

Publishers are callables ``publisher(delta, image)``: ``delta`` is the
``MetadataDelta`` from the previous image (``delta.image``) to ``image``.  They are called

- once per committed record, in log order, on the Raft apply thread;
- once per snapshot load, with ``MetadataDelta.between(old, new)``;
- once when added, with ``MetadataDelta.between(EMPTY, current)`` if the current image is
  not empty (so a late publisher sees the whole state, as in Kafka's loader).

A publisher must return quickly and must not propose to Raft from its own thread (that
would wait on the thread that is calling it).  An exception in a publisher is logged and
does not stop the other publishers or the log.  A record that cannot apply
(``ReplayError``/``CorruptRecordError``) is logged and skipped on every node alike.

Thread-safety: ``image`` and ``wait_for`` may be used from any thread; ``apply``,
``restore`` and ``on_leader_change`` come from the one Raft thread.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from spark_log.errors import CorruptRecordError, RequestTimeoutError

from .delta import MetadataDelta, ReplayError
from .image import EMPTY, MetadataImage
from .records import MetadataRecord, decode
from .snapshot import decode_image, encode_image

__all__ = ["MetadataListener", "MetadataPublisher", "LeaderListener"]

log = logging.getLogger(__name__)

MetadataPublisher = Callable[[MetadataDelta, MetadataImage], None]
LeaderListener = Callable[[int | None, int], None]


class MetadataListener:
    """The node's metadata image, fed by the Raft log (see the module docstring)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._image: MetadataImage = EMPTY
        self._publishers: list[MetadataPublisher] = []
        self._leader_listeners: list[LeaderListener] = []
        self.leader_id: int | None = None
        self.leader_epoch: int = -1

    # --- reading -----------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        """The latest image (an immutable object; no lock needed to use it)."""
        return self._image

    def wait_for(
        self, predicate: Callable[[MetadataImage], bool], *, timeout_s: float = 10.0
    ) -> MetadataImage:
        """Block until ``predicate(image)`` holds and return that image; raises
        ``RequestTimeoutError`` after ``timeout_s`` seconds."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not predicate(self._image):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RequestTimeoutError(f"metadata image did not reach the wanted state in {timeout_s}s")
                self._cond.wait(remaining)
            return self._image

    # --- subscribers -------------------------------------------------------------------

    def add_publisher(self, publisher: MetadataPublisher) -> None:
        """Subscribe ``publisher``; it first gets the current image if not empty."""
        with self._cond:
            self._publishers.append(publisher)
            image = self._image
        if image is not EMPTY and (image.brokers or image.topics):
            self._call(publisher, MetadataDelta.between(EMPTY, image), image)

    def remove_publisher(self, publisher: MetadataPublisher) -> None:
        with self._cond:
            if publisher in self._publishers:
                self._publishers.remove(publisher)

    def add_leader_listener(self, listener: LeaderListener) -> None:
        """``listener(leader_id, epoch)`` on every Raft leader change (Raft thread)."""
        with self._cond:
            self._leader_listeners.append(listener)

    # --- StateMachine ------------------------------------------------------------------

    def apply(self, offset: int, epoch: int, payload: bytes) -> None:
        """Replay one committed entry and publish the change."""
        try:
            record: MetadataRecord | None = decode(payload)
        except CorruptRecordError as exc:
            log.error("skipping metadata entry %d: %s", offset, exc)
            record = None
        delta = MetadataDelta(self._image)
        if record is not None:
            try:
                delta.replay(record)
            except ReplayError as exc:
                log.error("skipping metadata record at %d (%r): %s", offset, record, exc)
                delta = MetadataDelta(self._image)
        self._publish(delta, delta.apply(offset=offset, epoch=epoch))

    def snapshot(self) -> bytes:
        return encode_image(self._image)

    def restore(self, offset: int, data: bytes) -> None:
        """Replace the image by snapshot ``data``: the state after every entry below
        ``offset`` (so the image's ``offset`` becomes ``offset - 1``)."""
        image = decode_image(data)
        if image.offset != offset - 1:
            image = MetadataDelta(image).apply(offset=offset - 1)
        self._publish(MetadataDelta.between(self._image, image), image)

    def on_leader_change(self, leader_id: int | None, epoch: int) -> None:
        with self._cond:
            self.leader_id, self.leader_epoch = leader_id, epoch
            listeners = list(self._leader_listeners)
            self._cond.notify_all()
        for listener in listeners:
            try:
                listener(leader_id, epoch)
            except Exception:  # noqa: BLE001 - a listener bug must not stop Raft
                log.exception("metadata leader listener failed")

    # --- internals ---------------------------------------------------------------------

    def _publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        with self._cond:
            self._image = image
            publishers = list(self._publishers)
            self._cond.notify_all()
        for publisher in publishers:
            self._call(publisher, delta, image)

    @staticmethod
    def _call(publisher: MetadataPublisher, delta: MetadataDelta, image: MetadataImage) -> None:
        try:
            publisher(delta, image)
        except Exception:  # noqa: BLE001 - a publisher bug must not stop the log
            log.exception("metadata publisher %r failed", publisher)
