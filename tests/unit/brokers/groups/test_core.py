"""The pure group coordinator (brokers/groups/core.py): KIP-848 membership, incremental
moves, fencing, sessions, static members, reassignment triggers, offset commits.

The one-owner invariant (no partition owned, assigned or pending revocation, by two
members at once) is checked after every step by ``support.Driver``."""
from __future__ import annotations

import pytest

from brokers.groups.core import GroupShard
from brokers.groups.messages import LEAVE, STATIC_LEAVE, CommitOffsets, Heartbeat
from brokers.groups.model import CommittedOffset, GroupConfig, GroupState, MemberState, Subscription
from brokers.groups.records import GroupRecord, OffsetRecord, PendingRecord, decode, encode
from spark_log.errors import (
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    InvalidGroupIdError,
    InvalidRegularExpressionError,
    InvalidRequestError,
    InvalidSessionTimeoutError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
    UnsupportedAssignorError,
)

from .support import Driver, all_partitions

T6 = all_partitions("t", 6)


def test_first_member_gets_every_partition_at_epoch_one() -> None:
    d = Driver()
    answer = d.heartbeat("a")
    assert answer.member_epoch == 1 and answer.assignment == T6
    group = d.shard.group("g")
    assert group is not None and group.group_epoch == 1 and group.state is GroupState.STABLE
    assert [type(r) for r in d.log] == [GroupRecord]


def test_join_revokes_before_the_new_member_gets_anything() -> None:
    d = Driver()
    d.heartbeat("a")
    b = d.heartbeat("b")
    assert b.assignment == frozenset() and b.member_epoch == 2  # all six still owned by a
    group = d.shard.group("g")
    assert group is not None and group.members["b"].state is MemberState.UNRELEASED
    assert b.heartbeat_interval_ms <= d.shard.config.reconciling_heartbeat_interval_ms
    a = d.heartbeat("a")  # a learns it must give up three, keeps three, same epoch
    assert a.member_epoch == 1 and len(a.assignment) == 3
    assert d.shard.group("g").members["a"].state is MemberState.UNREVOKED  # type: ignore[union-attr]
    assert d.heartbeat("b").assignment == frozenset()  # a has not confirmed yet
    a = d.heartbeat("a")  # confirms (owns only the kept three): moves to epoch 2
    assert a.member_epoch == 2 and len(a.assignment) == 3
    b = d.heartbeat("b")
    assert b.assignment == T6 - a.assignment and d.shard.group("g").state is GroupState.STABLE  # type: ignore[union-attr]


def test_members_keep_what_does_not_move() -> None:
    d = Driver()
    d.converge("ab")
    before = {m: d.assigned(m) for m in "ab"}
    d.heartbeat("c")
    d.converge("abc")
    after = {m: d.assigned(m) for m in "abc"}
    assert after["a"] <= before["a"] and after["b"] <= before["b"]
    assert sorted(len(v) for v in after.values()) == [2, 2, 2]
    assert after["a"] | after["b"] | after["c"] == T6


def test_a_member_that_does_not_confirm_keeps_the_partition_from_others() -> None:
    d = Driver()
    d.heartbeat("a")
    d.heartbeat("b")
    d.heartbeat("a")  # asked to revoke
    for _ in range(3):  # a keeps reporting all six: nothing moves to b
        d.heartbeat("a", owned=T6)
        assert d.heartbeat("b").assignment == frozenset()


def test_wrong_epoch_is_fenced_and_unknown_member_is_unknown() -> None:
    d = Driver()
    d.heartbeat("a")
    with pytest.raises(FencedMemberEpochError):
        d.heartbeat("a", epoch=7)
    with pytest.raises(UnknownMemberIdError):
        d.heartbeat("zombie", epoch=3)
    assert issubclass(UnknownMemberIdError, FencedMemberEpochError)


