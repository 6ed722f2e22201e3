"""Options of the ``spark-log`` data source: parsed and validated once, at query start.

Spark hands a data source a case-insensitive ``{name: str}`` map.  ``ReaderOptions.parse``
and ``WriterOptions.parse`` turn it into a frozen, typed object or raise
``InvalidConfigError`` naming the offending option: unknown names, bad values, and
contradictions (two subscription options, ``startingOffsets`` with
``startingTimestamp``, a batch-only option on a stream, ...).  Reader options mean what
they mean for Spark's Kafka source; ``kafka.bootstrap.servers`` is accepted as an alias
of ``bootstrap`` so Kafka code ports unchanged.  Security options (``kafka.security.protocol``,
``kafka.ssl.*``, ``kafka.sasl.*``, ``kafka.client.id``) become ``security`` and ``client_id``
(``security_options.py``); ``repr`` never shows a password.

Both objects pickle (they travel to executors inside readers and writers).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Mapping

from spark_log import ClientSecurity
from spark_log.errors import InvalidConfigError

from . import offsets as _offsets
from .security_options import split_security

__all__ = ["ReaderOptions", "WriterOptions", "READER_OPTIONS", "WRITER_OPTIONS"]

# name -> (meaning, default); the README's options table is generated from these.
READER_OPTIONS: dict[str, tuple[str, str]] = {
    "bootstrap": ("broker address host:port[,host:port] (alias kafka.bootstrap.servers)", "SPARK_LOG_BOOTSTRAP, else the local dev cluster"),
    "subscribe": ("comma-separated topics to read", "-"),
    "subscribePattern": ("regular expression (full match) of topics to read; new topics are picked up", "-"),
    "assign": ('JSON {"topic": [0, 1]}: exact partitions to read', "-"),
    "startingOffsets": ('"earliest", "latest" (streams only), "group" (streams with groupId: the group\'s committed '
                        'offsets; partitions without one start at the earliest) or JSON {"topic": {"0": 23}} '
                        '(-2 earliest, -1 latest)', "streams: latest, batch: earliest"),
    "endingOffsets": ('batch only: "latest" or JSON (-1 latest)', "latest"),
    "startingTimestamp": ("ms since the epoch: start every partition at its first record with timestamp >= this", "-"),
    "maxOffsetsPerTrigger": ("streams: at most this many records per micro-batch (ReadMaxRows)", "no limit"),
    "maxBytesPerTrigger": ("streams: about this many stored bytes per micro-batch (ReadMaxBytes, soft)", "no limit"),
    "minPartitions": ("at least this many Spark tasks per batch; large ranges are split", "one task per topic partition"),
    "maxRecordsPerPartition": ("no Spark task reads more records than this", "no limit"),
    "failOnDataLoss": ("fail when records to read were deleted (retention) or a partition vanished", "true"),
    "includeHeaders": ("bytes topics: add the headers column", "false"),
    "isolationLevel": ("read_uncommitted or read_committed", "read_uncommitted"),
    "columns": ("comma-separated columns to return; data columns are projected on the brokers", "all columns"),
    "pushFilters": ("batch reads: push topic/partition/offset/timestamp and simple column predicates to the source "
                    "(load a fresh DataFrame per query: Spark 4.2 reuses a DataFrame's pushed reader)", "false"),
    "pollTimeoutMs": ("executors: give up a fetch that returns nothing for this long", "120000"),
    "groupId": ("streams: after each completed micro-batch, commit its end offsets to this consumer group (a group "
                "without members, so `spark-log groups describe` shows the query's lag); the checkpoint stays the "
                "query's only source of truth", "-"),
}

WRITER_OPTIONS: dict[str, tuple[str, str]] = {
    "bootstrap": ("broker address host:port[,host:port] (alias kafka.bootstrap.servers)", "SPARK_LOG_BOOTSTRAP, else the local dev cluster"),
    "topic": ("topic to write; without it a string column 'topic' names each row's topic", "-"),
    "keyColumns": ("comma-separated columns hashed to choose a partition (typed topics)", "the topic's key columns"),
    "acks": ("all (-1) or 1; 0 is refused (the sink needs acknowledgements)", "all"),
    "compression": ("lz4, zstd or none", "lz4"),
    "batchSize": ("target frame size in bytes (the producer cuts frames of at least 1 MiB)", "4194304"),
    "timeoutMs": ("how long a task waits for acknowledgements before failing", "120000"),
    "tombstoneColumn": ("typed topics: a boolean column whose true marks a row as a tombstone (deletes its key on a "
                        "compacted topic); it must be the topic's tombstone.column (createTopic=true: the created "
                        "topic gets it, with cleanup.policy=compact)", "none"),
    "createTopic": ("true: a missing 'topic' is created as a typed topic with the DataFrame's schema "
                    "(keyColumns become its key columns); false: a missing topic fails the query at start", "false"),
    "partitions": ("with createTopic=true: partitions of the created topic", "1"),
    "replicationFactor": ("with createTopic=true: replication factor of the created topic", "1"),
    "transactional": ("true: each micro-batch (or batch job) is written in one transaction spanning every task and "
                      "partition, committed by the driver: read_committed readers see all of it or none", "false"),
    "transactionTimeoutMs": ("transactional=true: the coordinator aborts a micro-batch's transaction open longer "
                             "than this (it must outlast the slowest micro-batch)", "600000"),
}

# Options Spark itself may place in the map; they are not the source's to judge.
_SPARK_OWNED = {"path", "checkpointlocation", "queryname"}
_ALIASES = {"kafka.bootstrap.servers": "bootstrap"}


def _normalise(options: Mapping[str, str], known: Mapping[str, object]) -> dict[str, str]:
    by_lower = {name.lower(): name for name in known}
    out: dict[str, str] = {}
    for raw, value in options.items():
        key = _ALIASES.get(raw.lower(), raw.lower())
        if key in _SPARK_OWNED:
            continue
        if key not in by_lower:
            raise InvalidConfigError(
                f"unknown option '{raw}' for spark-log; known options: " + ", ".join(sorted(known)), key=raw
            )
        name = by_lower[key]
        if name in out and out[name] != value:
            raise InvalidConfigError(f"option '{raw}' contradicts '{name}' given as {out[name]!r}", key=raw)
        out[name] = str(value)
    return out


# Every integer option travels to the brokers as a 64-bit signed field (protobuf int64).
MAX_LONG = 2**63 - 1


def _int(values: Mapping[str, str], name: str, *, minimum: int) -> int | None:
    """Option ``name`` as an integer in ``[minimum, MAX_LONG]`` (None: not given)."""
    if name not in values:
        return None
    text = values[name].strip()
    try:
        number = int(text)
    except ValueError:
        raise InvalidConfigError(f"option '{name}' must be an integer, got {text!r}", key=name) from None
    if number < minimum:
        raise InvalidConfigError(f"option '{name}' must be >= {minimum}, got {number}", key=name)
    if number > MAX_LONG:
        raise InvalidConfigError(f"option '{name}' must be <= {MAX_LONG} (a 64-bit integer), got {number}", key=name)
    return number


def _bool(values: Mapping[str, str], name: str, default: bool) -> bool:
    if name not in values:
        return default
    text = values[name].strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfigError(f"option '{name}' must be true or false, got {values[name]!r}", key=name)
    return text == "true"


def _names(values: Mapping[str, str], name: str) -> tuple[str, ...] | None:
    if name not in values:
        return None
    items = tuple(item.strip() for item in values[name].split(","))
    if not items or any(not item for item in items):
        raise InvalidConfigError(f"option '{name}' must be a comma-separated list of names, got {values[name]!r}", key=name)
    if len(set(items)) != len(items):
        raise InvalidConfigError(f"option '{name}' names a column twice: {values[name]!r}", key=name)
    return items


def _assign(text: str) -> tuple[_offsets.TopicPartition, ...]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    ok = isinstance(value, dict) and value and all(
        isinstance(parts, list) and parts and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts)
        for parts in value.values()
    )
    if not ok:
        raise InvalidConfigError(f'option \'assign\' must be JSON like {{"topic": [0, 1]}}, got {text!r}', key="assign")
    return tuple(sorted({_offsets.TopicPartition(t, p) for t, parts in value.items() for p in parts}))


@dataclass(frozen=True, slots=True, kw_only=True)
class ReaderOptions:
    """Validated reader options; ``parse`` is the only constructor callers should use."""

    bootstrap: str | None = None
    subscribe: tuple[str, ...] | None = None
    subscribe_pattern: str | None = None
    assign: tuple[_offsets.TopicPartition, ...] | None = None
    starting_offsets: str | _offsets.Offsets | None = None
    ending_offsets: str | _offsets.Offsets | None = None
    starting_timestamp: int | None = None
    max_offsets_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    min_partitions: int = 1
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: str = "read_uncommitted"
    columns: tuple[str, ...] | None = None
    push_filters: bool = False
    poll_timeout_ms: int = 120_000
    security: ClientSecurity | None = None
    client_id: str = ""
    group_id: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "ReaderOptions":
        """Validate ``options``; raises ``InvalidConfigError`` naming the bad option."""
        options, security, client_id = split_security(options)
        v = _normalise(options, READER_OPTIONS)
        chosen = [name for name in ("subscribe", "subscribePattern", "assign") if name in v]
        if len(chosen) != 1:
            what = "none was given" if not chosen else "got " + " and ".join(f"'{c}'" for c in chosen)
            raise InvalidConfigError(
                f"exactly one of 'subscribe', 'subscribePattern' or 'assign' is required; {what}",
                key=chosen[-1] if chosen else "subscribe",
            )
        pattern = v.get("subscribePattern")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise InvalidConfigError(f"option 'subscribePattern' is not a valid regular expression: {exc}", key="subscribePattern") from None
        if "startingOffsets" in v and "startingTimestamp" in v:
            raise InvalidConfigError("option 'startingTimestamp' contradicts 'startingOffsets': give one of them", key="startingTimestamp")
        starting = (
            _offsets.parse_spec("startingOffsets", v["startingOffsets"], allow=("earliest", "latest", "group"))
            if "startingOffsets" in v else None
        )
        group_id = v.get("groupId")
        if group_id is not None and (not group_id.strip() or len(group_id.strip()) > 249):
            raise InvalidConfigError(f"option 'groupId' must be 1-249 characters, got {group_id!r}", key="groupId")
        if starting == "group" and group_id is None:
            raise InvalidConfigError("option 'startingOffsets' is 'group': give the group with option 'groupId'",
                                     key="startingOffsets")
        ending = (
            _offsets.parse_spec("endingOffsets", v["endingOffsets"], allow=("latest",)) if "endingOffsets" in v else None
        )
        isolation = v.get("isolationLevel", "read_uncommitted").strip().lower()
        if isolation not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigError(f"option 'isolationLevel' must be read_uncommitted or read_committed, got {isolation!r}", key="isolationLevel")
        bootstrap = v.get("bootstrap")
        if bootstrap is not None and not bootstrap.strip():
            raise InvalidConfigError("option 'bootstrap' must not be empty", key="bootstrap")
        return cls(
            bootstrap=bootstrap.strip() if bootstrap else None,
            subscribe=_names(v, "subscribe"),
            subscribe_pattern=pattern,
            assign=_assign(v["assign"]) if "assign" in v else None,
            starting_offsets=starting,
            ending_offsets=ending,
            starting_timestamp=_int(v, "startingTimestamp", minimum=0),
            max_offsets_per_trigger=_int(v, "maxOffsetsPerTrigger", minimum=1),
            max_bytes_per_trigger=_int(v, "maxBytesPerTrigger", minimum=1),
            min_partitions=_int(v, "minPartitions", minimum=1) or 1,
            max_records_per_partition=_int(v, "maxRecordsPerPartition", minimum=1),
            fail_on_data_loss=_bool(v, "failOnDataLoss", True),
            include_headers=_bool(v, "includeHeaders", False),
            isolation_level=isolation,
            columns=_names(v, "columns"),
            push_filters=_bool(v, "pushFilters", False),
            poll_timeout_ms=_int(v, "pollTimeoutMs", minimum=1) or 120_000,
            security=security,
            client_id=client_id,
            group_id=group_id.strip() if group_id is not None else None,
        )

    def check_streaming(self) -> None:
        """Refuse options that only make sense for batch reads."""
        if self.ending_offsets is not None:
            raise InvalidConfigError("option 'endingOffsets' is for batch queries; a stream has no end", key="endingOffsets")
        if self.push_filters:
            raise InvalidConfigError("option 'pushFilters' is for batch queries", key="pushFilters")

    def check_batch(self) -> None:
        """Refuse options that only make sense for streams."""
        if self.starting_offsets == "latest":
            raise InvalidConfigError("option 'startingOffsets' cannot be 'latest' for a batch query", key="startingOffsets")
        if self.group_id is not None:
            raise InvalidConfigError("option 'groupId' is for streaming queries (it publishes each micro-batch's "
                                     "progress)", key="groupId")
        for name, value in (("maxOffsetsPerTrigger", self.max_offsets_per_trigger), ("maxBytesPerTrigger", self.max_bytes_per_trigger)):
            if value is not None:
                raise InvalidConfigError(f"option '{name}' is for streaming queries; a batch query reads its whole range", key=name)


@dataclass(frozen=True, slots=True, kw_only=True)
class WriterOptions:
    """Validated writer options; ``parse`` is the only constructor callers should use."""

    bootstrap: str | None = None
    topic: str | None = None
    key_columns: tuple[str, ...] | None = None
    acks: str = "all"
    compression: str = "lz4"
    batch_size: int = 4 * 1024 * 1024
    timeout_ms: int = 120_000
    create_topic: bool = False
    partitions: int = 1
    replication_factor: int = 1
    tombstone_column: str | None = None
    security: ClientSecurity | None = None
    client_id: str = ""
    transactional: bool = False
    transaction_timeout_ms: int = 600_000

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "WriterOptions":
        """Validate ``options``; raises ``InvalidConfigError`` naming the bad option."""
        options, security, client_id = split_security(options)
        v = _normalise(options, WRITER_OPTIONS)
        acks = v.get("acks", "all").strip().lower()
        if acks == "-1":
            acks = "all"
        if acks == "0":
            raise InvalidConfigError("option 'acks' cannot be 0: the sink must know a write landed to be exactly-once", key="acks")
        if acks not in ("all", "1"):
            raise InvalidConfigError(f"option 'acks' must be all, -1 or 1, got {v['acks']!r}", key="acks")
        compression = v.get("compression", "lz4").strip().lower()
        if compression not in ("lz4", "zstd", "none"):
            raise InvalidConfigError(f"option 'compression' must be lz4, zstd or none, got {compression!r}", key="compression")
        topic = v.get("topic")
        if topic is not None and not topic.strip():
            raise InvalidConfigError("option 'topic' must not be empty", key="topic")
        bootstrap = v.get("bootstrap")
        if bootstrap is not None and not bootstrap.strip():
            raise InvalidConfigError("option 'bootstrap' must not be empty", key="bootstrap")
        create = _bool(v, "createTopic", False)
        for name in ("partitions", "replicationFactor"):
            if name in v and not create:
                raise InvalidConfigError(f"option '{name}' applies only with createTopic=true", key=name)
        if create and not topic:
            raise InvalidConfigError("option 'createTopic' needs option 'topic' (the topic to create)", key="createTopic")
        tombstone = v.get("tombstoneColumn")
        if tombstone is not None and not tombstone.strip():
            raise InvalidConfigError("option 'tombstoneColumn' must name a column", key="tombstoneColumn")
        if tombstone is not None and not topic:
            raise InvalidConfigError("option 'tombstoneColumn' needs option 'topic' (a typed topic)", key="tombstoneColumn")
        transactional = _bool(v, "transactional", False)
        if transactional and acks != "all":
            raise InvalidConfigError("option 'transactional' needs acks=all", key="transactional")
        if "transactionTimeoutMs" in v and not transactional:
            raise InvalidConfigError("option 'transactionTimeoutMs' applies only with transactional=true",
                                     key="transactionTimeoutMs")
        return cls(
            bootstrap=bootstrap.strip() if bootstrap else None,
            topic=topic.strip() if topic else None,
            key_columns=_names(v, "keyColumns"),
            acks=acks,
            compression=compression,
            batch_size=_int(v, "batchSize", minimum=1024) or 4 * 1024 * 1024,
            timeout_ms=_int(v, "timeoutMs", minimum=1) or 120_000,
            create_topic=create,
            partitions=_int(v, "partitions", minimum=1) or 1,
            replication_factor=_int(v, "replicationFactor", minimum=1) or 1,
            tombstone_column=tombstone.strip() if tombstone else None,
            security=security,
            client_id=client_id,
            transactional=transactional,
            transaction_timeout_ms=_int(v, "transactionTimeoutMs", minimum=1000) or 600_000,
        )
