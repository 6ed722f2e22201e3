"""Metadata records: the entries of the Raft metadata log.

Every change to cluster metadata is one of these frozen dataclasses, encoded as compact
JSON bytes with a ``"type"`` tag (``encode`` / ``decode``).  Replaying the committed
records in log order from ``MetadataImage.EMPTY`` (see ``delta.py``) yields the same
image on every node: records carry *resolved* values (full topic configs, chosen replica
sets, chosen epochs), never anything a node would have to look up locally.

Wire format (version 1), one JSON object per record::

    {"type": "topic", "v": 1, "name": "clicks", "topic_id": "…", ...}

- tuples travel as JSON lists, ``bytes`` as base64 strings (Arrow IPC schema bytes);
- ``TopicConfig`` travels as its dotted Kafka names with string values;
- ``leader`` in ``PartitionRecord`` is ``null`` for "no leader"; in
  ``PartitionChangeRecord`` it is ``NO_CHANGE`` (-2) for "unchanged" and ``NO_LEADER``
  (-1) for "no leader", as in Kafka's PartitionChangeRecord.

``decode`` raises ``CorruptRecordError`` for bytes that are not a known record.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import typing
from dataclasses import dataclass, field
from typing import Any, Union

from spark_log.config import TopicConfig
from spark_log.errors import CorruptRecordError, SparkLogError

__all__ = [
    "NO_CHANGE",
    "NO_LEADER",
    "MetadataRecord",
    "RegisterBrokerRecord",
    "FenceBrokerRecord",
    "UnfenceBrokerRecord",
    "TopicRecord",
    "PartitionRecord",
    "PartitionChangeRecord",
    "RemoveTopicRecord",
    "ConfigRecord",
    "SchemaRecord",
    "NoOpRecord",
    "UserScramCredentialRecord",
    "RemoveUserScramCredentialRecord",
    "AccessControlEntryRecord",
    "RemoveAccessControlEntryRecord",
    "ClientQuotaRecord",
    "encode",
    "decode",
]

VERSION = 1
NO_LEADER = -1
NO_CHANGE = -2


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRecord:
    """A broker (re-)registered.  A new ``incarnation`` replaces any previous
    registration of ``broker_id``; ``broker_epoch`` grows with every registration."""

    broker_id: int
    incarnation: str
    broker_epoch: int
    address: str
    rack: str = ""
    fenced: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FenceBrokerRecord:
    """The broker missed its lease (or asked to be fenced): it may lead nothing."""

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UnfenceBrokerRecord:
    """The broker heartbeats again within its lease."""

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord:
    """A topic was created.  ``config`` is fully resolved (defaults included)."""

    name: str
    topic_id: str
    kind: str = "bytes"  # "bytes" | "typed"
    key_columns: tuple[str, ...] = ()
    config: TopicConfig = field(default_factory=TopicConfig)


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRecord:
    """A partition's complete state (creation, and in snapshots)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int | None
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding_replicas: tuple[int, ...] = ()  # a pending reassignment (see PartitionChangeRecord)
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionChangeRecord:
    """A change of ISR, leader, replicas and/or pending reassignment.  Applying it bumps
    ``partition_epoch`` by one, and ``leader_epoch`` by one when the leader changes
    (Kafka's rules).

    ``adding_replicas``/``removing_replicas`` record a reassignment in progress (KIP-455):
    while one is pending, ``replicas`` is the target followed by the original replicas
    that are not in it; ``adding`` = target - original, ``removing`` = original - target.
    Both ``()`` means no reassignment; ``None`` leaves them unchanged."""

    topic: str
    partition: int
    leader: int = NO_CHANGE  # NO_CHANGE, NO_LEADER or a broker id
    isr: tuple[int, ...] | None = None  # None: unchanged
    replicas: tuple[int, ...] | None = None  # None: unchanged
    adding_replicas: tuple[int, ...] | None = None  # None: unchanged; (): none pending
    removing_replicas: tuple[int, ...] | None = None  # None: unchanged; (): none pending


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveTopicRecord:
    name: str
    topic_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRecord:
    """A topic's configs were altered; ``config`` is the complete new config."""

    topic: str
    config: TopicConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaRecord:
    """Schema version ``schema_id`` of ``topic`` (Arrow IPC schema bytes).  Ids are per
    topic, dense, starting at 0 (the frame header's default ``schema_id``)."""

    topic: str
    schema_id: int
    schema_bytes: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class NoOpRecord:
    """Written by a newly elected controller; once applied, its image is up to date."""

    controller_id: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class UserScramCredentialRecord:
    """A SCRAM user was created or its password changed: the stored credential only
    (``spark_log.scram``: salt, iterations, StoredKey, ServerKey), never the password."""

    name: str
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveUserScramCredentialRecord:
    name: str
    mechanism: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessControlEntryRecord:
    """An ACL (``spark_log.acls.AclBinding``; enum fields as their values, e.g. "topic",
    "prefixed", "read", "allow") under a controller-chosen ``id``."""

    id: str
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveAccessControlEntryRecord:
    id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotaRecord:
    """One quota of a client entity (Kafka's model): ``user`` and ``client_id`` are None when
    the entity has no such part, ``"<default>"`` for the default entity, else a name;
    ``key`` is ``producer_byte_rate`` or ``consumer_byte_rate`` (bytes per second);
    ``value`` None removes it."""

    user: str | None = None
    client_id: str | None = None
    key: str
    value: float | None = None


