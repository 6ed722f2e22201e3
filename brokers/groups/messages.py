"""Typed requests and answers of the group coordinator's core (no protobuf here: the
service maps the wire messages to these and back)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Mapping, TypeVar

from .model import Assignment, CommittedOffset, Group, Subscription, TopicPartition
from .records import Record

__all__ = ["Heartbeat", "HeartbeatAnswer", "CommitOffsets", "Outcome", "GroupListing", "GroupView",
           "JOIN", "LEAVE", "STATIC_LEAVE"]

JOIN, LEAVE, STATIC_LEAVE = 0, -1, -2
"""Special member epochs of a heartbeat (KIP-848)."""

T = TypeVar("T", covariant=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat:
    """A member's heartbeat: ``member_epoch`` 0 joins, -1 leaves, -2 leaves for a restart
    (static members); ``owned`` None when the member did not report it."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str = ""
    subscription: Subscription = field(default_factory=Subscription)
    assignor: str = ""
    owned: Assignment | None = None
    rebalance_timeout_ms: int = 300_000
    session_timeout_ms: int = 0  # 0: the coordinator's default
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitOffsets:
    """An offset commit.  ``member_epoch`` -1 with no ``member_id``: a member-less commit
    (admin tools, a Spark query, a consumer with ``assign()``), allowed only while the
    group has no members.  A future transactional commit builds the same value."""

    group_id: str
    offsets: Mapping[TopicPartition, CommittedOffset]
    member_id: str = ""
    member_epoch: int = -1
    transactional: bool = False  # a committed transaction's offsets: checked when added, written regardless
    transactional_id: str = ""  # with ``transactional``: the transaction whose hold the commit releases


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """A decision of the core: the records to append (in one frame, atomically), then the
    answer for the caller once they are durable.  ``touch``: the member whose session the
    heartbeat renews (``(group_id, member_id)``)."""

    records: tuple[Record, ...]
    answer: T
    touch: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str
    members: int


@dataclass(frozen=True, slots=True)
class GroupView:
    """Everything ``describe`` shows: the group (None for a member-less group) and its
    committed offsets."""

    group_id: str
    state: str
    group: Group | None
    offsets: Mapping[TopicPartition, CommittedOffset]
