"""``Admin``'s consumer-group operations (kafka-consumer-groups.sh's, as a Python API).

- ``list_groups``: every broker lists the groups of the coordinator partitions it leads;
  merged by group id.
- ``describe_group``: state, epochs, assignor, members with their current and target
  assignments, and per partition (committed, or owned by a member) the committed offset,
  the log end offset (the high watermark) and the lag between them.
- ``alter_group_offsets``: a member-less commit; the coordinator refuses it with
  ``NonEmptyGroupError`` while the group has members (atomically, on its side).
- ``reset_group_offsets``: computes new offsets (earliest, latest, a datetime, a shift of
  the committed offsets, an explicit offset), clamped to each partition's
  [earliest, latest], and commits them unless ``execute=False`` (a dry run).  Refused with
  ``NonEmptyGroupError`` while the group has members, in both modes.
- ``delete_group`` (refused while it has members), ``delete_group_offsets`` (refused for
  topics live members subscribe to: ``GroupSubscribedToTopicError``).

Unknown groups: ``GroupIdNotFoundError`` (describe, delete).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from . import errors
from ._client import Cluster
from ._group_client import GroupRpc
from ._group_session import OffsetAndMetadata
from .errors import InvalidRequestError, NonEmptyGroupError
from .proto import groups_pb2 as gpb

__all__ = ["GroupListing", "GroupMember", "GroupPartition", "GroupDescription", "GroupAdmin", "ListOffsets"]

TopicPartition = tuple[str, int]
ListOffsets = Callable[[Sequence[TopicPartition], int, float], dict[TopicPartition, int]]
"""``list_offsets(partitions, spec, deadline_s)``: spec -2 earliest, -1 latest, else a timestamp (ms)."""


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str  # "Empty", "Reconciling", "Stable"
    members: int
    coordinator_id: int


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    member_epoch: int
    state: str  # "Stable", "UnrevokedPartitions", "UnreleasedPartitions", "Left" (a static member away)
    subscribed_topics: tuple[str, ...]
    subscribed_pattern: str | None
    assignment: tuple[TopicPartition, ...]
    target_assignment: tuple[TopicPartition, ...]
    pending_revocation: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupPartition:
    """One partition of a group: committed offset (None: none), log end offset (the high
    watermark; None when it could not be asked), ``lag`` = log end - committed (None when
    either is unknown), and the member that owns it (None: no member)."""

    topic: str
    partition: int
    committed_offset: int | None
    metadata: str
    log_end_offset: int | None
    lag: int | None
    member_id: str | None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    coordinator_id: int
    members: tuple[GroupMember, ...]
    partitions: dict[TopicPartition, GroupPartition]

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions.values() if p.lag is not None)


def _tps(items: Sequence[gpb.TopicPartitions]) -> tuple[TopicPartition, ...]:
    return tuple(sorted((i.topic, int(p)) for i in items for p in i.partitions))


def _member(m: gpb.MemberDescription) -> GroupMember:
    return GroupMember(m.member_id, m.instance_id or None, m.client_id, m.client_host, m.member_epoch, m.state,
                       tuple(m.subscribed_topic_names), m.subscribed_topic_regex or None, _tps(m.assignment),
                       _tps(m.target_assignment), _tps(m.pending_revocation))


class GroupAdmin:
    """The group operations of one ``Admin`` (module docstring)."""

    def __init__(self, cluster: Cluster, *, timeout_s: float, list_offsets: ListOffsets) -> None:
        self.cluster = cluster
        self.rpc = GroupRpc(cluster, timeout_s=timeout_s)
        self.timeout_s = timeout_s
        self._list_offsets = list_offsets

    def _log_ends(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermarks of ``tps`` that exist (a deleted topic's partitions are left out;
        a leader that cannot be asked leaves its partitions out)."""
        topics = sorted({t for t, _ in tps})
        if not topics:
            return {}
        self.cluster.refresh(topics)
        present = []
        for tp in tps:
            try:
                if tp[1] in self.cluster.topic(tp[0]).partitions:
                    present.append(tp)
            except errors.UnknownTopicOrPartitionError:
                continue
        try:
            return self._list_offsets(present, -1, min(self.timeout_s, 10.0)) if present else {}
        except errors.SparkLogError:
            return {}

    def list_groups(self) -> list[GroupListing]:
        found: dict[str, GroupListing] = {}
        for answer in self.rpc.each_broker("ListGroups", gpb.ListGroupsRequest()):
            for g in answer.groups:
                found.setdefault(g.group_id, GroupListing(g.group_id, g.state, g.members, g.coordinator_id))
        return [found[name] for name in sorted(found)]

    def describe_group(self, group_id: str, *, lag: bool = True) -> GroupDescription:
        answer: gpb.DescribeGroupResponse = self.rpc.call(group_id, "DescribeGroup",
                                                          gpb.DescribeGroupRequest(group_id=group_id))
        members = tuple(_member(m) for m in answer.members)
        owners = {tp: m.member_id for m in members for tp in m.assignment}
        committed = {(o.topic, o.partition): o for o in answer.offsets}
        wanted = sorted(set(committed) | set(owners))
        ends = self._log_ends(wanted) if lag else {}
        partitions = {}
        for tp in wanted:
            c = committed.get(tp)
            end = ends.get(tp)
            offset = c.offset if c is not None else None
            partitions[tp] = GroupPartition(tp[0], tp[1], offset, c.metadata if c is not None else "", end,
                                            end - offset if end is not None and offset is not None else None,
                                            owners.get(tp))
        return GroupDescription(answer.group_id, answer.state, answer.group_epoch, answer.assignment_epoch,
                                answer.assignor, answer.coordinator_id, members, partitions)

    def _members(self, group_id: str) -> int:
        try:
            return len(self.describe_group(group_id, lag=False).members)
        except errors.GroupIdNotFoundError:
            return 0

    def alter_group_offsets(self, group_id: str,
                            offsets: Mapping[TopicPartition, int | tuple[int, str] | OffsetAndMetadata]) -> None:
        parts = []
        for (topic, partition), value in sorted(offsets.items()):
            offset, metadata = _offset_and_metadata(value, f"{topic}-{partition}")
            parts.append(gpb.CommitPartition(topic=topic, partition=int(partition), offset=offset, metadata=metadata,
                                             leader_epoch=-1))
        if not parts:
            raise InvalidRequestError("alter_group_offsets needs at least one partition")
        self.rpc.call(group_id, "OffsetCommit", gpb.OffsetCommitRequest(group_id=group_id, member_id="",
                                                                         member_epoch=-1, partitions=parts))

    def reset_group_offsets(self, group_id: str, topics: str | Sequence[str], *, to: str | dt.datetime | None = None,
                            shift_by: int | None = None, to_offset: int | None = None,
                            partitions: Sequence[int] | None = None, execute: bool = True) -> dict[TopicPartition, int]:
        chosen = [name for name, value in (("to", to), ("shift_by", shift_by), ("to_offset", to_offset))
                  if value is not None]
        if len(chosen) != 1:
            raise InvalidRequestError("give exactly one of to='earliest'|'latest'|datetime, shift_by=N or to_offset=N")
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            raise InvalidRequestError("name at least one topic whose offsets to reset")
        tps: list[TopicPartition] = []
        for name in names:
            available = sorted(self.cluster.topic(name, refresh=True).partitions)
            if partitions is not None:
                unknown = sorted(set(partitions) - set(available))
                if unknown:
                    raise errors.UnknownTopicOrPartitionError(f"topic {name!r} has no partition(s) {unknown}")
            tps.extend((name, p) for p in (sorted(set(partitions)) if partitions is not None else available))
        count = self._members(group_id)
        if count:
            raise NonEmptyGroupError(f"group {group_id!r} has {count} live member(s): stop them before resetting its "
                                     "offsets")
        earliest = self._list_offsets(tps, -2, self.timeout_s)
        latest = self._list_offsets(tps, -1, self.timeout_s)
        if to == "earliest":
            wanted = dict(earliest)
        elif to == "latest":
            wanted = dict(latest)
        elif isinstance(to, dt.datetime):
            when = to if to.tzinfo is not None else to.astimezone()
            wanted = self._list_offsets(tps, int(when.timestamp() * 1000), self.timeout_s)
        elif to is not None:
            raise InvalidRequestError(f"to must be 'earliest', 'latest' or a datetime, got {to!r}")
        elif shift_by is not None:
            if isinstance(shift_by, bool) or not isinstance(shift_by, int):
                raise InvalidRequestError(f"shift_by must be an int, got {shift_by!r}")
            current = self._committed(group_id, tps)
            wanted = {tp: current.get(tp, earliest[tp]) + shift_by for tp in tps}
        else:
            if isinstance(to_offset, bool) or not isinstance(to_offset, int):
                raise InvalidRequestError(f"to_offset must be an int, got {to_offset!r}")
            wanted = {tp: to_offset for tp in tps}
        result = {tp: min(max(wanted[tp], earliest[tp]), latest[tp]) for tp in tps}
        if execute:
            self.alter_group_offsets(group_id, result)
        return result

    def _committed(self, group_id: str, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        answer: gpb.OffsetFetchResponse = self.rpc.call(group_id, "OffsetFetch", gpb.OffsetFetchRequest(
            group_id=group_id, partitions=[gpb.TopicPartitions(topic=t, partitions=[p]) for t, p in tps]))
        return {(o.topic, o.partition): o.offset for o in answer.offsets}

    def committed(self, group_id: str, tps: Sequence[TopicPartition] | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata]:
        request = gpb.OffsetFetchRequest(group_id=group_id, all=tps is None, partitions=[
            gpb.TopicPartitions(topic=t, partitions=[p]) for t, p in (tps or ())])
        answer: gpb.OffsetFetchResponse = self.rpc.call(group_id, "OffsetFetch", request)
        return {(o.topic, o.partition): OffsetAndMetadata(o.offset, o.metadata, o.commit_timestamp_ms)
                for o in answer.offsets}

    def delete_group(self, group_id: str) -> None:
        self.rpc.call(group_id, "DeleteGroup", gpb.DeleteGroupRequest(group_id=group_id))

    def delete_group_offsets(self, group_id: str, topic: str, partitions: Sequence[int] | None = None) -> list[TopicPartition]:
        """Deletes the group's committed offsets of ``topic`` (of ``partitions`` only, when
        given) and returns the partitions that had one, i.e. those deleted.  Named
        partitions the topic does not have: ``UnknownTopicOrPartitionError``, nothing
        deleted (as ``reset_group_offsets``)."""
        if partitions is None:
            asked = chosen = sorted(tp for tp in self.committed(group_id) if tp[0] == topic)
        else:
            wanted = sorted({int(p) for p in partitions})
            unknown = sorted(set(wanted) - set(self.cluster.topic(topic, refresh=True).partitions))
            if unknown:
                raise errors.UnknownTopicOrPartitionError(f"topic {topic!r} has no partition(s) {unknown}")
            asked = [(topic, p) for p in wanted]  # all asked: the coordinator's refusals hold without commits
            chosen = sorted(self.committed(group_id, asked))
        if asked:
            self.rpc.call(group_id, "OffsetDelete", gpb.OffsetDeleteRequest(
                group_id=group_id, partitions=[gpb.TopicPartitions(topic=t, partitions=[p]) for t, p in asked]))
        return chosen


def _offset_and_metadata(value: object, where: str) -> tuple[int, str]:
    if isinstance(value, OffsetAndMetadata):
        return value.offset, value.metadata
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        offset: object = value[0]
        metadata = value[1]
    else:
        offset, metadata = value, ""
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise InvalidRequestError(f"offset of {where} must be an int, got {value!r}")
    return offset, metadata
