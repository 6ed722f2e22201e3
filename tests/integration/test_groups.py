"""Consumer groups through the public clients against the shared 3-broker cluster (issue 13):
membership and incremental reassignment, commits and fencing, static members, patterns,
partition-count changes, pause/resume, max_poll_records, the Admin operations, the
internal topic's protections and bad input.  Member processes, kill -9 and coordinator
failover: tests/fault/test_group_failover.py; the CLI: test_groups_cli.py.

Adds about 25 s.
"""
from __future__ import annotations

import datetime as dt
import re
import threading
import time
import uuid
from typing import Callable, Iterator

import grpc
import pytest

from spark_log import Admin, Consumer, OffsetAndMetadata, Producer
from spark_log import errors
from spark_log.proto import groups_pb2 as gpb
from spark_log.proto import groups_pb2_grpc as gstub
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

TopicPartition = tuple[str, int]


@pytest.fixture()
def group() -> str:
    return f"group-{uuid.uuid4().hex[:8]}"


@pytest.fixture()
def admin(bootstrap: str) -> Iterator[Admin]:
    with Admin(bootstrap) as client:
        yield client


def _topic(admin: Admin, name: str, partitions: int = 6, records: int = 0) -> None:
    admin.create_topic(name, partitions=partitions, replication_factor=3)
    if records:
        with Producer(admin._cluster.bootstrap) as producer:
            for n in range(records):
                producer.send(name, f"r{n}".encode(), key=str(n).encode())
            producer.flush()


