"""The group side of a ``Consumer`` with a ``group_id``: subscription, reconciliation,
commits, committed offsets.

Reconciliation runs on the poll thread (``before_poll``), so callbacks run there too and a
partition is never fetched by two members of a group at once:

1. Fenced by the coordinator: every owned partition is dropped (``on_revoked`` is told,
   nothing is committed: the commit would be refused), then the member rejoins.
2. Partitions owned but no longer in the coordinator's assignment are *revoked*: with
   ``enable_auto_commit`` their positions are committed (synchronously), ``on_revoked``
   runs, they stop being fetched (buffered records dropped) and the heartbeat reports it.
3. Partitions assigned and not owned are *taken*: their committed offsets are fetched
   (none: ``auto_offset_reset``), they start being fetched, ``on_assigned`` runs (it may
   ``seek``), and the heartbeat reports it.

Commits carry the member id and epoch (a zombie's commit is refused with
``FencedMemberEpochError``, which also makes the next poll drop everything and rejoin, if
the refused epoch is still the member's: a commit made at an older epoch, e.g. an async
commit that arrives after a revocation moved the member on, is only stale and fails alone);
a consumer that ``assign``-ed its partitions commits as a member-less group (refused
with ``NonEmptyGroupError`` while the group has members).  ``commit_async`` runs commits
in order on one background thread, and ``commit`` goes through that thread too, after
every earlier ``commit_async`` (an older commit never lands after a newer one); auto-commit
uses ``commit_async`` every ``auto_commit_interval_ms`` at the start of ``poll`` (the
positions after the records earlier polls returned: at-least-once when records are
processed between polls), and commits synchronously on revocation and on ``close``.

Thread-safety: the poll thread calls everything but ``commit_async``'s callback, which runs
on the commit thread.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Protocol

from . import errors
from ._group_client import GroupRpc
from ._group_member import GroupSubscription, Membership, MemberView
from .errors import InvalidRequestError, SparkLogError
from .proto import groups_pb2 as gpb

__all__ = ["GroupSession", "OffsetAndMetadata", "ConsumerHooks", "Callback"]

log = logging.getLogger(__name__)

_UNSTABLE_RETRY_S = 0.1  # how soon a read_committed member asks again for offsets a transaction holds

TopicPartition = tuple[str, int]
Callback = Callable[[list[TopicPartition]], None]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset: ``offset`` is the next record the group will read."""

    offset: int
    metadata: str = ""
    commit_timestamp_ms: int = -1


class ConsumerHooks(Protocol):
    """What the session needs from its consumer's fetching side."""

    def _take_partitions(self, positions: Mapping[TopicPartition, int | None]) -> None: ...
    def _drop_partitions(self, partitions: Iterable[TopicPartition]) -> None: ...
    def _consumed_positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...


OffsetsArg = Mapping[TopicPartition, "int | OffsetAndMetadata | tuple[int, str]"]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """Who a consumer is in its group (``Consumer.group_metadata``), for
    ``Producer.send_offsets_to_transaction``: a consumer that ``assign``-ed its partitions
    has no member id (epoch -1)."""

    group_id: str
    member_id: str = ""
    member_epoch: int = -1


