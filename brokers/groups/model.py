"""The typed values of the group coordinator: groups, members, committed offsets, settings.

Everything here is immutable (frozen dataclasses, frozensets, read-only mappings by
convention: a change builds a new value with ``dataclasses.replace``), so the pure core
(``core.py``) can compute a group's next state without touching the current one, and the
shell applies it only once its record is in the log.

A *group* is one of two things that share an id and the committed offsets:
- a consumer group with members (KIP-848): a group epoch bumped by every membership,
  subscription or subscribed-topic change; a *target assignment* computed at that epoch
  by a server-side assignor (``assignment_epoch`` = the group epoch it was computed for);
  and per member its *current* assignment, which moves towards the target one member at
  a time (``reconcile.py``);
- a member-less group (Kafka's "simple consumers", a Spark query): committed offsets only.

Thread-safety: values only; no locks needed.
"""
from __future__ import annotations

import enum
import functools
import logging
from dataclasses import dataclass, field
from typing import Mapping, Protocol

import re2  # google-re2: linear-time matching (Kafka compiles these patterns with RE2J)

from brokers.coordination.keys import partition_for as partition_for  # the group's partition of the topic

__all__ = [
    "TopicPartition",
    "Assignment",
    "TopicsView",
    "MemberState",
    "Subscription",
    "Member",
    "Group",
    "GroupState",
    "CommittedOffset",
    "GroupConfig",
    "ASSIGNORS",
    "INTERNAL_TOPIC",
    "partition_for",
    "is_internal",
    "MAX_PATTERN_CHARS",
    "MAX_PATTERN_PROGRAM",
    "pattern_error",
]

log = logging.getLogger(__name__)

INTERNAL_TOPIC = "__consumer_offsets"
ASSIGNORS = ("uniform", "range")

TopicPartition = tuple[str, int]
"""``(topic, partition)``."""

Assignment = frozenset[TopicPartition]

TopicsView = Mapping[str, tuple[str, int]]
"""The cluster's topics as the coordinator sees them: ``{name: (topic_id, partitions)}``,
internal topics left out."""


def is_internal(topic: str) -> bool:
    """Internal topics (``__`` prefix) are never matched by a subscription pattern."""
    return topic.startswith("__")


MAX_PATTERN_CHARS = 1_000
"""The longest subscription pattern the coordinator takes."""
MAX_PATTERN_PROGRAM = 1_000
"""The largest compiled subscription pattern (RE2 program instructions; a counted repeat
such as ``[a-z]{1,500}`` is expanded): the cost of matching one topic name grows with it."""


class _Pattern(Protocol):
    """What is used of a compiled ``re2`` pattern (the package ships no type hints)."""

    programsize: int

    def fullmatch(self, text: str) -> object | None: ...


def _re2_options() -> object:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is answered with a typed error, not written to stderr
    return options


_RE2_OPTIONS = _re2_options()


@functools.lru_cache(maxsize=256)
def _compile(pattern: str) -> tuple[_Pattern | None, str]:
    """The compiled pattern and ``""``, or ``None`` and why it is refused.

    Subscription patterns come from any client allowed to join some group and are matched
    against every topic of the cluster on the coordinator, so they are compiled with RE2
    (linear time in the topic name, no backtracking; it releases the GIL while matching),
    never with Python's backtracking ``re``: ``([a-z]|[a-z])*X`` would take 2**n steps on a
    topic name of n characters and stall every thread of the broker.  RE2 refuses what it
    cannot match in linear time (backreferences, lookahead and lookbehind)."""
    if len(pattern) > MAX_PATTERN_CHARS:  # only from a stored record (pattern_error checks first): that string is kept anyway
        return None, f"it is longer than {MAX_PATTERN_CHARS} characters"
    try:
        compiled: _Pattern = re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        return None, f"{reason} (RE2 syntax: no backreferences, lookahead or lookbehind)"
    if compiled.programsize > MAX_PATTERN_PROGRAM:
        return None, f"it is too complex (RE2 program of {compiled.programsize} instructions, at most {MAX_PATTERN_PROGRAM})"
    return compiled, ""


def pattern_error(pattern: str) -> str:
    """Why the coordinator refuses ``pattern`` as a subscription pattern; ``""`` if it takes it."""
    if len(pattern) > MAX_PATTERN_CHARS:  # before the cache: it must not keep a long string a client sent
        return f"it is longer than {MAX_PATTERN_CHARS} characters"
    return _compile(pattern)[1]


@functools.lru_cache(maxsize=256)
def _usable(pattern: str) -> _Pattern | None:
    """The compiled pattern of a subscription already in a group; ``None`` (it matches no
    topic, logged once) for one the coordinator refuses now: a group record written before
    patterns were compiled with RE2 may hold one, and it must still load."""
    compiled, reason = _compile(pattern)
    if compiled is None:
        log.warning("subscription pattern %r of a stored group member is refused (%s): it matches no topic", pattern, reason)
    return compiled


