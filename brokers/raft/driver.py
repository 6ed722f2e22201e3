"""``RaftNode``: the IO shell around ``RaftCore`` (gRPC, disk, timers, the state machine).

One thread (the "raft thread") owns the core.  Everything else (gRPC handlers, reply
callbacks, ``propose`` callers, the tick timer) hands it work through a queue, as
Kafka's ``KafkaRaftClientDriver`` does.  Each ``Ready`` is processed in the contract's
order (``core.py``, "The Ready contract") and the order is asserted:

1. hard state -> ``<data_dir>/quorum-state`` (fsync + atomic rename) and, when
   ``flush_to_offset`` is set, a flush of the metadata log (``MetadataLog.flush``:
   fsync of ``<data_dir>/log``; the entries were written when the core appended them);
2. ``Ready.check_persisted`` on what the disk now holds, then messages out (answers to
   waiting calls, or new calls to voters);
3. snapshot restore, then ``StateMachine.apply`` of committed entries, then
   ``on_leader_change``;
4. ``core.advance``; then a new snapshot once ``snapshot_every_entries`` entries were
   applied since the last one.

State machine callbacks run on the raft thread: they must not call ``propose`` (it
would wait for the very thread it blocks; it raises ``RuntimeError`` instead).
"""
from __future__ import annotations

import logging
import queue
import random
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Callable, Protocol

import grpc

from brokers.net.channels import PLAINTEXT, Channels
from spark_log.clock import Clock, SystemClock
from spark_log.config import RaftConfig
from spark_log.errors import NotControllerError, RequestTimeoutError, SparkLogError

from .codec import decode_entries, encode_entries
from .core import RaftCore
from .metadata_log import MetadataLog
from .messages import (
    Entry, FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, HardState, Message,
    VoteRequest, VoteResponse,
)
from .quorum_state import QuorumStateFile
from .quorum_info import QuorumInfo
from .ready import Ready
from .transport import Peers, RaftServicer, add_raft_service

__all__ = ["StateMachine", "RaftNode"]

log = logging.getLogger(__name__)


class StateMachine(Protocol):
    def apply(self, offset: int, epoch: int, payload: bytes) -> None:
        """A committed entry, in offset order (offsets may skip control entries)."""

    def snapshot(self) -> bytes:
        """The state as of the last applied entry."""

    def restore(self, offset: int, data: bytes) -> None:
        """Replace the state by ``data``: the state after every entry below ``offset``."""

    def on_leader_change(self, leader_id: int | None, epoch: int) -> None:
        """The known leader changed (None: unknown).  Called after applying that Ready's entries."""


def _answer_key(message: Message) -> tuple[Any, ...] | None:
    """Key that pairs a request (seen from the receiver) with its answer."""
    match message:
        case VoteRequest():
            return ("vote", message.src, message.pre_vote)
        case FetchRequest():
            return ("fetch", message.src, message.fetch_offset, message.last_fetched_epoch)
        case FetchSnapshotRequest():
            return ("snapshot", message.src)
        case VoteResponse():
            return ("vote", message.dst, message.pre_vote)
        case FetchResponse():
            return ("fetch", message.dst, message.fetch_offset, message.last_fetched_epoch)
        case FetchSnapshotResponse():
            return ("snapshot", message.dst)
    return None


class _Waiter:
    """One gRPC call waiting for its answer.  Once the call gives up (``wait`` timed out)
    the waiter is closed and ``offer`` refuses, so the answer goes out as a new call
    instead of vanishing into a call that already returned."""

    __slots__ = ("_lock", "_event", "_answer", "closed")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._answer: Message | None = None
        self.closed = False

    def offer(self, answer: Message) -> bool:
        with self._lock:
            if self.closed:
                return False
            self._answer, self.closed = answer, True
        self._event.set()
        return True

    def cancel(self) -> None:
        with self._lock:
            self.closed = True
        self._event.set()

    def wait(self, timeout_s: float) -> Message | None:
        self._event.wait(timeout_s)
        with self._lock:
            self.closed = True
            return self._answer