class Polling:
    """A consumer polled on its own thread (a member makes progress only when it polls)."""

    def __init__(self, consumer: Consumer, name: str) -> None:
        self.consumer, self.name = consumer, name
        self.events: list[tuple[str, list[TopicPartition]]] = []
        self.records: list[tuple[TopicPartition, int]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def subscribe(self, topics: object) -> "Polling":
        self.consumer.subscribe(topics,  # type: ignore[arg-type]
                                on_assigned=lambda ps: self.events.append(("assigned", ps)),
                                on_revoked=lambda ps: self.events.append(("revoked", ps)))
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for record in self.consumer.poll(0.1):
                    with self._lock:
                        self.records.append(((record.topic, record.partition), record.offset))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def owned(self) -> set[TopicPartition]:
        return set(self.consumer.assignment())

    def stop(self, *, close: bool = True) -> None:
        self._stop.set()
        self.thread.join(timeout=30)
        if close:
            self.consumer.close()


def _converged(members: list[Polling], partitions: set[TopicPartition]) -> bool:
    owned = [tp for m in members for tp in m.owned()]
    for m in members:
        assert m.error is None, f"{m.name} failed: {m.error!r}"
    return len(owned) == len(set(owned)) and set(owned) == partitions


def _member(bootstrap: str, group: str, **kwargs: object) -> Consumer:
    options: dict[str, object] = dict(group_id=group, session_timeout_ms=4000, auto_offset_reset="earliest")
    options.update(kwargs)
    return Consumer(bootstrap, **options)  # type: ignore[arg-type]


def test_subscribe_poll_commit_committed_describe_and_leave(bootstrap: str, admin: Admin, topic_name: str,
                                                            group: str) -> None:
    _topic(admin, topic_name, records=300)
    events: list[tuple[str, list[TopicPartition]]] = []
    with _member(bootstrap, group, enable_auto_commit=False) as consumer:
        consumer.subscribe([topic_name], on_assigned=lambda ps: events.append(("assigned", ps)))
        got: list[int] = []
        def more() -> bool:
            got.extend(r.offset for r in consumer.poll(0.2))
            return len(got) >= 300

        wait_until(more, timeout=60,
                   message=lambda: f"consumed {len(got)} of 300")
        assert events == [("assigned", [(topic_name, p) for p in range(6)])]
        assert consumer.committed() == {(topic_name, p): None for p in range(6)}
        consumer.commit(metadata="batch-1")
        committed = consumer.committed()
        assert sum(o.offset for o in committed.values() if o is not None) == 300
        assert {o.metadata for o in committed.values() if o is not None} == {"batch-1"}
        future = consumer.commit_async({(topic_name, 0): OffsetAndMetadata(1, "async")})
        future.result(timeout=30)
        assert consumer.committed([(topic_name, 0)])[(topic_name, 0)] == OffsetAndMetadata(
            1, "async", consumer.committed([(topic_name, 0)])[(topic_name, 0)].commit_timestamp_ms)  # type: ignore[union-attr]
        d = admin.describe_group(group)
        assert d.state == "Stable" and len(d.members) == 1 and d.members[0].subscribed_topics == (topic_name,)
        assert d.partitions[(topic_name, 0)].lag == d.partitions[(topic_name, 0)].log_end_offset - 1  # type: ignore[operator]
        assert sum(p.lag or 0 for tp, p in d.partitions.items() if tp != (topic_name, 0)) == 0
        assert all(p.member_id == d.members[0].member_id for p in d.partitions.values())
        assert any(g.group_id == group and g.members == 1 for g in admin.list_groups())
    d = admin.describe_group(group)  # close() left the group
    assert d.state == "Empty" and not d.members


def test_members_share_partitions_and_keep_what_does_not_move(bootstrap: str, admin: Admin, topic_name: str,
                                                              group: str) -> None:
    _topic(admin, topic_name)
    everything = {(topic_name, p) for p in range(6)}
    a = Polling(_member(bootstrap, group), "a").subscribe([topic_name])
    b: Polling | None = None
    c: Polling | None = None
    try:
        wait_until(lambda: _converged([a], everything), timeout=30, message="a alone")
        b = Polling(_member(bootstrap, group), "b").subscribe([topic_name])
        c = Polling(_member(bootstrap, group), "c").subscribe([topic_name])
        wait_until(lambda: _converged([a, b, c], everything) and all(len(m.owned()) == 2 for m in (a, b, c)),
                   timeout=30, message=lambda: f"three: {[sorted(m.owned()) for m in (a, b, c)]}")
        kept = {m.name: m.owned() for m in (a, c)}
        revocations = {m.name: len([e for e in m.events if e[0] == "revoked"]) for m in (a, c)}
        b.stop()  # leaves the group
        wait_until(lambda: _converged([a, c], everything) and all(len(m.owned()) == 3 for m in (a, c)),
                   timeout=30, message=lambda: f"after b left: {[sorted(m.owned()) for m in (a, c)]}")
        for m in (a, c):  # the survivors kept theirs and only gained
            assert kept[m.name] <= m.owned()
            assert len([e for e in m.events if e[0] == "revoked"]) == revocations[m.name]
        d = admin.describe_group(group)
        assert d.state == "Stable" and d.assignor == "uniform" and len(d.members) == 2
    finally:
        for left in (a, b, c):
            if left is not None and left.thread.is_alive():
                left.stop()


def test_a_fenced_members_commit_is_a_typed_error_and_it_rejoins(bootstrap: str, admin: Admin, topic_name: str,
                                                                 group: str) -> None:
    _topic(admin, topic_name, partitions=2)
    consumer = _member(bootstrap, group, enable_auto_commit=False)
    try:
        consumer.subscribe([topic_name])
        wait_until(lambda: consumer.poll(0.1) is not None and len(consumer.assignment()) == 2, timeout=30,
                   message="never assigned")
        member_id = consumer._group.membership.member_id  # type: ignore[union-attr]
        coordinator = admin._groups.rpc.coordinator(group)
        with grpc.insecure_channel(coordinator) as channel:  # the coordinator removes it (as a session expiry would)
            gstub.GroupCoordinatorStub(channel).ConsumerGroupHeartbeat(gpb.ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member_id, member_epoch=-1), timeout=10)
        with pytest.raises(errors.FencedMemberEpochError) as raised:
            consumer.commit({(topic_name, 0): 1})
        assert isinstance(raised.value, errors.UnknownMemberIdError)
        assert consumer.committed([(topic_name, 0)]) == {(topic_name, 0): None}
        # the next polls drop the lost partitions and rejoin: the member gets them back
        wait_until(lambda: consumer.poll(0.1) is not None and len(consumer.assignment()) == 2
                   and admin.describe_group(group).state == "Stable", timeout=30, message="never rejoined")
        consumer.commit({(topic_name, 0): 1})
        assert consumer.committed([(topic_name, 0)])[(topic_name, 0)].offset == 1  # type: ignore[union-attr]
    finally:
        consumer.close()