class MemberState(str, enum.Enum):
    """Where a member stands with respect to the target assignment (KIP-848)."""

    STABLE = "Stable"                      # owns its share of the target at the target epoch
    UNREVOKED = "UnrevokedPartitions"      # must give up ``pending_revocation`` first
    UNRELEASED = "UnreleasedPartitions"    # waits for partitions another member still owns


@dataclass(frozen=True, slots=True)
class Subscription:
    """Topic names (sorted, unique) and/or a regular expression (RE2 syntax, compiled by
    ``_compile``) matched in full against topic names (internal topics never match; a
    pattern the coordinator refuses, in a group record older than that check, matches
    nothing)."""

    topics: tuple[str, ...] = ()
    regex: str = ""

    def matches(self, topic: str) -> bool:
        if topic in self.topics:
            return True
        if not self.regex or is_internal(topic):
            return False
        pattern = _usable(self.regex)
        return pattern is not None and pattern.fullmatch(topic) is not None

    def resolve(self, topics: TopicsView) -> frozenset[str]:
        """The existing topics this subscription covers."""
        found = {t for t in self.topics if t in topics}
        pattern = _usable(self.regex) if self.regex else None
        if pattern is not None:
            found.update(t for t in topics if not is_internal(t) and pattern.fullmatch(t) is not None)
        return frozenset(found)

    @property
    def empty(self) -> bool:
        return not self.topics and not self.regex


@dataclass(frozen=True, slots=True, kw_only=True)
class Member:
    """One member of a consumer group as the coordinator keeps it (persisted in the group's
    record).  ``assigned`` is what it may own at ``epoch``; ``pending_revocation`` what it
    was asked to give up and has not yet confirmed; ``target`` its share of the group's
    target assignment.  ``left``: a static member that left for a restart (epoch -2) and
    keeps its partitions until its session expires or its instance id rejoins."""

    member_id: str
    instance_id: str = ""
    client_id: str = ""
    client_host: str = ""
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = frozenset()
    pending_revocation: Assignment = frozenset()
    target: Assignment = frozenset()
    subscription: Subscription = field(default_factory=Subscription)
    assignor: str = ""
    rebalance_timeout_ms: int = 300_000
    session_timeout_ms: int = 45_000
    left: bool = False

    @property
    def owns(self) -> Assignment:
        """Partitions nobody else may be given: assigned plus pending revocation."""
        return self.assigned | self.pending_revocation


class GroupState(str, enum.Enum):
    EMPTY = "Empty"              # no members (maybe committed offsets)
    RECONCILING = "Reconciling"  # some member has not reached the target assignment
    STABLE = "Stable"            # every member owns exactly its target at the target epoch


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """A consumer group's persisted state (one record per group in the internal topic).

    ``topics`` is the subscription metadata the target was computed with: ``{topic:
    (topic_id, partitions)}`` of every topic some member subscribes to; a change of it
    (a new topic matching a pattern, a topic re-created with another partition count)
    bumps the group epoch."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: Mapping[str, Member] = field(default_factory=dict)
    topics: Mapping[str, tuple[str, int]] = field(default_factory=dict)

    @property
    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        for member in self.members.values():
            if member.left:
                continue
            if (member.state is not MemberState.STABLE or member.epoch != self.assignment_epoch
                    or member.assigned != member.target):
                return GroupState.RECONCILING
        return GroupState.STABLE

    def by_instance(self, instance_id: str) -> Member | None:
        for member in self.members.values():
            if instance_id and member.instance_id == instance_id:
                return member
        return None


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A committed position: ``offset`` is the next record to consume.  ``topic_id``: the id
    of the topic incarnation it was committed for ("" in records written before it was
    kept): an offset of a deleted topic never applies to a re-created one of the same name."""

    offset: int
    metadata: str = ""
    commit_timestamp_ms: int = -1
    leader_epoch: int = -1
    topic_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """The coordinator's settings (from ``BrokerConfig``'s ``group_*`` / ``offsets_*`` keys)."""

    heartbeat_interval_ms: int = 1_000
    min_session_timeout_ms: int = 1_000
    max_session_timeout_ms: int = 600_000
    default_session_timeout_ms: int = 45_000
    assignors: tuple[str, ...] = ASSIGNORS  # the first is the default
    offset_metadata_max_bytes: int = 4_096
    # while a member is not stable it is asked to heartbeat at least this often, so that a
    # partition released by another member reaches it quickly
    reconciling_heartbeat_interval_ms: int = 250

    @property
    def default_assignor(self) -> str:
        return self.assignors[0]