def test_previous_epoch_with_owned_subset_is_a_lost_answer_not_a_zombie() -> None:
    d = Driver()
    d.converge("ab")
    d.heartbeat("c")
    d.converge("abc")
    epoch = d.epochs["a"]
    group = d.shard.group("g")
    assert group is not None
    previous = group.members["a"].previous_epoch
    answer = d.heartbeat("a", epoch=previous, owned=d.assigned("a"))
    assert answer.member_epoch == epoch


def test_fenced_member_rejoins_with_epoch_zero_and_gets_its_target_back() -> None:
    d = Driver()
    d.converge("ab")
    target = d.assigned("a")
    answer = d.heartbeat("a", epoch=0, owned=())
    assert answer.assignment == target  # no other member holds them: given at once
    group = d.shard.group("g")
    assert group is not None and group.group_epoch == 2  # membership did not change


def test_leave_moves_the_partitions_to_the_others() -> None:
    d = Driver()
    d.converge("abc")
    left = d.heartbeat("b", epoch=LEAVE)
    assert left.member_epoch == LEAVE
    d.converge("ac")
    assert d.assigned("a") | d.assigned("c") == T6 and len(d.assigned("a")) == 3


def test_session_timeout_removes_a_silent_member() -> None:
    d = Driver()
    d.converge("ab", session_ms=3000)
    d.now += 2000
    d.heartbeat("a", session_ms=3000)
    assert d.tick(999) == ()  # b's session ends 3000 ms after its last heartbeat
    expired = d.tick(1)
    assert len(expired) == 1
    group = d.shard.group("g")
    assert group is not None and set(group.members) == {"a"}
    d.heartbeat("a", session_ms=3000)
    assert d.assigned("a") == T6
    with pytest.raises(UnknownMemberIdError):
        d.heartbeat("b")


def test_revocation_timeout_removes_a_member_that_never_gives_up() -> None:
    d = Driver()
    d.heartbeat("a", rebalance_ms=2000, session_ms=60_000)
    d.heartbeat("b", session_ms=60_000)
    d.heartbeat("a", rebalance_ms=2000, session_ms=60_000)  # asked to revoke at t=0
    d.now += 1000
    d.heartbeat("a", owned=T6, rebalance_ms=2000, session_ms=60_000)  # alive, but does not revoke
    d.heartbeat("b", session_ms=60_000)
    assert d.tick(999) == ()
    assert len(d.tick(1)) == 1
    d.converge("b", session_ms=60_000)
    assert d.assigned("b") == T6


def test_a_second_revocation_gets_a_full_rebalance_timeout_of_its_own() -> None:
    """A member that confirms one revocation and is at once asked for another stays
    UNREVOKED; the new revocation gets a full rebalance timeout (found by a review: the
    first revocation's deadline was kept, and the member removed right after confirming
    everything it had been asked)."""
    d = Driver()
    d.heartbeat("a", rebalance_ms=5000, session_ms=60_000)  # a owns all 6
    d.heartbeat("b", rebalance_ms=5000, session_ms=60_000)
    d.heartbeat("a", rebalance_ms=5000, session_ms=60_000)  # asked to give up 3 at t=0: deadline 5000
    d.now = 4900
    d.heartbeat("b", rebalance_ms=5000, session_ms=60_000)
    d.heartbeat("c", rebalance_ms=5000, session_ms=60_000)  # c joins meanwhile
    d.heartbeat("a", rebalance_ms=5000, session_ms=60_000)  # a confirms, and must now give up one more
    group = d.shard.group("g")
    assert group is not None
    a = group.members["a"]
    assert a.state is MemberState.UNREVOKED and len(a.pending_revocation) == 1
    d.heartbeat("b", rebalance_ms=5000, session_ms=60_000)
    d.heartbeat("c", rebalance_ms=5000, session_ms=60_000)
    assert d.tick(200) == ()  # t=5100: past the first revocation's deadline
    assert d.tick(4799) == ()  # t=9899
    assert len(d.tick(1)) == 1  # t=9900: the second revocation's own timeout (asked at 4900)


