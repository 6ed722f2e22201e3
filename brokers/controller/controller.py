"""QuorumController: the active controller's request handling over the metadata log.

Runs on every controller voter as the Raft ``StateMachine``; only the voter that is
the Raft leader *and* has caught up serves requests.  Requests (each handled by a pure
module that validates against the current image and returns records):

    register_broker   registration.py   incarnation id, broker epoch, replaces old ones
    heartbeat         registration.py   renews the lease (leases.py), unfences
    check_leases      registration.py   fences brokers whose lease ran out (periodic)
    fence_dead_brokers                  fences sooner a silent broker whose listener refuses
                                        connections (its process is gone; periodic)
    create_topic      topics.py         name/partitions/RF/config/schema, placement.py
    delete_topic      topics.py
    alter_partition   alter_partition.py  ISR changes from leaders, stale epochs fenced;
                      then completes a reassignment whose target is all in the ISR
    alter_partitions  the same for many partitions, committed in one proposal (isr.proto)
    alter_partition_reassignment  reassignment.py  start / replace / cancel (KIP-455)
    complete_reassignments        reassignment.py  safety net (periodic, lease loop)
    elect_leaders     preferred_leader.py               on demand (periodic too)
    alter_configs     configs.py        + election.py: unclean election enabled -> offline partitions elect now
    register_schema   schema_versions.py  compatible evolution only
    change            security.py       SCRAM users, ACLs, client quotas (any pure builder)

Activation: when this voter becomes the Raft leader, its lease loop (never a request
thread) proposes a ``NoOpRecord`` and waits until it is applied, so the image includes
every entry committed by earlier leaders (Raft's "commit an entry from the current
term"), then grants every registered broker a fresh lease and marks the controller
active for that epoch.  A failed proposal (leadership lost, timeout) deactivates it.

Protocol for every request (requests never wait for activation, so they cannot pile up
on the server's worker threads and starve the Raft fetches that activation needs):

1. not the Raft leader -> ``NotControllerError`` with ``leader_address`` (may be None);
   leader but not active yet -> ``NotControllerError`` naming itself (retry shortly);
2. take the request lock, so validation and proposal of one request never interleave
   with another's; waiting longer than ``busy_timeout_s`` -> ``ThrottledError``
   (retriable; nothing was done);
3. validate against ``self.image``; refusals raise the module's typed error and
   propose nothing;
4. propose the records with ``RaftNode.propose`` (returns once committed and applied
   here), then answer from the new image.

Heartbeats that change nothing (the common case) skip the lock: they only renew the
in-memory lease.

Thread-safety: request methods may be called from any thread (gRPC workers); the
``StateMachine`` methods come from the Raft thread and never take the request lock.
"""
from __future__ import annotations

import logging
import socket
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence, TypeVar

import pyarrow as pa

from brokers.metadata.alter_isr import AlterIsr
from brokers.metadata.image import MetadataImage, PartitionInfo, TopicImage
from brokers.metadata.publisher import MetadataListener
from brokers.metadata.records import MetadataRecord, NoOpRecord, encode
from spark_log.clock import Clock, SystemClock
from spark_log.config import BrokerConfig, TopicConfig
from spark_log.errors import (
    InvalidRequestError,
    NotControllerError,
    RequestTimeoutError,
    SparkLogError,
    ThrottledError,
    UnknownTopicOrPartitionError,
)

from brokers.controller.preferred_leader import ElectionOutcome, elect_preferred, preferred_leader_changes

from .alter_partition import alter_partition_records
from .configs import alter_config_records
from .election import offline_elections
from .leases import BrokerLeases
from .reassignment import completion_changes, reassignment_records
from .registration import fence_records, heartbeat_records, register
from .schema_versions import register_schema_records
from .topics import create_topic_records, delete_topic_records