def test_static_member_restart_gets_its_partitions_back_without_reassignment(
        bootstrap: str, admin: Admin, topic_name: str, group: str) -> None:
    _topic(admin, topic_name)
    everything = {(topic_name, p) for p in range(6)}
    a = Polling(_member(bootstrap, group, session_timeout_ms=20_000), "a").subscribe([topic_name])
    s = Polling(_member(bootstrap, group, group_instance_id="static-1", session_timeout_ms=20_000), "s")
    s.subscribe([topic_name])
    restarted = None
    try:
        wait_until(lambda: _converged([a, s], everything) and len(a.owned()) == 3, timeout=30, message="two members")
        epoch, mine, events = admin.describe_group(group).group_epoch, s.owned(), list(a.events)
        s.stop()  # close(): a static member leaves for a restart (epoch -2)
        assert admin.describe_group(group).members[-1].state in ("Left", "Stable")
        restarted = Polling(_member(bootstrap, group, group_instance_id="static-1", session_timeout_ms=20_000), "s2")
        restarted.subscribe([topic_name])
        wait_until(lambda: restarted.owned() == mine, timeout=30, message="the restart did not get its partitions")
        d = admin.describe_group(group)
        assert d.group_epoch == epoch and {m.instance_id for m in d.members} == {None, "static-1"}
        assert a.events == events, "the other member's partitions moved"
    finally:
        for m in (a, s, restarted):
            if m is not None and m.thread.is_alive():
                m.stop()


def test_pattern_subscription_and_partition_count_changes_reassign(bootstrap: str, admin: Admin, group: str) -> None:
    prefix = f"pat{uuid.uuid4().hex[:6]}"
    _topic(admin, f"{prefix}-a", partitions=2)
    member = Polling(_member(bootstrap, group), "m").subscribe(re.compile(re.escape(prefix) + r"-.*"))
    try:
        wait_until(lambda: member.owned() == {(f"{prefix}-a", 0), (f"{prefix}-a", 1)}, timeout=30, message="pattern")
        _topic(admin, f"{prefix}-b", partitions=1)
        wait_until(lambda: (f"{prefix}-b", 0) in member.owned(), timeout=30, message="a new matching topic")
        admin.delete_topic(f"{prefix}-a")
        _topic(admin, f"{prefix}-a", partitions=4)  # re-created with more partitions
        wait_until(lambda: member.owned() == {(f"{prefix}-a", p) for p in range(4)} | {(f"{prefix}-b", 0)},
                   timeout=30, message=lambda: f"after the partition count change: {sorted(member.owned())}")
    finally:
        member.stop()


def test_pause_resume_and_max_poll_records(bootstrap: str, admin: Admin, topic_name: str, group: str) -> None:
    _topic(admin, topic_name, partitions=2, records=100)
    seen: list[tuple[int, int]] = []

    def poll(consumer: Consumer) -> int:
        batch = consumer.poll(0.1)
        assert len(batch) <= 7
        seen.extend((r.partition, r.offset) for r in batch)
        return len(batch)

    with _member(bootstrap, group, max_poll_records=7, enable_auto_commit=False, fetch_max_wait_ms=100) as consumer:
        consumer.subscribe([topic_name])
        consumer.pause([])  # nothing assigned yet: nothing to pause
        wait_until(lambda: poll(consumer) >= 0 and len(consumer.assignment()) == 2, timeout=30,
                   message="never assigned")
        paused = (topic_name, 0)
        consumer.pause([paused])
        assert consumer.paused() == [paused]
        before = len(seen)
        for _ in range(10):
            poll(consumer)
        assert {p for p, _ in seen[before:]} <= {1}
        assert len({o for p, o in seen if p == 1}) == consumer.position(topic_name, 1)
        consumer.resume([paused])
        wait_until(lambda: poll(consumer) >= 0 and len(seen) >= 100, timeout=30,
                   message=lambda: f"{len(seen)} of 100 after resume")
        assert len(seen) == len(set(seen)) == 100
        consumer.commit()
        assert sum(o.offset for o in consumer.committed().values() if o is not None) == 100