class GroupSession:
    """The group state of one consumer (module docstring)."""

    def __init__(self, hooks: ConsumerHooks, rpc: GroupRpc, *, group_id: str, enable_auto_commit: bool,
                 auto_commit_interval_ms: int, session_timeout_ms: int, rebalance_timeout_ms: int,
                 instance_id: str | None, assignor: str | None, client_id: str, require_stable: bool = False) -> None:
        if not isinstance(group_id, str) or not group_id:
            raise errors.InvalidGroupIdError(f"group_id must be a non-empty string, got {group_id!r}")
        self.group_id = group_id
        self._hooks = hooks
        self._rpc = rpc
        self._auto_commit = enable_auto_commit
        self._require_stable = require_stable  # read_committed: start only at offsets no open transaction holds
        self._interval_s = auto_commit_interval_ms / 1000
        self._next_commit = time.monotonic() + self._interval_s
        self.membership = Membership(rpc, group_id=group_id, member_id=uuid.uuid4().hex, instance_id=instance_id or "",
                                     session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
                                     assignor=assignor or "", client_id=client_id)
        self.subscribed = False
        self.owned: frozenset[TopicPartition] = frozenset()
        self._manual: frozenset[TopicPartition] = frozenset()
        self._on_assigned: Callback | None = None
        self._on_revoked: Callback | None = None
        self._committer_ident: int | None = None  # the commit thread, once it started
        self._committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"commit-{group_id}",
                                             initializer=self._mark_committer)

    # -- subscription -----------------------------------------------------------------------

    def metadata(self) -> ConsumerGroupMetadata:
        if not self.subscribed:
            return ConsumerGroupMetadata(self.membership.group_id)
        return ConsumerGroupMetadata(self.membership.group_id, self.membership.member_id, self.membership.epoch)

    def subscribe(self, subscription: GroupSubscription, on_assigned: Callback | None,
                  on_revoked: Callback | None) -> None:
        self._on_assigned, self._on_revoked = on_assigned, on_revoked
        self.subscribed = True
        self._manual = frozenset()
        self.membership.subscribe(subscription)

    def manual(self, partitions: frozenset[TopicPartition]) -> None:
        """The consumer ``assign``-ed these: no membership, member-less commits."""
        if self.subscribed:
            raise InvalidRequestError("this consumer subscribed to topics; unsubscribe (close) before assign()")
        self._manual = partitions

    def assignment(self) -> list[TopicPartition]:
        return sorted(self.owned if self.subscribed else self._manual)

    # -- the poll thread ---------------------------------------------------------------------

    def before_poll(self, timeout_s: float) -> None:
        """Reconcile with the coordinator (module docstring) and auto-commit when due.  With
        nothing owned yet, waits up to ``timeout_s`` for a first assignment."""
        if self.subscribed:
            self.membership.polled()
            view = self.membership.view()
            if not self.owned and not view.assignment and not view.fenced and view.error is None:
                self.membership.wait_for_change(timeout_s, view)
            if not self._reconcile():  # partitions to take wait for a transaction: ask again shortly
                self.membership.wait_for_change(min(timeout_s, _UNSTABLE_RETRY_S), view)
        if self._auto_commit and time.monotonic() >= self._next_commit:
            self._next_commit = time.monotonic() + self._interval_s
            positions = self._hooks._consumed_positions(self.assignment())
            if positions:
                self.commit_async({tp: o for tp, o in positions.items()}, callback=self._log_failure)

    def _reconcile(self) -> bool:
        """Follow the member's view; False when partitions it was given wait for an open
        transaction's offsets (``require_stable``)."""
        view: MemberView = self.membership.view()
        if view.error is not None:
            raise view.error
        if view.fenced:
            lost = sorted(self.owned)
            self._hooks._drop_partitions(lost)
            self.owned = frozenset()
            self.membership.rejoin()
            if lost and self._on_revoked is not None:
                self._on_revoked(lost)
            return True
        if not view.joined:
            return True
        revoked = sorted(self.owned - view.assignment)
        if revoked:
            try:
                if self._auto_commit:
                    self._commit_quietly(self._hooks._consumed_positions(revoked))
                if self._on_revoked is not None:
                    self._on_revoked(revoked)
            finally:
                self._hooks._drop_partitions(revoked)
                self.owned = self.owned - frozenset(revoked)
                self.membership.set_owned(self.owned)
        added = sorted(view.assignment - self.owned)
        if added:
            try:
                committed = self.committed(added, require_stable=self._require_stable)
            except errors.UnstableOffsetCommitError as exc:
                # an open transaction will commit offsets of these partitions (KIP-447): take
                # them at its offsets, not below them; the next poll asks again
                log.debug("group %s: %s", self.group_id, exc)
                return False
            self._hooks._take_partitions({tp: (c.offset if c is not None else None) for tp, c in committed.items()})
            self.owned = self.owned | frozenset(added)
            self.membership.set_owned(self.owned)
            if self._on_assigned is not None:
                self._on_assigned(added)
        return True

    # -- commits ----------------------------------------------------------------------------

    def _request(self, offsets: OffsetsArg, metadata: str) -> gpb.OffsetCommitRequest:
        parts = []
        for (topic, partition), value in sorted(offsets.items()):
            if isinstance(value, OffsetAndMetadata):
                offset, text = value.offset, value.metadata
            elif isinstance(value, tuple):
                offset, text = value
            else:
                offset, text = value, metadata
            if isinstance(offset, bool) or not isinstance(offset, int) or not isinstance(text, str):
                raise InvalidRequestError(f"offset of {topic}-{partition} must be an int (and metadata a str), got "
                                          f"{value!r}")
            parts.append(gpb.CommitPartition(topic=topic, partition=int(partition), offset=offset, metadata=text,
                                             leader_epoch=-1))
        if self.subscribed:
            return gpb.OffsetCommitRequest(group_id=self.group_id, member_id=self.membership.member_id,
                                           member_epoch=self.membership.epoch, partitions=parts)
        return gpb.OffsetCommitRequest(group_id=self.group_id, member_id="", member_epoch=-1, partitions=parts)

    def default_offsets(self) -> dict[TopicPartition, int]:
        return self._hooks._consumed_positions(self.assignment())

    def commit(self, offsets: OffsetsArg | None = None, *, metadata: str = "") -> None:
        """Commit ``offsets`` (default: the positions of every owned partition) and wait.

        It is queued behind every earlier ``commit_async`` (on the commit thread) and waits
        for them too, as Kafka's commitSync: an older async commit landing after it would
        move the committed offset back.  Called from a ``commit_async`` callback (on the
        commit thread, after the earlier commits) it sends at once."""
        chosen: OffsetsArg = self.default_offsets() if offsets is None else offsets
        if not chosen:
            return
        request = self._request(chosen, metadata)
        if threading.get_ident() == self._committer_ident:
            self._send(request)
            return
        try:
            queued = self._committer.submit(self._send, request)
        except RuntimeError:  # the commit thread has stopped (closed): nothing is queued before it
            self._send(request)
            return
        queued.result()

    def _mark_committer(self) -> None:
        self._committer_ident = threading.get_ident()

    def commit_async(self, offsets: OffsetsArg | None = None, *, metadata: str = "",
                     callback: Callable[[dict[TopicPartition, int], SparkLogError | None], None] | None = None
                     ) -> "Future[None]":
        """Queue a commit (in order, on the commit thread); the future fails with the typed error."""
        chosen: OffsetsArg = self.default_offsets() if offsets is None else offsets
        request = self._request(chosen, metadata)
        plain = {(p.topic, p.partition): p.offset for p in request.partitions}

        def run() -> None:
            error: SparkLogError | None = None
            try:
                if request.partitions:
                    self._send(request)
            except SparkLogError as exc:
                error = exc
            if callback is not None:
                callback(plain, error)
            if error is not None:
                raise error

        return self._committer.submit(run)

    def _log_failure(self, offsets: dict[TopicPartition, int], error: SparkLogError | None) -> None:
        if error is not None:
            log.warning("group %s: auto-commit of %d partition(s) failed: %s", self.group_id, len(offsets), error)

    def _send(self, request: gpb.OffsetCommitRequest) -> None:
        try:
            self._rpc.call(self.group_id, "OffsetCommit", request)
        except errors.FencedMemberEpochError as exc:
            if self.subscribed and not self.membership.fence_at(request.member_epoch):
                log.info("group %s: a commit made at member epoch %d was refused (the member is at %d now): %s",
                         self.group_id, request.member_epoch, self.membership.epoch, exc)
            raise

    def _commit_quietly(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        try:
            self.commit(offsets)
        except SparkLogError as exc:
            log.warning("group %s: committing revoked partitions failed: %s", self.group_id, exc)

    def committed(self, partitions: Iterable[TopicPartition] | None = None, *, require_stable: bool = False
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of ``partitions`` (default: the assignment); None where none.
        ``require_stable``: ``UnstableOffsetCommitError`` while an open transaction holds
        offsets of one of them."""
        wanted = sorted(set(partitions)) if partitions is not None else self.assignment()
        if not wanted:
            return {}
        answer: gpb.OffsetFetchResponse = self._rpc.call(self.group_id, "OffsetFetch", gpb.OffsetFetchRequest(
            group_id=self.group_id, partitions=[gpb.TopicPartitions(topic=t, partitions=[p]) for t, p in wanted],
            require_stable=require_stable))
        found = {(o.topic, o.partition): OffsetAndMetadata(o.offset, o.metadata, o.commit_timestamp_ms)
                 for o in answer.offsets}
        return {tp: found.get(tp) for tp in wanted}

    # -- the end -----------------------------------------------------------------------------

    def close(self) -> None:
        """Commit (auto-commit), tell ``on_revoked``, leave the group (a static member leaves
        for a restart, keeping its partitions for its session timeout), stop the commit thread."""
        try:
            if self._auto_commit:
                self._commit_quietly(self.default_offsets())
            if self.subscribed and self.owned and self._on_revoked is not None:
                self._on_revoked(sorted(self.owned))
        finally:
            if self.subscribed:
                self.membership.leave(static=True)
            self._committer.shutdown(wait=True)