def test_static_member_restart_keeps_its_partitions_without_a_new_target() -> None:
    d = Driver()
    d.converge("ab", instance="", session_ms=5000)
    for _ in range(4):
        d.converge("ab", session_ms=5000)
        d.heartbeat("s1", instance="static-1", session_ms=5000)
    group = d.shard.group("g")
    assert group is not None
    epoch, mine = group.group_epoch, d.assigned("s1")
    others = {m: d.assigned(m) for m in "ab"}
    assert d.heartbeat("s1", epoch=STATIC_LEAVE, instance="static-1").member_epoch == STATIC_LEAVE
    d.tick(4000)  # within its session
    answer = d.heartbeat("s1-restarted", epoch=0, owned=(), instance="static-1", session_ms=5000)
    assert answer.assignment == mine
    group = d.shard.group("g")
    assert group is not None and group.group_epoch == epoch and set(group.members) == {"a", "b", "s1-restarted"}
    d.converge("ab", session_ms=5000)
    assert {m: d.assigned(m) for m in "ab"} == others
    with pytest.raises(UnknownMemberIdError):  # the old member id is fenced
        d.heartbeat("s1", epoch=answer.member_epoch, instance="static-1")


def test_static_member_away_too_long_is_removed() -> None:
    d = Driver()
    d.converge("a", session_ms=5000)
    d.heartbeat("s", instance="i", session_ms=2000)
    d.heartbeat("s", epoch=STATIC_LEAVE, instance="i")
    assert d.tick(2000)
    group = d.shard.group("g")
    assert group is not None and set(group.members) == {"a"}


def test_a_killed_static_member_restarting_takes_its_place_back() -> None:
    """No -2 leave (kill -9): the restart with the same instance id replaces the member."""
    d = Driver()
    d.heartbeat("s", instance="i", session_ms=5000)
    d.converge(["s", "a"], session_ms=5000)
    mine = d.assigned("s")
    answer = d.heartbeat("s2", epoch=0, owned=(), instance="i", session_ms=5000)
    assert answer.assignment == mine


def test_subscription_change_bumps_the_epoch_and_reassigns() -> None:
    d = Driver()
    d.converge("ab", topics=("t",))
    epoch = d.shard.group("g").group_epoch  # type: ignore[union-attr]
    d.heartbeat("b", topics=("t", "u"))
    d.converge("a", topics=("t",))
    d.converge("b", topics=("t", "u"))
    d.converge("a", topics=("t",))
    group = d.shard.group("g")
    assert group is not None and group.group_epoch > epoch
    assert {tp for tp in d.assigned("b") if tp[0] == "u"} == all_partitions("u", 2)
    assert not {tp for tp in d.assigned("a") if tp[0] == "u"}


def test_pattern_picks_up_a_new_matching_topic() -> None:
    d = Driver()
    d.converge("a", topics=(), regex="logs-.*")
    assert d.assigned("a") == all_partitions("logs-a", 2) | all_partitions("logs-b", 1)
    d.topics["logs-c"] = ("id-lc", 3)
    d.topics["other"] = ("id-o", 1)
    d.converge("a", topics=(), regex="logs-.*")
    assert d.assigned("a") == (all_partitions("logs-a", 2) | all_partitions("logs-b", 1)
                               | all_partitions("logs-c", 3))


def test_pattern_never_matches_internal_topics() -> None:
    d = Driver(topics={"__consumer_offsets": ("x", 8), "t": ("id-t", 1)})
    d.converge("a", topics=(), regex=".*")
    assert d.assigned("a") == all_partitions("t", 1)