def test_assign_mode_commits_as_a_memberless_group(bootstrap: str, admin: Admin, topic_name: str, group: str) -> None:
    _topic(admin, topic_name, partitions=2, records=20)
    with Consumer(bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.assign([(topic_name, 0), (topic_name, 1)])
        wait_until(lambda: consumer.poll(0.1) is not None and consumer.position(topic_name, 0) + consumer.position(
            topic_name, 1) == 20, timeout=30, message="not read")
        consumer.commit()
    assert sum(o.offset for o in admin.list_group_offsets(group).values()) == 20
    member = _member(bootstrap, group)
    try:
        member.subscribe([topic_name])
        wait_until(lambda: member.poll(0.1) is not None and len(member.assignment()) == 2, timeout=30, message="join")
        assert member.position(topic_name, 0) + member.position(topic_name, 1) == 20  # starts at the committed offsets
        with Consumer(bootstrap, group_id=group) as simple:
            simple.assign([(topic_name, 0)])
            with pytest.raises(errors.NonEmptyGroupError):
                simple.commit({(topic_name, 0): 0})
    finally:
        member.close()


def test_admin_offsets_resets_and_deletes(bootstrap: str, admin: Admin, topic_name: str, group: str) -> None:
    _topic(admin, topic_name, partitions=2, records=40)
    ends = admin.list_offsets(topic_name, "latest")
    admin.alter_group_offsets(group, {(topic_name, 0): (3, "by hand"), (topic_name, 1): 4})
    assert admin.list_group_offsets(group)[(topic_name, 0)].metadata == "by hand"
    assert admin.reset_group_offsets(group, topic_name, shift_by=-10) == {(topic_name, 0): 0, (topic_name, 1): 0}
    plan = admin.reset_group_offsets(group, topic_name, to="latest", execute=False)
    assert plan == {(topic_name, p): ends[p] for p in range(2)}
    assert admin.list_group_offsets(group)[(topic_name, 1)].offset == 0  # a dry run changed nothing
    admin.reset_group_offsets(group, topic_name, to_offset=10_000, partitions=[1])
    assert admin.list_group_offsets(group)[(topic_name, 1)].offset == ends[1]  # clamped to the log end
    admin.reset_group_offsets(group, topic_name, to="earliest")
    assert {o.offset for o in admin.list_group_offsets(group).values()} == {0}
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    assert admin.reset_group_offsets(group, topic_name, to=future) == {(topic_name, p): ends[p] for p in range(2)}
    past = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)
    assert admin.reset_group_offsets(group, topic_name, to=past) == {(topic_name, 0): 0, (topic_name, 1): 0}
    described = admin.describe_group(group)
    assert described.state == "Empty" and described.total_lag == sum(ends.values())
    with pytest.raises(errors.InvalidRequestError):
        admin.reset_group_offsets(group, topic_name)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        admin.reset_group_offsets(group, topic_name, to="earliest", partitions=[7])
    # with a live member: resets, alterations and deletes are refused
    member = _member(bootstrap, group)
    try:
        member.subscribe([topic_name])
        wait_until(lambda: member.poll(0.1) is not None and member.assignment(), timeout=30, message="join")
        with pytest.raises(errors.NonEmptyGroupError):
            admin.reset_group_offsets(group, topic_name, to="earliest")
        with pytest.raises(errors.NonEmptyGroupError):
            admin.reset_group_offsets(group, topic_name, to="earliest", execute=False)
        with pytest.raises(errors.NonEmptyGroupError):
            admin.alter_group_offsets(group, {(topic_name, 0): 1})
        with pytest.raises(errors.NonEmptyGroupError):
            admin.delete_group(group)
        with pytest.raises(errors.GroupSubscribedToTopicError):
            admin.delete_group_offsets(group, topic_name)
    finally:
        member.close()
    assert admin.delete_group_offsets(group, topic_name, [0]) == [(topic_name, 0)]
    assert set(admin.list_group_offsets(group)) == {(topic_name, 1)}
    admin.delete_group(group)
    with pytest.raises(errors.GroupIdNotFoundError):
        admin.describe_group(group)
    assert group not in {g.group_id for g in admin.list_groups()}


def test_internal_topic_is_protected(bootstrap: str, admin: Admin, topic_name: str, group: str) -> None:
    _topic(admin, topic_name, partitions=1)
    with Consumer(bootstrap, group_id=group) as consumer:  # the first group request creates the internal topic
        assert consumer.committed([(topic_name, 0)]) == {(topic_name, 0): None}
    wait_until(lambda: "__consumer_offsets" in admin.list_topics(), timeout=30, message="no internal topic")
    described = admin.describe_topic("__consumer_offsets", live=False)
    assert described.config["cleanup.policy"] == "compact" and described.config["retention.ms"] == "-1"
    assert described.replication_factor == 3
    with pytest.raises(errors.InvalidTopicError):
        admin.delete_topic("__consumer_offsets")
    with pytest.raises(errors.InvalidTopicError):
        admin.create_topic("__consumer_offsets")
    with Producer(bootstrap) as producer:
        with pytest.raises(errors.InvalidTopicError):
            producer.send("__consumer_offsets", b"x", partition=0).result(timeout=30)


