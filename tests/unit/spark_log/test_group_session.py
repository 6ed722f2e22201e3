"""``GroupSession`` commits against the real pure coordinator core (``GroupShard``) behind
an in-process fake ``GroupRpc``: which refused commits fence the member, and the order of
commits.  The fake can hold the first ``OffsetCommit`` back, to play a slow commit
(retrying while the coordinator moves, or queued behind another)."""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Iterable, Iterator, Mapping

import pytest

from brokers.groups.core import GroupShard
from brokers.groups.messages import Heartbeat
from brokers.groups.model import GroupConfig, Subscription
from brokers.groups.records import GroupRecord
from brokers.groups.service import _commit_of, from_pb_partitions, to_pb_partitions
from spark_log import errors
from spark_log._group_member import GroupSubscription
from spark_log._group_session import GroupSession
from spark_log.proto import groups_pb2 as gpb
from tests.support.wait import wait_until

TopicPartition = tuple[str, int]
TOPICS = {"t": ("id-t", 2)}
P0, P1 = ("t", 0), ("t", 1)


class FakeRpc:
    """``GroupRpc`` answered by a ``GroupShard`` in this process, on the monotonic clock."""

    timeout_s = 5.0

    def __init__(self) -> None:
        self.shard = GroupShard(config=GroupConfig(min_session_timeout_ms=100, heartbeat_interval_ms=50,
                                                   reconciling_heartbeat_interval_ms=20))
        self.lock = threading.Lock()
        self.hold_first_commit = threading.Event()
        self.holding = threading.Event()  # the held commit is waiting
        self.release = threading.Event()
        self.commits = 0

    def now(self) -> int:
        return int(time.monotonic() * 1000)

    def join(self, member_id: str) -> None:
        """Another member joins the group (it never heartbeats again in these tests)."""
        with self.lock:
            out = self.shard.heartbeat(Heartbeat(group_id="g", member_id=member_id, member_epoch=0,
                                                 subscription=Subscription(("t",)), owned=frozenset(),
                                                 session_timeout_ms=3000), self.now(), TOPICS)
            self.shard.finish(out, self.now())

    def committed(self, tp: TopicPartition) -> int:
        with self.lock:
            return self.shard.fetch_offsets("g", [tp])[tp].offset

    def _heartbeat(self, request: gpb.ConsumerGroupHeartbeatRequest) -> gpb.ConsumerGroupHeartbeatResponse:
        hb = Heartbeat(group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
                       instance_id=request.instance_id,
                       subscription=Subscription(tuple(sorted(set(request.subscribed_topic_names))),
                                                 request.subscribed_topic_regex),
                       assignor=request.server_assignor, owned=from_pb_partitions(request.owned),
                       rebalance_timeout_ms=request.rebalance_timeout_ms or 1,
                       session_timeout_ms=request.session_timeout_ms)
        with self.lock:
            out = self.shard.heartbeat(hb, self.now(), TOPICS)
            self.shard.finish(out, self.now())
        a = out.answer
        return gpb.ConsumerGroupHeartbeatResponse(member_id=a.member_id, member_epoch=a.member_epoch,
                                                  heartbeat_interval_ms=a.heartbeat_interval_ms,
                                                  assignment=to_pb_partitions(a.assignment))

    def _commit(self, request: gpb.OffsetCommitRequest) -> gpb.OffsetCommitResponse:
        with self.lock:
            self.commits += 1
            hold = self.commits == 1 and self.hold_first_commit.is_set()
        if hold:
            self.holding.set()
            assert self.release.wait(10), "the held commit was never released"
        with self.lock:
            out = self.shard.commit_offsets(_commit_of(request, transactional=False), wall_ms=1, topics=TOPICS)
            self.shard.finish(out, self.now())
        return gpb.OffsetCommitResponse()

    def call(self, group_id: str, method: str, request: Any, **_: Any) -> Any:
        if method == "ConsumerGroupHeartbeat":
            return self._heartbeat(request)
        if method == "OffsetCommit":
            return self._commit(request)
        if method == "OffsetFetch":
            return gpb.OffsetFetchResponse()
        raise AssertionError(method)

    def once(self, group_id: str, method: str, request: Any, **_: Any) -> Any:
        return self.call(group_id, method, request)


class Hooks:
    """The consumer's fetching side: every partition taken is at position 10."""

    def __init__(self) -> None:
        self.positions: dict[TopicPartition, int] = {}

    def _take_partitions(self, positions: Mapping[TopicPartition, int | None]) -> None:
        for tp in positions:
            self.positions[tp] = 10

    def _drop_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.positions.pop(tp, None)

    def _consumed_positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.positions[tp] for tp in partitions if tp in self.positions}


def _session(rpc: FakeRpc, hooks: Hooks | None = None) -> GroupSession:
    return GroupSession(hooks or Hooks(), rpc, group_id="g", enable_auto_commit=False,  # type: ignore[arg-type]
                        auto_commit_interval_ms=5000, session_timeout_ms=3000, rebalance_timeout_ms=60_000,
                        instance_id=None, assignor=None, client_id="c")


