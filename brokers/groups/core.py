"""``GroupShard``: the groups of one ``__consumer_offsets`` partition, as a pure state machine.

No lock, thread, clock, disk or network: requests (typed values of ``messages.py``), the
time (``now_ms``, injected monotonic milliseconds; ``wall_ms`` for commit timestamps)
and the cluster's topics (``TopicsView``) come in; decisions go out as an ``Outcome``:
the records to append and the answer to give once they are durable.

The ordering contract with the shell (``coordinator.py``): a decision changes nothing.
The shell appends ``outcome.records`` to the partition, then calls ``finish(outcome,
now_ms)``, which applies them through ``apply`` (the same function that replays the
partition when a broker becomes its leader) and renews the heartbeating member's
session; only then, once the high watermark passed the records, does the caller get
``outcome.answer``.  A decision that raises a typed error appends nothing.

Persisted state is exactly what the records say (last record per key wins; a tombstone
deletes), so ``replay(log) == replay(compact(log))``.  Volatile state is the session and
revocation deadlines: ``apply`` gives every member it has not seen a full session from
``now_ms``, a member entering ``UNREVOKED`` a full rebalance timeout, and so does an
``UNREVOKED`` member asked for a new revocation (another epoch or ``pending_revocation``).  A new coordinator
grants each member a fresh session timeout (and each ``UNREVOKED`` member a fresh
rebalance timeout) counted from when it starts serving: the loader calls
``restart_timers`` once the replay is done, however long it took.

Membership (KIP-848): see ``heartbeat``.  Target assignments come from ``assignors.py``,
each member's move towards its target from ``reconcile.py``.

Thread-safety: none; the shell holds the shard's lock around every call.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

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

from .assignors import assign
from .messages import JOIN, LEAVE, STATIC_LEAVE, CommitOffsets, GroupListing, GroupView, Heartbeat, HeartbeatAnswer, Outcome
from .model import (
    CommittedOffset,
    Group,
    GroupConfig,
    GroupState,
    Member,
    MemberState,
    TopicPartition,
    TopicsView,
    pattern_error,
)
from .reconcile import reconcile
from .records import GroupRecord, OffsetRecord, PendingRecord, Record

__all__ = ["GroupShard", "check_group_id"]

MemberKey = tuple[str, str]


def check_group_id(group_id: str) -> None:
    """``InvalidGroupIdError`` unless ``group_id`` is 1-249 printable characters."""
    if not isinstance(group_id, str) or not group_id or len(group_id) > 249 or not group_id.isprintable():
        raise InvalidGroupIdError(f"group id must be 1-249 printable characters, got {group_id!r}")


class GroupShard:
    """All groups whose id hashes to one partition of the internal topic (module docstring)."""

    def __init__(self, *, config: GroupConfig | None = None) -> None:
        self.config = config or GroupConfig()
        self._groups: dict[str, Group] = {}
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self._sessions: dict[MemberKey, int] = {}
        self._revocations: dict[MemberKey, int] = {}
        self._holds: dict[str, dict[str, PendingRecord]] = {}  # group -> transactional id -> its live hold

    # -- applying records (live and replay) --------------------------------------------------

    def apply(self, record: Record, now_ms: int) -> None:
        """Make ``record`` the state of its key (see the module docstring for the timers)."""
        if isinstance(record, PendingRecord):
            holds = self._holds.setdefault(record.group_id, {})
            if record.partitions is None:
                holds.pop(record.transactional_id, None)
            else:
                holds[record.transactional_id] = record
            if not holds:
                del self._holds[record.group_id]
            return
        if isinstance(record, OffsetRecord):
            tp = (record.topic, record.partition)
            if record.offset is None:
                offsets = self._offsets.get(record.group_id)
                if offsets is not None:
                    offsets.pop(tp, None)
                    if not offsets:
                        del self._offsets[record.group_id]
            else:
                self._offsets.setdefault(record.group_id, {})[tp] = record.offset
            return
        gid = record.group_id
        old = self._groups.pop(gid, None)
        members: Mapping[str, Member] = {}
        if record.group is not None:
            self._groups[gid] = record.group
            members = record.group.members
        for mid in set(old.members if old is not None else ()) - set(members):
            self._sessions.pop((gid, mid), None)
            self._revocations.pop((gid, mid), None)
        for mid, member in members.items():
            key = (gid, mid)
            self._sessions.setdefault(key, now_ms + member.session_timeout_ms)
            if member.state is not MemberState.UNREVOKED:
                self._revocations.pop(key, None)
            elif key not in self._revocations or _new_revocation(old.members.get(mid) if old is not None else None, member):
                self._revocations[key] = now_ms + member.rebalance_timeout_ms

    def restart_timers(self, now_ms: int) -> None:
        """Count every member's session, and every ``UNREVOKED`` member's rebalance timeout,
        afresh from ``now_ms``: a new coordinator calls it when it starts serving, since its
        members could not heartbeat it while it was loading (the replay's own ``now_ms`` is
        from before the load waited for the high watermark)."""
        self._sessions.clear()
        self._revocations.clear()
        for gid, group in self._groups.items():
            for mid, member in group.members.items():
                self._sessions[(gid, mid)] = now_ms + member.session_timeout_ms
                if member.state is MemberState.UNREVOKED:
                    self._revocations[(gid, mid)] = now_ms + member.rebalance_timeout_ms

    def finish(self, outcome: Outcome[object], now_ms: int) -> None:
        """Apply a decision whose records were appended (module docstring)."""
        for record in outcome.records:
            self.apply(record, now_ms)
        if outcome.touch is not None:
            gid, mid = outcome.touch
            group = self._groups.get(gid)
            member = group.members.get(mid) if group is not None else None
            if member is not None and not member.left:
                self._sessions[outcome.touch] = now_ms + member.session_timeout_ms

    # -- membership ------------------------------------------------------------------------

    def heartbeat(self, hb: Heartbeat, now_ms: int, topics: TopicsView) -> Outcome[HeartbeatAnswer]:
        """One member heartbeat (KIP-848).

        - epoch 0 joins: a new member (the group epoch is bumped and a new target computed);
          a known member id rejoining (after being fenced) restarts from no partitions;
          a new member id with the ``instance_id`` of a static member takes that member's
          place, epoch and partitions without a new target (the old member id is fenced).
        - epoch -1 leaves (new target without it); -2, for a static member, leaves for a
          restart: it keeps its partitions until its session expires.
        - any other epoch must be the member's current epoch (or its previous one with
          owned partitions it still has, when the last answer was lost), else
          ``FencedMemberEpochError``; an unknown member id is ``UnknownMemberIdError``.
        A change of subscription or assignor, or of the subscribed topics' partitions or
        pattern matches, bumps the group epoch and recomputes the target (and tombstones the
        group's offsets of partitions that are gone: ``drop_stale_offsets``).  The member then
        moves towards its target (``reconcile``).  Bad input: ``InvalidGroupIdError``,
        ``InvalidRequestError``, ``InvalidSessionTimeoutError``, ``UnsupportedAssignorError``,
        ``InvalidRegularExpressionError``."""
        check_group_id(hb.group_id)
        if not hb.member_id or not hb.member_id.isprintable() or len(hb.member_id) > 255:
            raise InvalidRequestError(f"member id must be 1-255 printable characters, got {hb.member_id!r}")
        if hb.member_epoch < STATIC_LEAVE:
            raise InvalidRequestError(f"member epoch must be >= -2, got {hb.member_epoch}")
        group = self._groups.get(hb.group_id)
        member = group.members.get(hb.member_id) if group is not None else None
        if hb.member_epoch == LEAVE or (hb.member_epoch == STATIC_LEAVE and member is not None and not member.instance_id):
            return self._leave(group, member, hb, topics)
        if hb.member_epoch == STATIC_LEAVE:
            return self._static_leave(group, member, hb)
        session_ms = self._check_heartbeat(hb)
        old = group
        if group is None:
            group = Group(group_id=hb.group_id)
        bump = False
        members = dict(group.members)
        if hb.member_epoch == JOIN:
            if member is None:
                previous = group.by_instance(hb.instance_id)
                if previous is not None:  # a static member restarted: it takes its own place back
                    del members[previous.member_id]
                    member = dataclasses.replace(previous, member_id=hb.member_id, left=False)
                else:
                    member = Member(member_id=hb.member_id, subscription=hb.subscription, assignor=hb.assignor)
                    bump = True
            else:  # rejoining (fenced, or its join answer was lost): it owns nothing now
                member = dataclasses.replace(member, epoch=0, assigned=frozenset(), pending_revocation=frozenset(),
                                             state=MemberState.STABLE, left=False)
        else:
            if member is None:
                raise UnknownMemberIdError(f"group {hb.group_id!r} has no member {hb.member_id!r} "
                                           "(its session expired or it left); rejoin with epoch 0")
            lost_answer = (hb.member_epoch == member.previous_epoch and hb.owned is not None
                           and hb.owned <= member.assigned)
            if member.left or (hb.member_epoch != member.epoch and not lost_answer):
                raise FencedMemberEpochError(
                    f"member {hb.member_id!r} of group {hb.group_id!r} sent epoch {hb.member_epoch}, current "
                    f"{member.epoch}; rejoin with epoch 0")
        if member.subscription != hb.subscription or member.assignor != hb.assignor:
            bump = True
        member = dataclasses.replace(  # the instance id is the one it joined with
            member, instance_id=hb.instance_id if hb.member_epoch == JOIN else member.instance_id, client_id=hb.client_id, client_host=hb.client_host,
            subscription=hb.subscription, assignor=hb.assignor, rebalance_timeout_ms=hb.rebalance_timeout_ms,
            session_timeout_ms=session_ms)
        members[member.member_id] = member
        metadata = _metadata(members, topics)
        if metadata != group.topics:
            bump = True
        group = dataclasses.replace(group, members=members, topics=metadata)
        if bump:
            group = self._retarget(group)
        member = group.members[hb.member_id]
        others = {tp for m in group.members.values() if m.member_id != member.member_id for tp in m.owns}
        member = reconcile(member, target_epoch=group.assignment_epoch, target=member.target, owned=hb.owned,
                           is_free=lambda tp: tp not in others)
        group = dataclasses.replace(group, members={**group.members, member.member_id: member})
        records: tuple[Record, ...] = (GroupRecord(group.group_id, group),) if group != old else ()
        if old is None or group.topics != old.topics:  # the topics changed: no old offset may apply
            records += tuple(OffsetRecord(group.group_id, t, p, None) for t, p in self._stale_offsets(group.group_id, topics))
        steady = member.state is MemberState.STABLE and member.epoch == group.assignment_epoch
        interval = self.config.heartbeat_interval_ms
        if not steady:
            interval = min(interval, self.config.reconciling_heartbeat_interval_ms)
        interval = min(interval, max(1, session_ms // 3))
        return Outcome(records, HeartbeatAnswer(member.member_id, member.epoch, interval, member.assigned),
                       touch=(group.group_id, member.member_id))

    def _check_heartbeat(self, hb: Heartbeat) -> int:
        """Validate a join/heartbeat; returns the session timeout to use."""
        config = self.config
        session_ms = hb.session_timeout_ms or config.default_session_timeout_ms
        if not config.min_session_timeout_ms <= session_ms <= config.max_session_timeout_ms:
            raise InvalidSessionTimeoutError(
                f"session timeout {session_ms} ms is outside the broker's bounds "
                f"[{config.min_session_timeout_ms}, {config.max_session_timeout_ms}]")
        if hb.rebalance_timeout_ms < 1:
            raise InvalidRequestError(f"rebalance timeout must be >= 1 ms, got {hb.rebalance_timeout_ms}")
        if hb.assignor and hb.assignor not in config.assignors:
            raise UnsupportedAssignorError(
                f"assignor {hb.assignor!r} is not enabled on this broker; known: {', '.join(config.assignors)}")
        if any(not t or not isinstance(t, str) for t in hb.subscription.topics):
            raise InvalidRequestError("subscribed topic names must be non-empty strings")
        if hb.subscription.regex and (reason := pattern_error(hb.subscription.regex)):
            raise InvalidRegularExpressionError(
                f"subscription pattern {hb.subscription.regex[:100]!r} is not accepted: {reason}")
        return session_ms

    def _leave(self, group: Group | None, member: Member | None, hb: Heartbeat,
               topics: TopicsView) -> Outcome[HeartbeatAnswer]:
        answer = HeartbeatAnswer(hb.member_id, LEAVE, 0, frozenset())
        if group is None or member is None:
            return Outcome((), answer)
        members = {mid: m for mid, m in group.members.items() if mid != member.member_id}
        group = self._retarget(dataclasses.replace(group, members=members, topics=_metadata(members, topics)))
        return Outcome((GroupRecord(group.group_id, group),), answer)

    def _static_leave(self, group: Group | None, member: Member | None, hb: Heartbeat) -> Outcome[HeartbeatAnswer]:
        answer = HeartbeatAnswer(hb.member_id, STATIC_LEAVE, 0, frozenset())
        if group is None or member is None or member.left:
            return Outcome((), answer)
        left = dataclasses.replace(member, left=True)
        group = dataclasses.replace(group, members={**group.members, member.member_id: left})
        return Outcome((GroupRecord(group.group_id, group),), answer)

    def _retarget(self, group: Group) -> Group:
        """Bump the group epoch and compute the target assignment for it."""
        epoch = group.group_epoch + 1
        assignor = _choose_assignor(group.members.values(), self.config.default_assignor)
        counts = {t: n for t, (_, n) in group.topics.items()}
        subscribed = {mid: frozenset(t for t in counts if m.subscription.matches(t)) for mid, m in group.members.items()}
        target = assign(assignor, subscribed, counts, {mid: m.target for mid, m in group.members.items()})
        members = {mid: dataclasses.replace(m, target=target.get(mid, frozenset())) for mid, m in group.members.items()}
        return dataclasses.replace(group, group_epoch=epoch, assignment_epoch=epoch, assignor=assignor, members=members)

    def tick(self, now_ms: int) -> Outcome[None]:
        """Remove members whose session expired or who did not confirm a revocation within
        their rebalance timeout; one record per affected group (a new target without them)."""
        expired = {k for k, deadline in self._sessions.items() if now_ms >= deadline}
        expired |= {k for k, deadline in self._revocations.items() if now_ms >= deadline}
        records: list[Record] = []
        for gid in sorted({g for g, _ in expired}):
            group = self._groups.get(gid)
            if group is None:
                continue
            members = {mid: m for mid, m in group.members.items() if (gid, mid) not in expired}
            if len(members) == len(group.members):
                continue
            # the subscription metadata stays as it is (the next heartbeat refreshes it)
            kept = {t: v for t, v in group.topics.items() if any(m.subscription.matches(t) for m in members.values())}
            group = self._retarget(dataclasses.replace(group, members=members, topics=kept))
            records.append(GroupRecord(gid, group))
        return Outcome(tuple(records), None)

    # -- offsets ---------------------------------------------------------------------------

    def commit_offsets(self, request: CommitOffsets, *, wall_ms: int, topics: TopicsView) -> Outcome[None]:
        """Commit ``request.offsets`` as one atomic record batch.

        A member commits with its current epoch (or an older one for partitions it still
        owns); an unknown member gets ``UnknownMemberIdError``, a stale one
        ``FencedMemberEpochError``.  A member-less commit (no member id, epoch -1) is
        refused with ``NonEmptyGroupError`` while the group has members.  Refused too:
        unknown topics or partitions (``UnknownTopicOrPartitionError``), negative offsets
        (``InvalidRequestError``), metadata over the limit (``OffsetMetadataTooLargeError``).
        A committed transaction's offsets (``transactional``, checked when the transaction
        added them) skip partitions deleted since: refused, the transaction could never
        complete (its completer retries until the group takes them).  Each offset is
        stamped with its topic's id, so it never applies to a re-created topic."""
        gid = request.group_id
        check_group_id(gid)
        if not request.offsets:
            raise InvalidRequestError("an offset commit needs at least one partition")
        limit = self.config.offset_metadata_max_bytes
        gone: set[TopicPartition] = set()
        hold = self._holds.get(gid, {}).get(request.transactional_id) if request.transactional else None
        added_ids = dict(hold.topic_ids) if hold is not None else {}
        for (topic, partition), committed in request.offsets.items():
            recreated = topic in topics and added_ids.get(topic, topics[topic][0]) != topics[topic][0]
            if topic not in topics or not 0 <= partition < topics[topic][1] or recreated:
                if request.transactional:  # checked when the transaction added it: deleted (or re-created) since
                    gone.add((topic, partition))
                    continue
                raise UnknownTopicOrPartitionError(f"cannot commit an offset for {topic}-{partition}: no such partition")
            if committed.offset < 0:
                raise InvalidRequestError(f"offset for {topic}-{partition} must be >= 0, got {committed.offset}")
            if len(committed.metadata.encode("utf-8")) > limit:
                raise OffsetMetadataTooLargeError(f"offset metadata for {topic}-{partition} is over {limit} bytes")
        group = self._groups.get(gid)
        members = group.members if group is not None else {}
        if request.transactional:
            pass  # the member was checked when the transaction added these offsets (validate)
        elif not request.member_id:
            if request.member_epoch != -1:
                raise InvalidRequestError("a commit without a member id must carry member epoch -1")
            if members:
                raise NonEmptyGroupError(
                    f"group {gid!r} has {len(members)} member(s); only they may commit its offsets "
                    "(stop them first to alter or reset its offsets)")
        else:
            member = members.get(request.member_id)
            if member is None:
                raise UnknownMemberIdError(f"group {gid!r} has no member {request.member_id!r} "
                                           "(its session expired or it left): commit refused")
            owns = member.owns
            valid = request.member_epoch == member.epoch or (
                0 <= request.member_epoch < member.epoch and all(tp in owns for tp in request.offsets))
            if member.left or not valid:
                raise FencedMemberEpochError(
                    f"member {request.member_id!r} of group {gid!r} committed with epoch {request.member_epoch}; "
                    f"its epoch is {member.epoch}: commit refused (the partitions may have moved)")
        records: tuple[Record, ...] = tuple(
            OffsetRecord(gid, t, p, dataclasses.replace(o, commit_timestamp_ms=wall_ms, topic_id=topics[t][0]))
            for (t, p), o in sorted(request.offsets.items()) if (t, p) not in gone)
        if request.transactional and request.transactional_id in self._holds.get(gid, {}):
            records += (PendingRecord(gid, request.transactional_id, None),)  # the offsets land with the release
        return Outcome(records, None)

    # -- offsets an open transaction holds (KIP-447) -------------------------------------------

    def hold_offsets(self, request: CommitOffsets, until_ms: int, *, wall_ms: int, topics: TopicsView) -> Outcome[None]:
        """A transaction adds ``request.offsets`` (``send_offsets_to_transaction``): refused
        as ``commit_offsets`` would refuse the commit (nothing is committed now), else the
        partitions are held for ``request.transactional_id`` until ``until_ms`` (wall clock),
        or until its offsets are committed or released: ``fetch_offsets(require_stable)``
        answers ``UnstableOffsetCommitError`` for them meanwhile, so a ``read_committed``
        consumer taking them over waits for the transaction instead of starting below the
        offsets it will commit (Kafka's pending transactional offsets)."""
        self.commit_offsets(dataclasses.replace(request, transactional=False, transactional_id=""), wall_ms=wall_ms,
                            topics=topics)
        if not request.transactional_id:
            raise InvalidRequestError("holding offsets needs a transactional id")
        hold = self._holds.get(request.group_id, {}).get(request.transactional_id)
        if hold is None:
            hold = PendingRecord(request.group_id, request.transactional_id, frozenset(), until_ms)
        held, until, ids = hold.partitions or frozenset(), hold.until_ms, hold.topic_ids
        partitions = held | frozenset(request.offsets)
        topic_ids = tuple(sorted({**{t: topics[t][0] for t, _ in request.offsets}, **dict(ids)}.items()))
        if partitions == held and until >= until_ms and topic_ids == ids:
            return Outcome((), None)
        return Outcome((PendingRecord(request.group_id, request.transactional_id, partitions, max(until, until_ms),
                                      topic_ids),), None)

    def release_offsets(self, group_id: str, transactional_id: str) -> Outcome[None]:
        """The transaction holding offsets of ``group_id`` aborted: its hold ends."""
        check_group_id(group_id)
        if transactional_id not in self._holds.get(group_id, {}):
            return Outcome((), None)
        return Outcome((PendingRecord(group_id, transactional_id, None),), None)

    def _check_stable(self, group_id: str, partitions: Iterable[TopicPartition] | None, wall_ms: int) -> None:
        """``UnstableOffsetCommitError`` if a live hold covers one of ``partitions`` (any, when None)."""
        wanted = None if partitions is None else set(partitions)
        for transactional_id, hold in sorted(self._holds.get(group_id, {}).items()):
            held = hold.partitions or frozenset()
            unstable = sorted(held if wanted is None else wanted & held)
            if unstable and wall_ms < hold.until_ms:
                raise UnstableOffsetCommitError(
                    f"group {group_id!r}: the open transaction of {transactional_id!r} holds offsets of "
                    f"{', '.join(f'{t}-{p}' for t, p in unstable)}; retry once it ends")

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None,
                      topics: TopicsView | None = None, *, require_stable: bool = False,
                      wall_ms: int = 0) -> dict[TopicPartition, CommittedOffset]:
        """Committed offsets of ``partitions`` (all when None) that have one.  With
        ``topics``, an offset of a partition that no longer exists (its topic deleted, or
        re-created: another id, maybe fewer partitions) has none, even before its tombstone
        is written (``drop_stale_offsets``).  With ``require_stable`` (a ``read_committed``
        consumer), ``UnstableOffsetCommitError`` while an open transaction holds offsets of
        an asked partition at ``wall_ms`` (``hold_offsets``)."""
        check_group_id(group_id)
        offsets = self._live_offsets(group_id, topics)
        if require_stable:
            self._check_stable(group_id, partitions, wall_ms)
        if partitions is None:
            return dict(sorted(offsets.items()))
        return {tp: offsets[tp] for tp in partitions if tp in offsets}

    def _live_offsets(self, group_id: str, topics: TopicsView | None) -> dict[TopicPartition, CommittedOffset]:
        offsets = self._offsets.get(group_id, {})
        if topics is None:
            return offsets
        return {tp: o for tp, o in offsets.items() if not _stale(tp, o, topics)}

    def drop_stale_offsets(self, topics: TopicsView) -> Outcome[None]:
        """Tombstones for every committed offset whose partition is gone from ``topics``:
        its topic was deleted, or re-created (another topic id, or fewer partitions than
        the offset's), as Kafka's ``onPartitionsDeleted``.  The shell calls it whenever its
        view of the topics changed, so a delete and re-create between two views is caught
        by the topic id."""
        return Outcome(tuple(OffsetRecord(gid, t, p, None) for gid in sorted(self._offsets)
                             for t, p in self._stale_offsets(gid, topics)), None)

    def _stale_offsets(self, group_id: str, topics: TopicsView) -> list[TopicPartition]:
        return sorted(tp for tp, o in self._offsets.get(group_id, {}).items() if _stale(tp, o, topics))

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> Outcome[None]:
        """Tombstones for the committed offsets of ``partitions``; refused with
        ``GroupSubscribedToTopicError`` for topics live members subscribe to."""
        self._require(group_id)
        group = self._groups.get(group_id)
        wanted = sorted(set(partitions))
        if group is not None and group.members:
            busy = sorted({t for t, _ in wanted if any(m.subscription.matches(t) for m in group.members.values())})
            if busy:
                raise GroupSubscribedToTopicError(
                    f"members of group {group_id!r} subscribe to {', '.join(busy)}: its offsets cannot be deleted")
        offsets = self._offsets.get(group_id, {})
        return Outcome(tuple(OffsetRecord(group_id, t, p, None) for t, p in wanted if (t, p) in offsets), None)

    def delete_group(self, group_id: str) -> Outcome[None]:
        """Tombstones for the group and every offset it committed; ``NonEmptyGroupError``
        while it has members."""
        self._require(group_id)
        group = self._groups.get(group_id)
        if group is not None and group.members:
            raise NonEmptyGroupError(f"group {group_id!r} has {len(group.members)} member(s); stop them first")
        records: list[Record] = [GroupRecord(group_id, None)] if group is not None else []
        records.extend(OffsetRecord(group_id, t, p, None) for t, p in sorted(self._offsets.get(group_id, {})))
        return Outcome(tuple(records), None)

    # -- reads -----------------------------------------------------------------------------

    def _require(self, group_id: str) -> None:
        check_group_id(group_id)
        if group_id not in self._groups and group_id not in self._offsets:
            raise GroupIdNotFoundError(f"group {group_id!r} does not exist")

    def describe(self, group_id: str, topics: TopicsView | None = None) -> GroupView:
        """``GroupIdNotFoundError`` for a group with neither members nor offsets; the
        offsets as ``fetch_offsets`` gives them."""
        self._require(group_id)
        group = self._groups.get(group_id)
        state = group.state.value if group is not None else GroupState.EMPTY.value
        return GroupView(group_id, state, group, dict(sorted(self._live_offsets(group_id, topics).items())))

    def list_groups(self) -> list[GroupListing]:
        names = sorted(set(self._groups) | set(self._offsets))
        out = []
        for name in names:
            group = self._groups.get(name)
            out.append(GroupListing(name, group.state.value if group is not None else GroupState.EMPTY.value,
                                    len(group.members) if group is not None else 0))
        return out

    def committed(self) -> dict[str, dict[TopicPartition, int]]:
        """Every group's committed offsets (metrics: consumer lag)."""
        return {g: {tp: o.offset for tp, o in offsets.items()} for g, offsets in self._offsets.items()}

    def group(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def session_deadline(self, group_id: str, member_id: str) -> int | None:
        """The member's session deadline (monotonic ms), for tests and describe."""
        return self._sessions.get((group_id, member_id))

    def state_for_test(self) -> tuple[dict[str, Group], dict[str, dict[TopicPartition, CommittedOffset]]]:
        """Copies of the persisted state (replay checks)."""
        return dict(self._groups), {g: dict(o) for g, o in self._offsets.items()}


def _stale(tp: TopicPartition, committed: CommittedOffset, topics: TopicsView) -> bool:
    """``committed`` belongs to a partition that is gone: its topic is not in ``topics``, or
    is another incarnation (another id; an offset without one, from before ids were kept:
    a partition beyond the topic's count)."""
    topic, partition = tp
    current = topics.get(topic)
    if current is None or partition >= current[1]:
        return True
    return bool(committed.topic_id) and committed.topic_id != current[0]


def _new_revocation(before: Member | None, after: Member) -> bool:
    """``after`` (``UNREVOKED``) is asked for a revocation ``before`` was not: it just
    entered the state, or confirmed one revocation and was asked for another (its epoch or
    ``pending_revocation`` changed).  Each revocation gets a full rebalance timeout, as
    Kafka re-schedules it whenever an unrevoked member changes."""
    return (before is None or before.state is not MemberState.UNREVOKED or before.epoch != after.epoch
            or before.pending_revocation != after.pending_revocation)


def _metadata(members: Mapping[str, Member], topics: TopicsView) -> dict[str, tuple[str, int]]:
    """The subscription metadata of ``members``: every existing topic one of them subscribes to."""
    names: set[str] = set()
    for member in members.values():
        names |= member.subscription.resolve(topics)
    return {t: topics[t] for t in sorted(names)}


def _choose_assignor(members: Iterable[Member], default: str) -> str:
    """The assignor most members ask for (ties: by name); ``default`` when none asks."""
    votes: dict[str, int] = {}
    for member in members:
        if member.assignor:
            votes[member.assignor] = votes.get(member.assignor, 0) + 1
    if not votes:
        return default
    return min(votes, key=lambda name: (-votes[name], name))