@pytest.mark.parametrize("make,error", [
    (lambda b: Consumer(b, enable_auto_commit=True), errors.InvalidConfigError),
    (lambda b: Consumer(b, group_id="g", max_poll_records=0), errors.InvalidConfigError),
    (lambda b: Consumer(b, group_id=""), errors.InvalidGroupIdError),
    (lambda b: Consumer(b).commit(), errors.InvalidConfigError),
    (lambda b: Consumer(b).subscribe(["t"]), errors.InvalidConfigError),
    (lambda b: Consumer(b, group_id="g").subscribe([]), errors.InvalidRequestError),
    (lambda b: Consumer(b, group_id="g").commit({("no-such-topic", 0): 1}), errors.UnknownTopicOrPartitionError),
    (lambda b: Consumer(b, group_id="g").commit({("t", 0): "x"}), errors.InvalidRequestError),  # type: ignore[dict-item]
    (lambda b: Admin(b).describe_group("never-seen-" + uuid.uuid4().hex), errors.GroupIdNotFoundError),
])
def test_bad_input_gets_typed_errors(bootstrap: str, make: Callable[[str], object], error: type[Exception]) -> None:
    with pytest.raises(error):
        make(bootstrap)


def test_unsupported_session_timeout_is_raised_by_poll(bootstrap: str, admin: Admin, topic_name: str,
                                                       group: str) -> None:
    _topic(admin, topic_name, partitions=1)
    with _member(bootstrap, group, session_timeout_ms=10) as consumer:   # below the minimum
        consumer.subscribe([topic_name])
        deadline = time.monotonic() + 30
        with pytest.raises(errors.InvalidSessionTimeoutError):
            while time.monotonic() < deadline:
                consumer.poll(0.1)
    with pytest.raises(errors.InvalidConfigError):   # an assignor no coordinator knows: refused at once
        _member(bootstrap, group, group_remote_assignor="sticky")
    with pytest.raises(errors.GroupIdNotFoundError):  # refused joins left nothing behind
        admin.describe_group(group)


def test_a_member_that_stops_polling_leaves_and_rejoins(bootstrap: str, admin: Admin, topic_name: str,
                                                        group: str) -> None:
    """max_poll_interval_ms: a stuck poll loop gives its partitions away, the next poll rejoins."""
    _topic(admin, topic_name, partitions=2)
    stuck = _member(bootstrap, group, max_poll_interval_ms=1500)
    other = Polling(_member(bootstrap, group), "other").subscribe([topic_name])
    try:
        stuck.subscribe([topic_name])
        wait_until(lambda: stuck.poll(0.1) is not None and len(stuck.assignment()) == 1 and len(other.owned()) == 1,
                   timeout=30, message="two members never shared the partitions")
        wait_until(lambda: len(other.owned()) == 2, timeout=30, message="the stuck member kept its partition")
        assert len(admin.describe_group(group).members) == 1
        wait_until(lambda: stuck.poll(0.1) is not None and len(stuck.assignment()) == 1 and len(other.owned()) == 1,
                   timeout=30, message="the stuck member never rejoined")
    finally:
        other.stop()
        stuck.close()


def test_a_re_created_topic_starts_from_earliest_not_the_deleted_topics_offset(bootstrap: str, admin: Admin,
                                                                             group: str) -> None:
    """A group's committed offsets of a deleted topic never apply to a re-created topic of
    the same name (found by a review: its consumer found the old offset and skipped the new
    topic's first records; Kafka drops a deleted topic's offsets)."""
    topic = f"recreated-{uuid.uuid4().hex[:6]}"
    _topic(admin, topic, partitions=1, records=5)
    with Consumer(bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                  session_timeout_ms=4000) as consumer:
        consumer.subscribe([topic])
        got: list[int] = []
        wait_until(lambda: got.extend(r.offset for r in consumer.poll(0.2)) or len(got) >= 5, timeout=30,
                   message="the first incarnation's records")
        consumer.commit()
    assert admin.list_group_offsets(group)[(topic, 0)].offset == 5
    admin.delete_topic(topic)
    _topic(admin, topic, partitions=1, records=8)  # the new topic: offsets 0..7
    with Consumer(bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                  session_timeout_ms=4000) as consumer:
        consumer.subscribe([topic])
        values: list[bytes] = []
        wait_until(lambda: values.extend(r.value for r in consumer.poll(0.2)) or len(values) >= 3, timeout=30,
                   message="the re-created topic's records")
    assert values[:3] == [b"r0", b"r1", b"r2"], f"started at the deleted topic's offset: {values!r}"