def _poll_until(session: GroupSession, condition: Any, what: str, timeout_s: float = 10.0) -> None:
    """Poll (each ``before_poll`` waits up to 50 ms for the membership to change) until
    ``condition()``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        session.before_poll(0.05)


@pytest.fixture()
def rpc() -> Iterator[FakeRpc]:
    fake = FakeRpc()
    yield fake
    fake.release.set()


def test_a_stale_async_commit_fails_alone_and_the_member_keeps_its_partitions(rpc: FakeRpc) -> None:
    """An async commit made at epoch E reaches the coordinator after the member gave up a
    partition and moved to a later epoch: the coordinator refuses it (an old epoch naming a
    partition the member no longer owns), and that commit fails; the member, current and
    alive, keeps its partitions (found by a review: every such refusal fenced the member,
    which dropped everything and rejoined)."""
    session = _session(rpc)
    revoked: list[list[TopicPartition]] = []
    session.subscribe(GroupSubscription(topics=("t",)), None, revoked.append)
    try:
        _poll_until(session, lambda: session.owned == {P0, P1}, "the first assignment")
        epoch = session.membership.epoch
        rpc.hold_first_commit.set()
        stale = session.commit_async()  # both partitions at epoch E, held in flight
        assert rpc.holding.wait(10)
        rpc.join("other")  # this member must give up one partition
        _poll_until(session, lambda: len(session.owned) == 1, "the revocation")
        kept = session.owned
        _poll_until(session, lambda: session.membership.epoch > epoch, "the next epoch")
        revoked.clear()

        rpc.release.set()
        with pytest.raises(errors.FencedMemberEpochError):
            stale.result(timeout=10)
        session.before_poll(0)
        assert not session.membership.view().fenced
        assert revoked == [] and session.owned == kept
    finally:
        session.membership.leave(send=False)
        session._committer.shutdown(wait=True)


def test_a_commit_refused_at_the_current_epoch_still_fences(rpc: FakeRpc) -> None:
    """The other side: a commit refused although it carried the member's current epoch
    (here: the coordinator expired the member) means the member itself is fenced: it drops
    its partitions and rejoins."""
    session = _session(rpc)
    session.subscribe(GroupSubscription(topics=("t",)), None, None)
    try:
        _poll_until(session, lambda: session.owned == {P0, P1}, "the first assignment")
        with rpc.lock:  # the coordinator expired the member without it knowing yet
            group = rpc.shard.group("g")
            assert group is not None
            rpc.shard.apply(GroupRecord("g", dataclasses.replace(group, members={})), rpc.now())
        with pytest.raises(errors.UnknownMemberIdError):
            session.commit({P0: 3})
        assert session.membership.view().fenced
    finally:
        session.membership.leave(send=False)
        session._committer.shutdown(wait=True)


def test_a_sync_commit_waits_for_earlier_async_commits(rpc: FakeRpc) -> None:
    """``commit`` after ``commit_async``: the async commit, slower, must not land after the
    sync one and move the committed offset back (found by a review: the sync commit went
    straight out; Kafka's commitSync completes the earlier async commits first)."""
    session = _session(rpc)
    session.manual(frozenset({P0}))
    rpc.hold_first_commit.set()
    try:
        earlier = session.commit_async({P0: 5})
        assert rpc.holding.wait(10)
        done = threading.Event()

        def commit_sync() -> None:
            session.commit({P0: 10})
            done.set()
        sync = threading.Thread(target=commit_sync)
        sync.start()
        # either the sync commit went out (and completed) or it is queued behind the held one;
        # the executor's queue is the only place that shows the latter
        wait_until(lambda: done.is_set() or session._committer._work_queue.qsize() > 0, timeout=10,
                   message="the sync commit neither completed nor queued")
        rpc.release.set()
        earlier.result(timeout=10)
        sync.join(10)
        assert done.is_set() and rpc.committed(P0) == 10
    finally:
        session._committer.shutdown(wait=True)


def test_commit_in_an_async_commits_callback_sends_at_once(rpc: FakeRpc) -> None:
    """A callback runs on the commit thread: a ``commit`` there must not queue behind
    itself and wait forever."""
    session = _session(rpc)
    session.manual(frozenset({P0}))
    try:
        future = session.commit_async({P0: 5}, callback=lambda offsets, error: session.commit({P0: 6}))
        future.result(timeout=10)
        assert rpc.committed(P0) == 6
    finally:
        session._committer.shutdown(wait=True)


def test_commit_in_on_revoked_during_poll(rpc: FakeRpc) -> None:
    """``on_revoked`` runs on the poll thread, mid-reconciliation: its ``commit`` goes
    through the commit thread and returns."""
    session = _session(rpc)
    session.subscribe(GroupSubscription(topics=("t",)), None,
                      lambda revoked: session.commit({tp: 7 for tp in revoked}))
    try:
        _poll_until(session, lambda: session.owned == {P0, P1}, "the first assignment")
        rpc.join("other")
        _poll_until(session, lambda: len(session.owned) == 1, "the revocation")
        (given_up,) = {P0, P1} - session.owned
        assert rpc.committed(given_up) == 7
    finally:
        session.membership.leave(send=False)
        session._committer.shutdown(wait=True)
