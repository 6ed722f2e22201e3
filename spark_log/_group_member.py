"""A consumer's membership of a group, the client side of KIP-848: the heartbeat thread.

The coordinator decides the assignment; this side reports and follows:

- A background thread heartbeats every ``heartbeat_interval_ms`` (the coordinator's
  figure, shorter while the member reconciles) with the subscription and the partitions
  the consumer *owns* (what it fetches now), and at once when those change.  The answer
  gives the member epoch and the partitions the member may own: ``assignment``.
- The consumer's poll thread (``_group_session.py``) compares what it owns with
  ``assignment``, revokes the difference first (callbacks, commit), takes the new ones,
  then ``set_owned`` reports the result, which the next heartbeat confirms.
- Fenced (``FencedMemberEpochError``/``UnknownMemberIdError``: the session expired, or a
  static member's instance id was taken over): heartbeats stop, ``fenced`` is set; the
  poll thread drops every partition (they may already be someone else's) and calls
  ``rejoin``, which restarts at epoch 0 with the same member id.
- Retriable errors (the coordinator moved or is loading, a broker is down): the next
  heartbeat finds the coordinator again, after a short backoff; the session on the
  coordinator keeps running meanwhile.
- Other typed errors (a bad pattern, an assignor or session timeout the brokers refuse)
  stop the heartbeats; ``error`` holds it and the next poll raises it.
- ``leave`` sends one last heartbeat with epoch -1 (or -2: a static member leaving for a
  restart keeps its partitions for its session timeout) and stops the thread.
- A consumer that does not poll for ``rebalance_timeout_ms`` (its ``max_poll_interval_ms``)
  is stuck as far as the group is concerned: the heartbeat thread leaves the group (its
  partitions go to the others) and sets ``fenced``, so the next poll drops its partitions
  and rejoins (Kafka's ``max.poll.interval.ms``).

Thread-safety: every method may be called from any thread; ``changed`` is notified
whenever ``assignment``, ``fenced`` or ``error`` changes.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass

from . import errors
from ._group_client import GroupRpc
from .errors import SparkLogError
from .proto import groups_pb2 as gpb

__all__ = ["Membership", "MemberView", "GroupSubscription"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class GroupSubscription:
    topics: tuple[str, ...] = ()
    pattern: str = ""  # a regular expression matched in full by the coordinator


@dataclass(frozen=True, slots=True)
class MemberView:
    """What the poll thread reads: the coordinator's last word."""

    joined: bool  # an answer came since the last (re)join
    epoch: int
    assignment: frozenset[TopicPartition]
    fenced: bool
    error: SparkLogError | None


def _partitions_pb(partitions: frozenset[TopicPartition]) -> list[gpb.TopicPartitions]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [gpb.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]