def test_partition_count_change_reassigns() -> None:
    d = Driver()
    d.converge("ab")
    d.topics["t"] = ("id-t2", 9)  # re-created with more partitions
    d.converge("ab")
    assert d.assigned("a") | d.assigned("b") == all_partitions("t", 9)
    assert sorted(len(d.assigned(m)) for m in "ab") == [4, 5]


def test_range_assignor_is_chosen_by_the_members() -> None:
    d = Driver()
    d.converge("ab", assignor="range")
    assert d.shard.group("g").assignor == "range"  # type: ignore[union-attr]
    assert d.assigned("a") == {("t", 0), ("t", 1), ("t", 2)}


@pytest.mark.parametrize("bad,error", [
    (dict(group_id=""), InvalidGroupIdError),
    (dict(member_id=""), InvalidRequestError),
    (dict(member_epoch=-3), InvalidRequestError),
    (dict(session_timeout_ms=10), InvalidSessionTimeoutError),
    (dict(assignor="sticky"), UnsupportedAssignorError),
    (dict(subscription=Subscription((), "(")), InvalidRegularExpressionError),
    (dict(rebalance_timeout_ms=0), InvalidRequestError),
])
def test_bad_heartbeats_are_refused_and_change_nothing(bad: dict[str, object], error: type[Exception]) -> None:
    shard = GroupShard(config=GroupConfig(min_session_timeout_ms=100))
    fields: dict[str, object] = dict(group_id="g", member_id="m", member_epoch=0, subscription=Subscription(("t",)),
                                     session_timeout_ms=3000)
    fields.update(bad)
    with pytest.raises(error):
        shard.heartbeat(Heartbeat(**fields), 0, {"t": ("id", 1)})  # type: ignore[arg-type]
    assert shard.list_groups() == []


# -- offsets -------------------------------------------------------------------------------


def test_member_commits_with_its_epoch_and_zombies_are_fenced() -> None:
    d = Driver()
    d.converge("ab")
    a_part = sorted(d.assigned("a"))[0]
    b_part = sorted(d.assigned("b"))[0]
    d.commit({a_part: 10}, member="a", epoch=d.epochs["a"], metadata="m")
    assert d.shard.fetch_offsets("g", [a_part])[a_part].offset == 10
    assert d.shard.fetch_offsets("g", [a_part])[a_part].metadata == "m"
    assert d.shard.fetch_offsets("g", [a_part])[a_part].commit_timestamp_ms == d.wall
    with pytest.raises(FencedMemberEpochError):
        d.commit({a_part: 11}, member="a", epoch=d.epochs["a"] + 1)
    # an older epoch is accepted for partitions the member still owns, not for others
    d.heartbeat("c")
    d.converge("abc")
    old = d.epochs["a"] - 1
    if a_part in d.assigned("a"):
        d.commit({a_part: 12}, member="a", epoch=old)
    with pytest.raises(FencedMemberEpochError):
        d.commit({b_part: 12}, member="a", epoch=old)
    with pytest.raises(UnknownMemberIdError):
        d.commit({a_part: 12}, member="gone", epoch=1)


def test_commit_after_session_expiry_is_refused() -> None:
    d = Driver()
    d.converge("ab", session_ms=1000)
    epoch = d.epochs["b"]
    d.now += 500
    d.heartbeat("a", session_ms=1000)
    d.tick(500)  # b expired
    with pytest.raises(UnknownMemberIdError):
        d.commit({("t", 0): 1}, member="b", epoch=epoch)


def test_memberless_commit_only_while_the_group_has_no_members() -> None:
    d = Driver()
    d.commit({("t", 0): 5, ("t", 1): 6})  # a member-less group (e.g. a Spark query)
    assert d.shard.describe("g").state == "Empty"
    d.heartbeat("a")
    with pytest.raises(NonEmptyGroupError):
        d.commit({("t", 0): 7})
    d.heartbeat("a", epoch=LEAVE)
    d.commit({("t", 0): 7})
    assert d.shard.fetch_offsets("g")[("t", 0)].offset == 7