MetadataRecord = Union[
    RegisterBrokerRecord,
    FenceBrokerRecord,
    UnfenceBrokerRecord,
    TopicRecord,
    PartitionRecord,
    PartitionChangeRecord,
    RemoveTopicRecord,
    ConfigRecord,
    SchemaRecord,
    NoOpRecord,
    UserScramCredentialRecord,
    RemoveUserScramCredentialRecord,
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    ClientQuotaRecord,
]

_TAGS: dict[type, str] = {
    RegisterBrokerRecord: "register_broker",
    FenceBrokerRecord: "fence_broker",
    UnfenceBrokerRecord: "unfence_broker",
    TopicRecord: "topic",
    PartitionRecord: "partition",
    PartitionChangeRecord: "partition_change",
    RemoveTopicRecord: "remove_topic",
    ConfigRecord: "config",
    SchemaRecord: "schema",
    NoOpRecord: "no_op",
    UserScramCredentialRecord: "user_scram_credential",
    RemoveUserScramCredentialRecord: "remove_user_scram_credential",
    AccessControlEntryRecord: "access_control_entry",
    RemoveAccessControlEntryRecord: "remove_access_control_entry",
    ClientQuotaRecord: "client_quota",
}
_BY_TAG: dict[str, type] = {tag: cls for cls, tag in _TAGS.items()}
_HINTS: dict[type, dict[str, Any]] = {cls: typing.get_type_hints(cls) for cls in _TAGS}


def _to_json(value: Any) -> Any:
    if isinstance(value, TopicConfig):
        return value.to_kafka_names()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, tuple):
        return list(value)
    return value


def _from_json(name: str, value: Any, hint: Any) -> Any:
    if hint is TopicConfig:
        if not isinstance(value, dict):
            raise ValueError(f"{name}: expected a config mapping")
        return TopicConfig().with_overrides(value)
    if hint is bytes:
        return base64.b64decode(value, validate=True)
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple or (tuple in {typing.get_origin(a) for a in args} and value is not None):
        if not isinstance(value, list):
            raise ValueError(f"{name}: expected a list")
        return tuple(value)
    if hint is int and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(f"{name}: expected an integer")
    if hint is str and not isinstance(value, str):
        raise ValueError(f"{name}: expected a string")
    return value


def encode(record: MetadataRecord) -> bytes:
    """Compact JSON bytes for ``record`` (see the module docstring)."""
    tag = _TAGS.get(type(record))
    if tag is None:
        raise TypeError(f"not a metadata record: {record!r}")
    body: dict[str, Any] = {"type": tag, "v": VERSION}
    for f in dataclasses.fields(record):
        body[f.name] = _to_json(getattr(record, f.name))
    return json.dumps(body, separators=(",", ":"), sort_keys=False).encode("utf-8")


def decode(data: bytes | bytearray | memoryview) -> MetadataRecord:
    """The record encoded in ``data``; raises ``CorruptRecordError`` if it is not one."""
    try:
        body = json.loads(bytes(data))
        if not isinstance(body, dict):
            raise ValueError("not a JSON object")
        tag = body.pop("type")
        version = body.pop("v", VERSION)
        if version != VERSION:
            raise ValueError(f"unsupported record version {version}")
        cls = _BY_TAG[tag]
        hints = _HINTS[cls]
        kwargs = {name: _from_json(name, value, hints[name]) for name, value in body.items()}
        return typing.cast(MetadataRecord, cls(**kwargs))
    except SparkLogError as exc:
        raise CorruptRecordError(f"metadata record has an invalid config: {exc.message}") from None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"not a valid metadata record: {exc!r}") from None