class RaftNode:
    """A voter or observer of the metadata quorum, reachable over gRPC.

    ``voters`` maps voter ids to "host:port".  ``data_dir`` holds the quorum state, the
    metadata log and snapshots.  ``transport_filter(from_id, to_id)`` drops messages
    when it returns False (tests: partitions).  ``channels`` opens the links to the other
    voters (``brokers.net.channels``: TLS when the node's listener uses it).  Public attributes are snapshots taken on
    the raft thread, readable from any thread.
    """

    def __init__(self, *, node_id: int, voters: dict[int, str], data_dir: Path, config: RaftConfig,
                 state_machine: StateMachine, observer: bool = False, rng: random.Random | None = None,
                 transport_filter: Callable[[int, int], bool] | None = None, clock: Clock | None = None,
                 channels: Channels = PLAINTEXT) -> None:
        if observer == (node_id in voters):
            raise ValueError(f"node {node_id}: observer={observer} but voters are {sorted(voters)}")
        self.node_id = node_id
        self.voters = dict(voters)
        self.config = config
        self.state_machine = state_machine
        self.clock = clock or SystemClock()
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._quorum_state = QuorumStateFile(self.data_dir / "quorum-state")
        self._persisted: HardState = self._quorum_state.read()
        self._log = MetadataLog(self.data_dir)
        decode_entries(encode_entries([Entry(0, 0, b"")]))  # pyarrow's lazy imports: here, not on the raft thread
        self._core = RaftCore(node_id=node_id, voters=voters, log=self._log, config=config,
                              rng=rng or random.Random(), hard_state=self._persisted)
        self._peers = Peers(node_id, voters, transport_filter, channels)
        self._servicer = RaftServicer(node_id, self._handle_call, transport_filter)
        self._inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._waiters: dict[tuple[Any, ...], list[_Waiter]] = {}
        self._pending: dict[int, tuple[int, Future[int]]] = {}  # offset -> (epoch, future)
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._applied = self._log.start_offset
        self.leader_id: int | None = None
        self.epoch: int = self._persisted.epoch
        self.is_leader = False
        self.high_watermark = 0
        tick_s = config.tick_ms / 1000
        wait_ticks = max(config.heartbeat_ticks, config.fetch_wait_ticks)  # a fetch's answer may be held this long
        self._call_timeout_s = (wait_ticks + 4) * tick_s + 1.0
        self._wait_answer_s = (wait_ticks + 2) * tick_s + 0.2

    # --- lifecycle -----------------------------------------------------------------
    def add_to_server(self, server: grpc.Server) -> None:
        """Register ``RaftService`` on the process's gRPC server (before it starts).

        The server should allow large messages (``brokers.net.channels.SERVER_OPTIONS``) for snapshots.
        """
        add_raft_service(self._servicer, server)

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("RaftNode already started")
        self._thread = threading.Thread(target=self._run, name=f"raft-{self.node_id}", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the raft thread (joined for at most ``timeout_s``), fail pending proposals,
        close channels and the log."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._inbox.put(("stop",))
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(0.0, timeout_s))
        self._peers.close()
        for waiters in self._waiters.values():
            for waiter in waiters:
                waiter.cancel()
        for _, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(NotControllerError("raft node stopped", leader_address=None))
        self._log.close()

    # --- public API ----------------------------------------------------------------
    def propose(self, payloads: list[bytes], *, timeout_s: float = 10.0) -> int:
        """Append ``payloads`` and wait until they are committed and applied locally.

        Returns the offset of the last payload.  Raises ``NotControllerError`` (with
        ``leader_address``) if this node does not lead or lost leadership before the
        entries committed, ``RequestTimeoutError`` after ``timeout_s``.
        """
        if threading.current_thread() is self._thread:
            raise RuntimeError("propose() called from a state machine callback would deadlock")
        if self._stopped.is_set():
            raise NotControllerError("raft node stopped", leader_address=None)
        future: Future[int] = Future()
        self._inbox.put(("propose", [bytes(p) for p in payloads], future))
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            raise RequestTimeoutError(f"proposal not committed within {timeout_s:.1f}s") from None

    def status(self) -> tuple[str, int, int, int]:
        """``(role, high watermark, applied offset, log end offset)`` now (metrics; read
        without the Raft thread's lock: each value is one attribute read).  Roles: leader,
        follower, candidate, prospective, voted, unattached (observers too)."""
        return (type(self._core.state).__name__.lower(), self.high_watermark, self._applied,
                self._log.end_offset)

    def describe_quorum(self, *, timeout_s: float = 5.0) -> QuorumInfo:
        """The leader's view of every voter and observer (``quorum_info.py``), read on the
        raft thread.  Raises ``NotControllerError`` (with ``leader_address``) unless this
        node leads, ``RequestTimeoutError`` when the raft thread does not answer in time."""
        if self._stopped.is_set():
            raise NotControllerError("raft node stopped", leader_address=None)
        future: Future[QuorumInfo] = Future()
        self._inbox.put(("describe", future))
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            raise RequestTimeoutError(f"the raft thread did not answer within {timeout_s:.1f}s") from None

    def leader_address(self) -> str | None:
        leader = self.leader_id
        return self.voters.get(leader) if leader is not None else None

    # --- inputs from other threads -----------------------------------------------------
    def _handle_call(self, message: Message) -> Message | None:
        key = _answer_key(message) if isinstance(message, (VoteRequest, FetchRequest, FetchSnapshotRequest)) else None
        waiter = _Waiter() if key is not None else None
        self._inbox.put(("message", message, key, waiter))
        if waiter is None or key is None:
            return None
        return waiter.wait(self._wait_answer_s)

    def _on_reply(self, message: Message) -> None:
        self._inbox.put(("message", message, None, None))

    # --- the raft thread ---------------------------------------------------------------
    def _run(self) -> None:
        tick_ms = self.config.tick_ms
        next_tick = self.clock.monotonic_ms() + tick_ms
        try:
            self._process_ready()
            while not self._stopped.is_set():
                timeout = max(0.0, (next_tick - self.clock.monotonic_ms()) / 1000)
                try:
                    item = self._inbox.get(timeout=timeout)
                except queue.Empty:
                    item = None
                if item is not None:
                    if item[0] == "stop":
                        break
                    self._handle_item(item)
                now = self.clock.monotonic_ms()
                if now >= next_tick:
                    self._core.tick()
                    next_tick = max(next_tick + tick_ms, now - tick_ms)
                self._process_ready()
        except Exception:  # noqa: BLE001 - a dead raft thread must be loud
            log.exception("raft node %d: raft thread failed", self.node_id)
            self._stopped.set()
            raise

    def _handle_item(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "message":
            _, message, key, waiter = item
            if key is not None and waiter is not None:
                self._waiters.setdefault(key, []).append(waiter)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("node %d <- %r (state %r)", self.node_id, message, self._core.state)
            self._core.step(message)
        elif kind == "propose":
            _, payloads, future = item
            try:
                last = self._core.propose(payloads)
            except NotControllerError as exc:
                future.set_exception(NotControllerError(exc.message, leader_address=self.leader_address()))
                return
            except SparkLogError as exc:
                future.set_exception(exc)
                return
            self._pending[last] = (self._core.epoch, future)
        elif kind == "describe":
            _, answer = item
            try:
                answer.set_result(self._core.describe_quorum())
            except NotControllerError as exc:
                answer.set_exception(NotControllerError(exc.message, leader_address=self.leader_address()))

    def _process_ready(self) -> None:
        core = self._core
        while core.has_ready():
            ready = core.ready()
            self._persist(ready)
            ready.check_persisted(self._log.flushed_end_offset, self._persisted)
            for message in ready.messages:
                self._route(message)
            self._apply(ready)
            core.advance(ready)
            self._maybe_snapshot()
        self.leader_id = core.leader_id
        self.epoch = core.epoch
        self.is_leader = core.is_leader
        self.high_watermark = core.high_watermark
        self._expire_waiters()

    def _persist(self, ready: Ready) -> None:
        if ready.hard_state is not None:
            self._quorum_state.write(ready.hard_state)
            self._persisted = ready.hard_state
        if ready.flush_to_offset is not None:
            self._log.flush()

    def _route(self, message: Message) -> None:
        key = _answer_key(message)
        waiters = self._waiters.get(key) if key is not None else None
        while waiters:
            if waiters.pop(0).offer(message):
                return
        if isinstance(message, (VoteResponse, FetchResponse, FetchSnapshotResponse)) and message.dst not in self.voters:
            return  # an observer's answer whose call is gone
        self._peers.send(message, self._call_timeout_s, self._on_reply)

    def _expire_waiters(self) -> None:
        for key in list(self._waiters):
            live = [w for w in self._waiters[key] if not w.closed]
            if live:
                self._waiters[key] = live
            else:
                del self._waiters[key]

    def _apply(self, ready: Ready) -> None:
        sm = self.state_machine
        if ready.snapshot is not None:
            end = ready.snapshot.snapshot_id.end_offset
            sm.restore(end, ready.snapshot.data)
            self._applied = end
            for offset in [o for o in self._pending if o < end]:
                _, future = self._pending.pop(offset)
                future.set_exception(NotControllerError(
                    "outcome unknown: a snapshot replaced the log", leader_address=self.leader_address()))
        for entry in ready.committed:
            if not entry.control:
                sm.apply(entry.offset, entry.epoch, entry.payload)
            self._applied = entry.offset + 1
            pending = self._pending.pop(entry.offset, None)
            if pending is not None:
                epoch, future = pending
                if epoch == entry.epoch:
                    future.set_result(entry.offset)
                else:
                    future.set_exception(NotControllerError(
                        "leadership lost before the proposal committed", leader_address=self.leader_address()))
        if ready.leader_change is not None:
            sm.on_leader_change(ready.leader_change.leader_id, ready.leader_change.epoch)

    def _maybe_snapshot(self) -> None:
        if self._applied - self._log.start_offset >= self.config.snapshot_every_entries:
            self._core.create_snapshot(self._applied, self.state_machine.snapshot())