@pytest.mark.parametrize("offsets,error", [
    ({("nope", 0): 1}, UnknownTopicOrPartitionError),
    ({("t", 6): 1}, UnknownTopicOrPartitionError),
    ({("t", -1): 1}, UnknownTopicOrPartitionError),
    ({("t", 0): -5}, InvalidRequestError),
    ({}, InvalidRequestError),
])
def test_bad_commits_are_refused_whole(offsets: dict[tuple[str, int], int], error: type[Exception]) -> None:
    d = Driver()
    with pytest.raises(error):
        d.commit({("t", 1): 3, **offsets} if offsets else {})
    assert d.shard.fetch_offsets("g") == {} and d.log == []


def test_metadata_over_the_limit_is_refused() -> None:
    d = Driver(config=GroupConfig(offset_metadata_max_bytes=4))
    with pytest.raises(OffsetMetadataTooLargeError):
        d.commit({("t", 0): 1}, metadata="12345")
    d.commit({("t", 0): 1}, metadata="1234")


def test_delete_group_needs_no_members_and_tombstones_every_key() -> None:
    d = Driver()
    d.heartbeat("a")
    d.commit({("t", 0): 3}, member="a", epoch=d.epochs["a"])
    with pytest.raises(NonEmptyGroupError):
        d.shard.delete_group("g")
    d.heartbeat("a", epoch=LEAVE)
    outcome = d.shard.delete_group("g")
    d.shard.finish(outcome, d.now)
    assert len(outcome.records) == 2
    with pytest.raises(GroupIdNotFoundError):
        d.shard.describe("g")
    with pytest.raises(GroupIdNotFoundError):
        d.shard.delete_group("g")


def test_delete_offsets_refused_for_subscribed_topics() -> None:
    d = Driver()
    d.commit({("t", 0): 3, ("u", 0): 4})
    d.heartbeat("a", topics=("t",))
    with pytest.raises(GroupSubscribedToTopicError):
        d.shard.delete_offsets("g", [("t", 0)])
    d.shard.finish(d.shard.delete_offsets("g", [("u", 0), ("u", 1)]), d.now)
    assert set(d.shard.fetch_offsets("g")) == {("t", 0)}


def test_list_and_describe() -> None:
    d = Driver()
    d.commit({("t", 0): 1}, group="simple")
    d.converge("ab", group="busy")
    listed = {g.group_id: (g.state, g.members) for g in d.shard.list_groups()}
    assert listed == {"simple": ("Empty", 0), "busy": ("Stable", 2)}
    view = d.shard.describe("busy")
    assert view.group is not None and set(view.group.members) == {"a", "b"} and view.offsets == {}


def test_offsets_of_a_deleted_or_re_created_topic_never_apply() -> None:
    """Committed offsets carry their topic's id: after the topic is deleted, or deleted and
    re-created (another id, maybe fewer partitions; also between two views of the topics),
    they are left out of reads and tombstoned, as Kafka's onPartitionsDeleted (found by a
    review: a re-created topic's consumer started at the deleted topic's offsets)."""
    d = Driver(topics={"t": ("id-t", 4), "u": ("id-u", 2), "v": ("id-v", 1)})
    d.commit({("t", 0): 100, ("t", 3): 300, ("u", 1): 5, ("v", 0): 7})
    d.topics = {"t": ("id-t-again", 4), "u": ("id-u", 1)}  # t re-created, u without partition 1, v deleted
    assert d.shard.fetch_offsets("g", None, d.topics) == {}
    assert d.shard.describe("g", d.topics).offsets == {}
    outcome = d.shard.drop_stale_offsets(d.topics)
    assert {(r.topic, r.partition) for r in outcome.records if isinstance(r, OffsetRecord) and r.offset is None} == {
        ("t", 0), ("t", 3), ("u", 1), ("v", 0)}
    d.shard.finish(outcome, d.now)
    assert d.shard.fetch_offsets("g") == {}