class Membership:
    """One consumer's membership of ``group_id`` (module docstring)."""

    def __init__(self, rpc: GroupRpc, *, group_id: str, member_id: str, instance_id: str = "",
                 session_timeout_ms: int = 45_000, rebalance_timeout_ms: int = 300_000, assignor: str = "",
                 client_id: str = "") -> None:
        self.rpc = rpc
        self.group_id = group_id
        self.member_id = member_id
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.assignor = assignor
        self.client_id = client_id
        self.changed = threading.Condition()
        self._subscription = GroupSubscription()
        self._epoch = 0
        self._joined = False
        self._assignment: frozenset[TopicPartition] = frozenset()
        self._owned: frozenset[TopicPartition] = frozenset()
        self._fenced = False
        self._error: SparkLogError | None = None
        self._interval_ms = max(1, min(1000, session_timeout_ms // 3))
        self._due = 0.0  # monotonic seconds of the next heartbeat
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._host = socket.gethostname()
        self._polled = time.monotonic()

    # -- the poll thread's side --------------------------------------------------------------

    def subscribe(self, subscription: GroupSubscription) -> None:
        """Start (or change) the subscription; starts the heartbeat thread on first use."""
        with self.changed:
            self._subscription = subscription
            self._error = None
            self._due = 0.0
            self.changed.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.group_id}", daemon=True)
                self._thread.start()

    def polled(self) -> None:
        """The consumer polled (``max_poll_interval_ms`` counts from here)."""
        with self.changed:
            self._polled = time.monotonic()

    def view(self) -> MemberView:
        with self.changed:
            return MemberView(self._joined, self._epoch, self._assignment, self._fenced, self._error)

    @property
    def epoch(self) -> int:
        with self.changed:
            return self._epoch

    def set_owned(self, owned: frozenset[TopicPartition]) -> None:
        """The consumer owns ``owned`` now: heartbeat it at once."""
        with self.changed:
            if owned != self._owned:
                self._owned = owned
                self._due = 0.0
                self.changed.notify_all()

    def fence(self) -> None:
        """A commit learnt the member is fenced: the same as a fenced heartbeat."""
        with self.changed:
            self._fenced = True
            self.changed.notify_all()

    def fence_at(self, epoch: int) -> bool:
        """A commit made at ``epoch`` was refused as fenced: ``fence`` if the member is still
        at that epoch (its current epoch was refused).  A commit made at an older epoch is
        only stale (Kafka's STALE_MEMBER_EPOCH): the member moved on since, and its current
        epoch may well be valid; the commit fails, the member keeps its partitions."""
        with self.changed:
            if epoch != self._epoch:
                return False
            self._fenced = True
            self.changed.notify_all()
            return True

    def rejoin(self) -> None:
        """After dropping every partition: join again at epoch 0 with the same member id."""
        with self.changed:
            self._fenced, self._joined, self._epoch = False, False, 0
            self._assignment = self._owned = frozenset()
            self._due = 0.0
            self.changed.notify_all()

    def wait_for_change(self, timeout_s: float, since: MemberView) -> None:
        """Until the view differs from ``since`` or ``timeout_s`` passes."""
        with self.changed:
            self.changed.wait_for(lambda: self._view_locked() != since or self._stopped, timeout=timeout_s)

    def _view_locked(self) -> MemberView:
        return MemberView(self._joined, self._epoch, self._assignment, self._fenced, self._error)

    def leave(self, *, static: bool = False, send: bool = True) -> None:
        """Stop heartbeating and leave the group (best effort: one try).  ``send=False``
        stops without a word: to the group the member died (its session expires)."""
        with self.changed:
            self._stopped = True
            self.changed.notify_all()
            thread, self._thread = self._thread, None
            joined = self._epoch > 0 or self._joined
        if thread is not None:
            thread.join(timeout=self.rpc.timeout_s)
        if not joined or not send:
            return
        epoch = -2 if static and self.instance_id else -1
        try:
            self.rpc.call(self.group_id, "ConsumerGroupHeartbeat", gpb.ConsumerGroupHeartbeatRequest(
                group_id=self.group_id, member_id=self.member_id, member_epoch=epoch, instance_id=self.instance_id),
                deadline_s=min(5.0, self.rpc.timeout_s))
        except SparkLogError as exc:
            log.info("leaving group %s: %s (its session will expire instead)", self.group_id, exc)

    # -- the heartbeat thread ---------------------------------------------------------------

    def _run(self) -> None:
        backoff = 0.05
        while True:
            with self.changed:
                while not self._stopped and (self._fenced or self._error is not None
                                             or time.monotonic() < self._due):
                    wait = None if (self._fenced or self._error is not None) else self._due - time.monotonic()
                    self.changed.wait(wait)
                if self._stopped:
                    return
                stuck = time.monotonic() - self._polled > self.rebalance_timeout_ms / 1000 and self._epoch > 0
                request = self._request()
                self._due = time.monotonic() + self._interval_ms / 1000  # set_owned brings it forward
            if stuck:
                self._leave_stuck()
                continue
            try:
                answer: gpb.ConsumerGroupHeartbeatResponse = self.rpc.once(
                    self.group_id, "ConsumerGroupHeartbeat", request,
                    timeout_s=max(0.5, min(self.rpc.timeout_s, self.session_timeout_ms / 2000)))
            except (errors.FencedMemberEpochError, errors.UnknownMemberIdError) as exc:
                log.info("member %s of group %s fenced: %s", self.member_id, self.group_id, exc)
                self.fence()
                continue
            except SparkLogError as exc:
                if exc.retriable:
                    with self.changed:
                        self._due = time.monotonic() + backoff
                    backoff = min(backoff * 2, 1.0)
                    continue
                log.warning("group %s refused member %s: %s", self.group_id, self.member_id, exc)
                with self.changed:
                    self._error = exc
                    self.changed.notify_all()
                continue
            backoff = 0.05
            self._on_answer(request, answer)

    def _leave_stuck(self) -> None:
        log.warning("member %s of group %s did not poll for %d ms (max_poll_interval_ms): leaving the group; "
                    "it rejoins at its next poll", self.member_id, self.group_id, self.rebalance_timeout_ms)
        try:
            self.rpc.once(self.group_id, "ConsumerGroupHeartbeat", gpb.ConsumerGroupHeartbeatRequest(
                group_id=self.group_id, member_id=self.member_id, member_epoch=-1, instance_id=self.instance_id))
        except SparkLogError as exc:
            log.info("leaving group %s: %s (its session will expire instead)", self.group_id, exc)
        self.fence()

    def _request(self) -> gpb.ConsumerGroupHeartbeatRequest:
        subscription = self._subscription
        return gpb.ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self._epoch,
            instance_id=self.instance_id, rebalance_timeout_ms=self.rebalance_timeout_ms,
            session_timeout_ms=self.session_timeout_ms, subscribed_topic_names=list(subscription.topics),
            subscribed_topic_regex=subscription.pattern, server_assignor=self.assignor,
            owned=_partitions_pb(self._owned), client_id=self.client_id, client_host=self._host)

    def _on_answer(self, request: gpb.ConsumerGroupHeartbeatRequest,
                   answer: gpb.ConsumerGroupHeartbeatResponse) -> None:
        assignment = frozenset((tp.topic, int(p)) for tp in answer.assignment for p in tp.partitions)
        with self.changed:
            if self._fenced or self._stopped or request.member_epoch != self._epoch:
                return  # a rejoin happened meanwhile: this answer is about an older life
            self._interval_ms = max(1, int(answer.heartbeat_interval_ms) or self._interval_ms)
            if self._due != 0.0:  # not brought forward while the call was out
                self._due = time.monotonic() + self._interval_ms / 1000
            if (answer.member_epoch, assignment) != (self._epoch, self._assignment) or not self._joined:
                self._epoch, self._assignment, self._joined = int(answer.member_epoch), assignment, True
                self.changed.notify_all()