__all__ = ["QuorumController", "RaftHandle", "HeartbeatResult"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class RaftHandle(Protocol):
    """What the controller needs of ``brokers.raft.driver.RaftNode``."""

    is_leader: bool
    epoch: int

    def propose(self, payloads: list[bytes], *, timeout_s: float = 10.0) -> int: ...

    def leader_address(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    fenced: bool
    broker_epoch: int
    metadata_offset: int


def listener_refused(address: str, timeout_s: float = 0.2) -> bool:
    """True when a TCP connection to ``address`` ("host:port") is refused: nothing listens
    there.  A timeout, an unreachable network or an accepted connection give False."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return False
    except ConnectionRefusedError:
        return True
    except (OSError, ValueError):
        return False


class QuorumController:
    """The metadata state machine of a voter plus the active controller's handlers."""

    def __init__(
        self,
        *,
        node_id: int,
        session_timeout_ms: int = 6000,
        topic_defaults: TopicConfig = TopicConfig(),
        clock: Clock | None = None,
        id_factory: Callable[[], str] | None = None,
        propose_timeout_s: float = 5.0,
        busy_timeout_s: float = 2.0,
        check_interval_ms: int | None = None,
        auto_leader_rebalance: bool = True,
        probe_after_ms: int | None = None,
        probe: Callable[[str], bool] | None = None,
    ) -> None:
        self.node_id = node_id
        self.metadata = MetadataListener()
        self.topic_defaults = topic_defaults
        self._clock: Clock = clock or SystemClock()
        self._id_factory = id_factory or (lambda: uuid.uuid4().hex)
        self._propose_timeout_s = propose_timeout_s
        self._busy_timeout_s = busy_timeout_s
        self._check_interval_s = (check_interval_ms or max(20, session_timeout_ms // 10)) / 1000
        # preferred-leader election (brokers.controller.preferred_leader), once per session timeout
        self._preferred_interval_ms = max(1000, session_timeout_ms)
        self._next_preferred_check_ms = 0
        self._auto_leader_rebalance = auto_leader_rebalance  # off: only on demand (elect_leaders)
        self._leases = BrokerLeases(clock=self._clock, session_timeout_ms=session_timeout_ms)
        # fast failure detection (``fence_dead_brokers``): silent this long -> probe its listener
        self._probe_after_ms = probe_after_ms if probe_after_ms is not None and probe_after_ms < session_timeout_ms \
            else None
        self._probe = probe or listener_refused
        self._raft: RaftHandle | None = None
        self._lock = threading.RLock()
        self._active_epoch: int | None = None
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig, *, clock: Clock | None = None) -> "QuorumController":
        return cls(
            node_id=config.broker_id,
            session_timeout_ms=config.session_timeout_ms,
            probe_after_ms=2 * config.heartbeat_interval_ms,
            topic_defaults=config.topic_defaults,
            auto_leader_rebalance=config.auto_leader_rebalance_enable,
            clock=clock,
        )

    def attach(self, raft: RaftHandle) -> None:
        """Give the controller its Raft node (built after, since it needs this object)."""
        self._raft = raft

    @property
    def image(self) -> MetadataImage:
        return self.metadata.image

    def leader_address(self) -> str | None:
        """Address of the Raft leader as this voter knows it (None: unknown)."""
        raft = self._raft
        return raft.leader_address() if raft is not None else None

    @property
    def is_active(self) -> bool:
        """Leader and caught up in the current epoch (serving requests)."""
        raft = self._raft
        return raft is not None and raft.is_leader and self._active_epoch == raft.epoch

    # --- StateMachine (Raft thread) ------------------------------------------------------

    def apply(self, offset: int, epoch: int, payload: bytes) -> None:
        self.metadata.apply(offset, epoch, payload)

    def snapshot(self) -> bytes:
        return self.metadata.snapshot()

    def restore(self, offset: int, data: bytes) -> None:
        self.metadata.restore(offset, data)

    def on_leader_change(self, leader_id: int | None, epoch: int) -> None:
        self.metadata.on_leader_change(leader_id, epoch)
        self._wake.set()  # the lease loop activates a new leader promptly

    # --- background lease checks -------------------------------------------------------------

    def start(self) -> None:
        """Start the lease-check loop (fences brokers that miss their lease)."""
        self._stopped.clear()
        self._thread = threading.Thread(target=self._loop, name=f"controller-{self.node_id}", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the lease loop; joined for at most ``timeout_s``."""
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=max(0.0, timeout_s))
            self._thread = None

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self._check_interval_s)
            self._wake.clear()
            if self._stopped.is_set():
                return
            raft = self._raft
            if raft is None or not raft.is_leader:
                continue
            try:
                if self.activate():
                    self.check_leases()
                    self.fence_dead_brokers()
                    now_ms = self._clock.monotonic_ms()
                    if self._auto_leader_rebalance and now_ms >= self._next_preferred_check_ms:
                        self._next_preferred_check_ms = now_ms + self._preferred_interval_ms
                        self.elect_preferred_leaders()
                    self.complete_reassignments()
            except SparkLogError as exc:
                log.debug("controller loop on node %d: %s", self.node_id, exc)
            except Exception:  # noqa: BLE001 - keep checking leases
                log.exception("controller loop failed on node %d", self.node_id)

    # --- the request protocol ------------------------------------------------------------

    def activate(self) -> bool:
        """Become the active controller if this voter leads (see the module docstring);
        returns whether it is active.  Called by the lease loop (and tests)."""
        with self._lock:
            raft = self._raft
            if raft is None or not raft.is_leader:
                return False
            if self._active_epoch == raft.epoch:
                return True
            epoch = raft.epoch
            self._propose([NoOpRecord(controller_id=self.node_id)])
            self._leases.reset(self.image.brokers)
            self._active_epoch = epoch
            log.info("node %d is the active controller in epoch %d", self.node_id, epoch)
            return True

    def _require_active(self) -> RaftHandle:
        raft = self._require_leader()
        if self._active_epoch != raft.epoch:
            self._wake.set()
            raise NotControllerError(
                f"node {self.node_id} was just elected and is catching up with the metadata log; retry shortly",
                leader_address=raft.leader_address(),
            )
        return raft

    def _serve(self, handler: Callable[[MetadataImage], T]) -> T:
        self._require_active()
        if not self._lock.acquire(timeout=self._busy_timeout_s):
            raise ThrottledError(f"controller {self.node_id} is busy; nothing was changed, retry")
        try:
            self._require_active()
            return handler(self.image)
        finally:
            self._lock.release()

    def _require_leader(self) -> RaftHandle:
        raft = self._raft
        if raft is None or not raft.is_leader:
            address = raft.leader_address() if raft is not None else None
            self._active_epoch = None
            raise NotControllerError(
                f"node {self.node_id} is not the active controller"
                + (f"; the controller is at {address}" if address else "; no controller is elected yet"),
                leader_address=address,
            )
        return raft

    def _propose(self, records: Sequence[MetadataRecord]) -> None:
        if not records:
            return
        raft = self._require_leader()
        try:
            raft.propose([encode(r) for r in records], timeout_s=self._propose_timeout_s)
        except SparkLogError:
            self._active_epoch = None
            raise
        except TimeoutError:
            self._active_epoch = None
            raise RequestTimeoutError(
                f"metadata change was not committed within {self._propose_timeout_s}s; it may still apply"
            ) from None

    # --- requests ------------------------------------------------------------------------

    def register_broker(self, *, broker_id: int, incarnation: str, address: str, rack: str = "") -> int:
        """Register (or re-register) a broker; returns its broker epoch."""

        def handle(image: MetadataImage) -> int:
            records, epoch = register(image, broker_id=broker_id, incarnation=incarnation, address=address, rack=rack)
            self._propose(records)
            self._leases.renew(broker_id)
            return epoch

        return self._serve(handle)

    def heartbeat(self, *, broker_id: int, broker_epoch: int) -> HeartbeatResult:
        """Renew the broker's lease, unfencing it if needed; ``FencedEpochError`` when the
        broker must register again."""
        self._require_active()
        image = self.image
        if not heartbeat_records(image, broker_id, broker_epoch):  # fast path: nothing to change
            self._leases.renew(broker_id)
            return HeartbeatResult(fenced=False, broker_epoch=broker_epoch, metadata_offset=image.offset)

        def handle(image: MetadataImage) -> HeartbeatResult:
            records = heartbeat_records(image, broker_id, broker_epoch)
            self._leases.renew(broker_id)
            self._propose(records)
            info = self.image.brokers[broker_id]
            return HeartbeatResult(fenced=info.fenced, broker_epoch=info.broker_epoch, metadata_offset=self.image.offset)

        return self._serve(handle)

    def elect_preferred_leaders(self) -> int:
        """Move leadership back to each partition's first replica where it is live and in the
        ISR (``brokers.controller.preferred_leader``); returns how many partitions moved."""

        def handle(image: MetadataImage) -> int:
            changes = preferred_leader_changes(image)
            if changes:
                log.info("preferred-leader election: %s", ", ".join(f"{c.topic}-{c.partition} -> {c.leader}"
                                                                    for c in changes))
                self._propose(changes)
            return len(changes)

        return self._serve(handle)

    def check_leases(self) -> list[int]:
        """Fence every unfenced broker whose lease ran out; returns their ids."""

        def handle(image: MetadataImage) -> list[int]:
            expired = self._leases.expired(b.broker_id for b in image.live_brokers())
            for broker_id in expired:
                log.info("fencing broker %d: no heartbeat within its session timeout", broker_id)
                self._propose(fence_records(self.image, broker_id))
            return expired

        return self._serve(handle)

    def fence_dead_brokers(self) -> list[int]:
        """Fence, before their session timeout, the brokers that are silent for more than
        ``probe_after_ms`` (two heartbeat intervals) *and* whose listener refuses a TCP
        connection: the process is gone (kill -9, a crash), not slow.  A busy or stopped
        process still has its listening socket (the kernel completes the handshake), and a
        partitioned one times out: both keep their lease until the session timeout, so load
        never causes a failover.  Returns the fenced ids."""
        after_ms = self._probe_after_ms
        if after_ms is None:
            return []
        image = self.image
        silent = self._leases.silent((b.broker_id for b in image.live_brokers()), after_ms)
        dead = [b for b in silent if (address := image.broker_address(b)) is not None and self._probe(address)]
        if not dead:
            return []

        def handle(image: MetadataImage) -> list[int]:
            live = {b.broker_id for b in image.live_brokers()}
            fenced = []
            for broker_id in self._leases.silent(dead, after_ms):  # no heartbeat since the probe
                if broker_id in live:
                    log.info("fencing broker %d: silent for %d ms and its listener %s refuses connections",
                             broker_id, after_ms, image.broker_address(broker_id))
                    self._propose(fence_records(self.image, broker_id))
                    fenced.append(broker_id)
            return fenced

        return self._serve(handle)

    def create_topic(
        self,
        *,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, Any] | None = None,
        schema: pa.Schema | None = None,
        key_columns: Sequence[str] = (),
        kind: str | None = None,
    ) -> TopicImage:
        """Create a topic (see ``topics.py`` for the refusals and ``kind``); returns its image."""

        def handle(image: MetadataImage) -> TopicImage:
            records = create_topic_records(
                image,
                name=name,
                topic_id=self._id_factory(),
                partitions=partitions,
                replication_factor=replication_factor,
                config=config,
                schema=schema,
                key_columns=key_columns,
                defaults=self.topic_defaults,
                kind=kind,
            )
            self._propose(records)
            return self.image.topics[name]

        return self._serve(handle)

    def delete_topic(self, *, name: str) -> None:
        self._serve(lambda image: self._propose(delete_topic_records(image, name)))

    def alter_partition(
        self,
        *,
        broker_id: int,
        broker_epoch: int,
        topic: str,
        partition: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: Sequence[int],
    ) -> PartitionInfo:
        """Change a partition's ISR on behalf of its leader; returns the new state."""

        def handle(image: MetadataImage) -> PartitionInfo:
            records = alter_partition_records(
                image,
                broker_id=broker_id,
                broker_epoch=broker_epoch,
                topic=topic,
                partition=partition,
                leader_epoch=leader_epoch,
                partition_epoch=partition_epoch,
                new_isr=new_isr,
            )
            self._propose(records)
            if records:
                self._complete(lambda t, p: t == topic and p == partition)
            info = self.image.partition(topic, partition)
            assert info is not None
            return info

        return self._serve(handle)

    def alter_partitions(self, items: Sequence[AlterIsr]) -> list[PartitionInfo | SparkLogError]:
        """Many ``alter_partition`` requests (distinct partitions) in one proposal: each item
        is validated on its own against the image (a refusal changes nothing for the others),
        the accepted changes commit together.  Per item: the partition's state afterwards, or
        the typed refusal.  A failed proposal raises (every item's outcome is then unknown)."""

        def handle(image: MetadataImage) -> list[PartitionInfo | SparkLogError]:
            outcomes: list[PartitionInfo | SparkLogError | None] = []
            records: list[MetadataRecord] = []
            changed: set[tuple[str, int]] = set()
            seen: set[tuple[str, int]] = set()
            for item in items:
                key = (item.topic, item.partition)
                try:
                    if key in seen:
                        raise InvalidRequestError(f"{item.topic}-{item.partition} appears twice in one batch")
                    seen.add(key)
                    found = alter_partition_records(
                        image, broker_id=item.broker_id, broker_epoch=item.broker_epoch, topic=item.topic,
                        partition=item.partition, leader_epoch=item.leader_epoch,
                        partition_epoch=item.partition_epoch, new_isr=item.new_isr)
                except SparkLogError as exc:
                    outcomes.append(exc)
                    continue
                if found:
                    records.extend(found)
                    changed.add(key)
                outcomes.append(None)
            self._propose(records)
            if changed:
                self._complete(lambda t, p: (t, p) in changed)
            result: list[PartitionInfo | SparkLogError] = []
            for item, outcome in zip(items, outcomes):
                if outcome is None:
                    info = self.image.partition(item.topic, item.partition)
                    assert info is not None
                    outcome = info
                result.append(outcome)
            return result

        return self._serve(handle)

    # --- reassignment and on-demand election ------------------------------------------------

    def alter_partition_reassignment(self, *, topic: str, partition: int, target: Sequence[int]) -> PartitionInfo:
        """Start, replace or (empty ``target``) cancel the reassignment of one partition
        (``reassignment.py``); completes it at once when the target is already in the ISR.
        Returns the partition's state after the change."""

        def handle(image: MetadataImage) -> PartitionInfo:
            self._propose(reassignment_records(image, topic, partition, tuple(target)))
            self._complete(lambda t, p: t == topic and p == partition)
            info = self.image.partition(topic, partition)
            assert info is not None
            return info

        return self._serve(handle)

    def complete_reassignments(self) -> int:
        """Complete every pending reassignment whose target is all in the ISR (the lease
        loop's safety net; AlterPartition completes them as the ISR grows).  Returns how many."""
        if not any(info.reassigning for _, _, info in self.image.iter_partitions()):
            return 0
        return self._serve(lambda image: self._complete(None))

    def _complete(self, only: Callable[[str, int], bool] | None) -> int:
        """Propose the completions due (under the request lock); a failure is logged, the
        periodic loop retries."""
        changes = completion_changes(self.image, only)
        if not changes:
            return 0
        log.info("completing reassignments: %s", ", ".join(f"{c.topic}-{c.partition} -> {list(c.replicas or ())}"
                                                           for c in changes))
        try:
            self._propose(changes)
        except SparkLogError as exc:
            log.warning("completing reassignments failed (the controller loop retries): %s", exc)
            return 0
        return len(changes)

    def elect_leaders(self, *, partitions: Sequence[tuple[str, int]] | None = None) -> list[ElectionOutcome]:
        """Preferred-leader election now for ``partitions`` (every partition if None);
        ``UnknownTopicOrPartitionError`` if one does not exist.  Returns per partition its
        leader afterwards, or why the preferred replica cannot lead."""

        def handle(image: MetadataImage) -> list[ElectionOutcome]:
            wanted = [(t, p) for t, p, _ in image.iter_partitions()] if partitions is None else list(partitions)
            for topic, index in wanted:
                if image.partition(topic, index) is None:
                    raise UnknownTopicOrPartitionError(f"unknown partition {topic}-{index}")
            outcomes = elect_preferred(image, wanted)
            self._propose([o.change for o in outcomes if o.change is not None])
            return outcomes

        return self._serve(handle)

    def alter_configs(
        self, *, topic: str, set: Mapping[str, Any] | None = None, delete: Sequence[str] = ()  # noqa: A002
    ) -> TopicConfig:
        def handle(image: MetadataImage) -> TopicConfig:
            records, config = alter_config_records(image, topic, set=set, delete=delete, defaults=self.topic_defaults)
            if records:  # e.g. unclean.leader.election.enable=true elects offline partitions now
                records = [*records, *offline_elections(image, topic, unclean=config.unclean_leader_election_enable)]
            self._propose(records)
            return config

        return self._serve(handle)

    def change(self, build: Callable[[MetadataImage], tuple[Sequence[MetadataRecord], T]]) -> tuple[T, int]:
        """Commit the records a pure ``build(image) -> (records, answer)`` returns (SCRAM
        users, ACLs, quotas: ``security.py``) under the request protocol above; returns
        ``(answer, metadata offset)``: every image at or past that offset holds the change."""

        def handle(image: MetadataImage) -> tuple[T, int]:
            records, answer = build(image)
            self._propose(records)
            return answer, self.image.offset

        return self._serve(handle)

    def register_schema(self, *, topic: str, schema: pa.Schema) -> int:
        """Add a compatible schema version to a typed topic; returns its schema id."""

        def handle(image: MetadataImage) -> int:
            records, schema_id = register_schema_records(image, topic, schema)
            self._propose(records)
            return schema_id

        return self._serve(handle)