def test_a_group_joining_a_re_created_topic_does_not_inherit_its_offsets() -> None:
    """The heartbeat that takes the re-created topic into the group's subscription
    tombstones the old incarnation's offsets before the member can read them."""
    d = Driver(topics={"t": ("id-t", 2)})
    d.commit({("t", 0): 1000})
    d.topics = {"t": ("id-t-again", 2)}
    d.heartbeat("a")
    assert ("t", 0) in d.assigned("a")
    assert d.shard.fetch_offsets("g") == {}
    d.commit({("t", 0): 3}, member="a", epoch=d.epochs["a"])
    assert d.shard.fetch_offsets("g", None, d.topics)[("t", 0)].topic_id == "id-t-again"


def test_offsets_written_before_topic_ids_still_apply_while_their_partition_exists() -> None:
    """Old records have no topic id: they apply while the topic exists with that partition."""
    d = Driver(topics={"t": ("id-t", 2)})
    shard = d.shard
    shard.apply(OffsetRecord("g", "t", 1, CommittedOffset(9)), 0)
    assert shard.fetch_offsets("g", None, d.topics)[("t", 1)].offset == 9
    assert shard.drop_stale_offsets(d.topics).records == ()
    assert len(shard.drop_stale_offsets({"t": ("id-t-again", 1)}).records) == 1


def test_a_committed_transactions_offsets_are_written_with_the_topic_id() -> None:
    """``send_offsets_to_transaction``'s commit (transactional) keeps working: stamped with
    the topic's id, partitions deleted since skipped."""
    d = Driver(topics={"t": ("id-t", 2)})
    request = CommitOffsets(group_id="g", offsets={("t", 0): CommittedOffset(4), ("gone", 0): CommittedOffset(1)},
                            transactional=True)
    outcome = d.shard.commit_offsets(request, wall_ms=1, topics=d.topics)
    d.shard.finish(outcome, d.now)
    assert d.shard.fetch_offsets("g", None, d.topics) == {("t", 0): CommittedOffset(4, "", 1, -1, "id-t")}


def _hold(d: Driver, offsets: dict[tuple[str, int], int], until_ms: int, *, txn: str = "tx", member: str = "",
          epoch: int = -1) -> None:
    request = CommitOffsets(group_id="g", offsets={tp: CommittedOffset(o) for tp, o in offsets.items()},
                            member_id=member, member_epoch=epoch, transactional_id=txn)
    d.shard.finish(d.shard.hold_offsets(request, until_ms, wall_ms=d.wall, topics=d.topics), d.now)


def _stable(d: Driver, partitions: list[tuple[str, int]] | None, wall_ms: int) -> dict[tuple[str, int], int]:
    found = d.shard.fetch_offsets("g", partitions, d.topics, require_stable=True, wall_ms=wall_ms)
    return {tp: o.offset for tp, o in found.items()}


def test_offsets_an_open_transaction_holds_are_unstable_for_read_committed_fetches() -> None:
    """KIP-447: while a transaction holds offsets of a partition (AddOffsets), a
    require_stable fetch of it is refused (retriable); other partitions, and fetches that do
    not require stability, answer as before.  The transaction's commit writes the offsets
    and ends the hold in one decision; an abort's release ends it with nothing written."""
    d = Driver(topics={"t": ("id-t", 4)})
    d.commit({("t", 0): 3, ("t", 1): 5})
    _hold(d, {("t", 0): 10}, until_ms=10_000)
    with pytest.raises(UnstableOffsetCommitError):
        _stable(d, [("t", 0), ("t", 1)], 1)
    with pytest.raises(UnstableOffsetCommitError):
        _stable(d, None, 1)
    assert _stable(d, [("t", 1)], 1) == {("t", 1): 5}
    assert d.shard.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 3  # read_uncommitted: as before
    commit = CommitOffsets(group_id="g", offsets={("t", 0): CommittedOffset(10)}, transactional=True,
                           transactional_id="tx")
    outcome = d.shard.commit_offsets(commit, wall_ms=2, topics=d.topics)
    assert [type(r).__name__ for r in outcome.records] == ["OffsetRecord", "PendingRecord"]
    d.shard.finish(outcome, d.now)
    assert _stable(d, [("t", 0)], 3) == {("t", 0): 10}
    _hold(d, {("t", 1): 20}, until_ms=10_000, txn="other")
    with pytest.raises(UnstableOffsetCommitError):
        _stable(d, [("t", 1)], 4)
    d.shard.finish(d.shard.release_offsets("g", "other"), d.now)
    assert _stable(d, [("t", 1)], 5) == {("t", 1): 5}
    assert d.shard.release_offsets("g", "other").records == ()  # nothing held: nothing to write


def test_a_hold_ends_at_its_deadline_and_is_checked_like_a_commit() -> None:
    d = Driver(topics={"t": ("id-t", 4)})
    _hold(d, {("t", 2): 1}, until_ms=1_000)
    with pytest.raises(UnstableOffsetCommitError):
        _stable(d, [("t", 2)], 999)
    assert _stable(d, [("t", 2)], 1_000) == {}  # its release never came: the hold lapses
    with pytest.raises(UnknownTopicOrPartitionError):
        _hold(d, {("nope", 0): 1}, until_ms=1_000)
    d.heartbeat("a")
    with pytest.raises(UnknownMemberIdError):
        _hold(d, {("t", 0): 1}, until_ms=1_000, member="gone", epoch=1)


def test_holds_are_records_a_new_coordinator_replays() -> None:
    d = Driver(topics={"t": ("id-t", 4)})
    outcome = d.shard.hold_offsets(CommitOffsets(group_id="g", offsets={("t", 3): CommittedOffset(7)},
                                                 transactional_id="tx"), 5_000, wall_ms=0, topics=d.topics)
    (record,) = outcome.records
    assert record.topic_ids == (("t", "id-t"),) and decode(*encode(record)) == record
    released = d.shard.release_offsets("g", "tx")
    replayed = GroupShard()
    replayed.apply(decode(*encode(record)), 0)
    with pytest.raises(UnstableOffsetCommitError):
        replayed.fetch_offsets("g", [("t", 3)], require_stable=True, wall_ms=1)
    assert released.records == ()  # this shard never applied the hold
    replayed.apply(decode(*encode(PendingRecord("g", "tx", None))), 0)
    assert replayed.fetch_offsets("g", [("t", 3)], require_stable=True, wall_ms=1) == {}


def test_a_transactions_offsets_skip_a_topic_re_created_after_they_were_added() -> None:
    """The offsets were added (and held) for one incarnation of ``t``; ``t`` is deleted and
    created again before the transaction commits: they do not apply to the new topic (the
    hold keeps the topic ids of the moment they were added), and the hold ends anyway."""
    d = Driver(topics={"t": ("id-t", 4), "u": ("id-u", 1)})
    _hold(d, {("t", 0): 10, ("u", 0): 3}, until_ms=10_000)
    d.topics = {"t": ("id-t-again", 4), "u": ("id-u", 1)}
    commit = CommitOffsets(group_id="g", offsets={("t", 0): CommittedOffset(10), ("u", 0): CommittedOffset(3)},
                           transactional=True, transactional_id="tx")
    outcome = d.shard.commit_offsets(commit, wall_ms=2, topics=d.topics)
    d.shard.finish(outcome, d.now)
    assert {tp: o.offset for tp, o in d.shard.fetch_offsets("g", None, d.topics).items()} == {("u", 0): 3}
    assert _stable(d, [("t", 0)], 3) == {}  # released
    (record,) = [r for r in outcome.records if isinstance(r, PendingRecord)]
    assert record.partitions is None
