"""Typed, frozen, keyword-only configuration, validated at construction.

Every config is a ``@dataclass(frozen=True, slots=True, kw_only=True)`` whose
``__post_init__`` rejects invalid values with an ``InvalidConfigError`` naming the key.
Units are in the names (``_ms``, ``_bytes``, ``_ticks``).

Topic configs accept Kafka's dotted spelling as well (``retention.ms`` is
``retention_ms``), so ``Admin.create_topic(config={"retention.ms": "60000"})`` works as a
Kafka user expects.  ``load_toml`` reads a file from ``conf/`` and refuses unknown keys.
"""
from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, TypeVar

from .errors import InvalidConfigError

__all__ = [
    "TopicConfig",
    "RaftConfig",
    "BrokerConfig",
    "SecurityConfig",
    "from_mapping",
    "load_toml",
    "to_mapping",
    "BROKER_DEFAULT_COUNT",
]

# A CreateTopic partition count or replication factor that leaves it to the broker's
# ``default_partitions`` / ``default_replication_factor`` (-1 on the wire, as Kafka's
# CreateTopics since KIP-464): the client sends it, the broker fills it in.
BROKER_DEFAULT_COUNT = -1

T = TypeVar("T")

_DAY_MS = 24 * 3600 * 1000
_MAX_LAG_MS = 2**63 - 1  # Kafka's Long.MAX_VALUE: no bound
CLEANUP_POLICIES = ("delete", "compact", "compact,delete", "delete,compact")


def _require(condition: bool, key: str, message: str) -> None:
    if not condition:
        raise InvalidConfigError(f"invalid value for '{key}': {message}", key=key)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfig:
    """Per-topic (per partition log) settings; Kafka's names and defaults where they exist."""

    segment_bytes: int = 128 * 1024 * 1024
    segment_ms: int = 7 * _DAY_MS
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * _DAY_MS  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    flush_messages: int = 0  # fsync after this many records; 0: leave it to the OS
    flush_ms: int = 0  # fsync at least this often; 0: leave it to the OS
    max_message_bytes: int = 16 * 1024 * 1024  # largest frame the log accepts
    min_insync_replicas: int = 1
    cleanup_policy: str = "delete"  # "delete", "compact" or "compact,delete"
    delete_retention_ms: int = _DAY_MS  # how long compaction keeps a tombstone (from its timestamp)
    min_cleanable_dirty_ratio: float = 0.5  # clean a log once more than this share of it is dirty (1.0: never)
    min_compaction_lag_ms: int = 0  # a record stays uncompacted at least this long (KIP-58)
    max_compaction_lag_ms: int = _MAX_LAG_MS  # a dirty record is compacted within this long (KIP-354)
    tombstone_column: str = ""  # typed topics: a boolean column; true marks a tombstone
    unclean_leader_election_enable: bool = False
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    # Tiering to Delta (KIP-405's names; issue 15, docs/INTERNALS.md "tiering"):
    remote_storage_enable: bool = False  # closed segments are copied to the cluster's Delta tier
    # How much stays on the brokers once tiered (-2: as retention.ms/bytes; -1: no limit).
    # retention.ms/bytes then govern the tier (history past them is deleted from Delta too).
    local_retention_ms: int = -2
    local_retention_bytes: int = -2

    def __post_init__(self) -> None:
        _require(self.segment_bytes >= 1024, "segment.bytes", "must be at least 1024")
        _require(self.segment_ms >= 1, "segment.ms", "must be positive")
        _require(self.segment_index_bytes >= 64, "segment.index.bytes", "must be at least 64")
        _require(self.index_interval_bytes >= 0, "index.interval.bytes", "must be >= 0")
        _require(self.retention_ms == -1 or self.retention_ms >= 0, "retention.ms", "must be -1 or >= 0")
        _require(self.retention_bytes == -1 or self.retention_bytes >= 0, "retention.bytes", "must be -1 or >= 0")
        _require(self.flush_messages >= 0, "flush.messages", "must be >= 0")
        _require(self.flush_ms >= 0, "flush.ms", "must be >= 0")
        _require(self.max_message_bytes >= 64, "max.message.bytes", "must be at least 64")
        _require(self.min_insync_replicas >= 1, "min.insync.replicas", "must be >= 1")
        _require(
            self.cleanup_policy in CLEANUP_POLICIES,
            "cleanup.policy",
            "must be 'delete', 'compact' or 'compact,delete'",
        )
        _require(self.delete_retention_ms >= 0, "delete.retention.ms", "must be >= 0")
        _require(0.0 <= self.min_cleanable_dirty_ratio <= 1.0, "min.cleanable.dirty.ratio", "must be within [0, 1]")
        _require(self.min_compaction_lag_ms >= 0, "min.compaction.lag.ms", "must be >= 0")
        _require(self.max_compaction_lag_ms >= 1, "max.compaction.lag.ms", "must be >= 1")
        _require(
            self.max_compaction_lag_ms >= self.min_compaction_lag_ms,
            "max.compaction.lag.ms",
            "must be >= min.compaction.lag.ms",
        )
        _require(self.tombstone_column == self.tombstone_column.strip(), "tombstone.column",
                 "must not start or end with spaces")
        _require(
            self.message_timestamp_type in ("CreateTime", "LogAppendTime"),
            "message.timestamp.type",
            "must be 'CreateTime' or 'LogAppendTime'",
        )
        _require(self.local_retention_ms >= -2, "local.retention.ms", "must be -2 (as retention.ms), -1 or >= 0")
        _require(self.local_retention_bytes >= -2, "local.retention.bytes",
                 "must be -2 (as retention.bytes), -1 or >= 0")
        if not self.remote_storage_enable:
            _require(self.local_retention_ms == -2 and self.local_retention_bytes == -2,
                     "local.retention.ms" if self.local_retention_ms != -2 else "local.retention.bytes",
                     "applies only to tiered topics: set remote.storage.enable=true as well")
        else:
            _require(self.retention_ms == -1 or self.local_retention_ms in (-2,) or
                     0 <= self.local_retention_ms <= self.retention_ms, "local.retention.ms",
                     f"must be <= retention.ms ({self.retention_ms}): the tier keeps at least what the brokers keep")
            _require(self.retention_bytes == -1 or self.local_retention_bytes in (-2,) or
                     0 <= self.local_retention_bytes <= self.retention_bytes, "local.retention.bytes",
                     f"must be <= retention.bytes ({self.retention_bytes})")

    @property
    def compact(self) -> bool:
        """Whether the log is compacted (``cleanup.policy`` names ``compact``)."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether retention deletes old segments (``cleanup.policy`` names ``delete``)."""
        return "delete" in self.cleanup_policy

    @property
    def effective_local_retention_ms(self) -> int:
        """What the brokers keep of a tiered topic by time (``local.retention.ms``, -2: ``retention.ms``)."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        """What the brokers keep of a tiered topic by size (``local.retention.bytes``, -2: ``retention.bytes``)."""
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    def with_overrides(self, overrides: Mapping[str, Any]) -> "TopicConfig":
        """A copy with ``overrides`` (dotted or snake_case keys, values or strings) applied."""
        merged = to_mapping(self)
        merged.update(_normalise_keys(TopicConfig, overrides))
        return from_mapping(TopicConfig, merged)

    def to_kafka_names(self) -> dict[str, str]:
        """All settings under their dotted Kafka names, values as strings (for describe)."""
        return {name.replace("_", "."): _to_text(value) for name, value in to_mapping(self).items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class RaftConfig:
    """Timing of the metadata quorum, in ticks of ``tick_ms`` milliseconds."""

    tick_ms: int = 50
    election_ticks: int = 20  # randomised in [election_ticks, 2 * election_ticks)
    heartbeat_ticks: int = 2  # fetch interval of followers and observers
    #: how long the leader holds a fetch it has nothing new for (KIP-595's long poll; Kafka's
    #: 500 ms fetch max wait): an idle follower fetches about once per this many ticks
    fetch_wait_ticks: int = 5
    fetch_max_entries: int = 512
    snapshot_every_entries: int = 10_000
    pre_vote: bool = True
    check_quorum: bool = True

    def __post_init__(self) -> None:
        _require(self.tick_ms >= 1, "tick_ms", "must be >= 1")
        _require(self.heartbeat_ticks >= 1, "heartbeat_ticks", "must be >= 1")
        _require(
            self.election_ticks > self.heartbeat_ticks,
            "election_ticks",
            "must be greater than heartbeat_ticks",
        )
        _require(self.fetch_wait_ticks >= 1, "fetch_wait_ticks", "must be >= 1")
        _require(
            2 * self.fetch_wait_ticks < self.election_ticks,
            "fetch_wait_ticks",
            "must be less than half of election_ticks (an idle follower hears from its leader at least "
            "twice per election timeout)",
        )
        _require(self.fetch_max_entries >= 1, "fetch_max_entries", "must be >= 1")
        _require(self.snapshot_every_entries >= 1, "snapshot_every_entries", "must be >= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityConfig:
    """A node's listener security, authentication, authorizer and quota settings (the
    ``[security]`` table of ``conf/broker.toml``; README "Security" explains the model).

    ``security_protocol`` is Kafka's: ``PLAINTEXT`` (no TLS, every caller is
    ``User:ANONYMOUS``), ``SSL`` (TLS; principals from client certificates when
    ``ssl_client_auth = "required"``), ``SASL_SSL`` (TLS and SCRAM-SHA-256: a client must
    authenticate with a SCRAM session or a client certificate).  The node's certificate
    (``ssl_certfile``/``ssl_keyfile``, PEM) serves the listener and is presented on its own
    connections to other nodes; ``ssl_cafile`` verifies both directions.  The files are
    re-read when they change (``ssl_reload_check_ms``): a renewed certificate needs no restart.

    Nodes authenticate to each other with their client certificates (``ssl_client_auth =
    "required"``; list their subjects in ``super_users``) or, when clients need no
    certificate, with the cluster secret in ``inter_node_secret_file`` (principal
    ``Node:<id>``, a super user).  ``authorizer_enabled``: every RPC is checked against the
    ACLs in the metadata log, deny by default; ``super_users`` may do anything."""

    security_protocol: str = "PLAINTEXT"  # PLAINTEXT | SSL | SASL_SSL
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    ssl_cafile: str = ""
    ssl_client_auth: str = "none"  # none | required
    ssl_reload_check_ms: int = 1000
    inter_node_secret_file: str = ""
    sasl_enabled_mechanisms: tuple[str, ...] = ("SCRAM-SHA-256",)
    sasl_session_lifetime_ms: int = 3_600_000
    authorizer_enabled: bool = False
    super_users: tuple[str, ...] = ()
    quota_burst_ms: int = 1000  # a byte-rate quota lets this many ms' worth of bytes through at once
    quota_max_throttle_ms: int = 10_000  # longest a throttled answer is delayed

    def __post_init__(self) -> None:
        protocols = ("PLAINTEXT", "SSL", "SASL_SSL")
        hint = " (a password never crosses a plaintext link: use SASL_SSL)" if self.security_protocol == "SASL_PLAINTEXT" else ""
        _require(self.security_protocol in protocols, "security.security_protocol",
                 f"must be one of {', '.join(protocols)}, got {self.security_protocol!r}{hint}")
        _require(self.ssl_client_auth in ("none", "required"), "security.ssl_client_auth",
                 f"must be 'none' or 'required' (gRPC cannot ask for an optional client certificate), "
                 f"got {self.ssl_client_auth!r}")
        tls = self.security_protocol != "PLAINTEXT"
        if tls:
            _require(bool(self.ssl_certfile) and bool(self.ssl_keyfile), "security.ssl_certfile",
                     f"{self.security_protocol} needs the node's certificate and key (ssl_certfile, ssl_keyfile)")
        else:
            _require(not (self.ssl_certfile or self.ssl_keyfile or self.ssl_client_auth != "none"),
                     "security.security_protocol", "TLS settings need security_protocol SSL or SASL_SSL")
        if self.ssl_client_auth == "required":
            _require(bool(self.ssl_cafile), "security.ssl_cafile", "ssl_client_auth = required needs the CA to verify"
                     " client certificates with")
        for mechanism in self.sasl_enabled_mechanisms:
            _require(mechanism == "SCRAM-SHA-256", "security.sasl_enabled_mechanisms",
                     f"only SCRAM-SHA-256 is supported, got {mechanism!r}")
        if self.security_protocol == "SASL_SSL":
            _require(bool(self.sasl_enabled_mechanisms), "security.sasl_enabled_mechanisms",
                     "SASL_SSL needs SCRAM-SHA-256")
        needs_node_auth = self.authorizer_enabled or self.security_protocol == "SASL_SSL"
        if self.authorizer_enabled:
            _require(tls, "security.authorizer_enabled", "an authorizer needs authenticated callers: set "
                     "security_protocol to SSL or SASL_SSL")
        if needs_node_auth and self.ssl_client_auth != "required":
            _require(bool(self.inter_node_secret_file), "security.inter_node_secret_file",
                     "nodes must authenticate to each other: set ssl_client_auth = required (node certificates) "
                     "or an inter_node_secret_file")
        _require(self.ssl_reload_check_ms >= 1, "security.ssl_reload_check_ms", "must be >= 1")
        _require(self.sasl_session_lifetime_ms >= 1000, "security.sasl_session_lifetime_ms", "must be >= 1000")
        _require(self.quota_burst_ms >= 1, "security.quota_burst_ms", "must be >= 1")
        _require(self.quota_max_throttle_ms >= 1, "security.quota_max_throttle_ms", "must be >= 1")
        for principal in self.super_users:
            kind, sep, name = principal.partition(":")
            _require(bool(sep and kind and name), "security.super_users", f"{principal!r} is not 'User:<name>'")

    @property
    def tls(self) -> bool:
        return self.security_protocol != "PLAINTEXT"


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    """One broker process (optionally also a controller voter)."""

    broker_id: int
    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free port and write it to <data_dir>/broker.port
    # Prometheus /metrics on ``host``: -1 off; 0 a free port, written to
    # <data_dir>/metrics.port (as ``port`` is to broker.port); else that port.  When the
    # listener uses TLS (security_protocol SSL or SASL_SSL), /metrics is HTTPS with the node's
    # certificate and asks for a client certificate when the listener does; plain HTTP there
    # only with metrics_allow_plaintext = true (brokers/metrics/server.py).
    metrics_port: int = 0
    metrics_allow_plaintext: bool = False
    data_dir: str = ".spark-log/broker"
    rack: str = ""
    # Controller voters as "id@host:port" strings; empty means "this broker alone".
    controller_quorum_voters: tuple[str, ...] = ()
    process_roles: tuple[str, ...] = ("broker", "controller")
    heartbeat_interval_ms: int = 500
    session_timeout_ms: int = 6000
    replica_lag_time_max_ms: int = 10_000
    # how long an idle follower fetch waits at the leader (new data ends it at once): Kafka's
    # replica.fetch.wait.max.ms default; each idle round costs every followed partition
    replica_fetch_wait_max_ms: int = 500
    # SIGTERM: the process stops cleanly within this bound, or dumps its threads and exits 1
    shutdown_timeout_ms: int = 10_000
    # Kafka's auto.leader.rebalance.enable: the active controller moves leadership back to
    # each partition's preferred replica once per session timeout (Admin.elect_leaders does it on demand).
    auto_leader_rebalance_enable: bool = True
    num_io_threads: int = 16
    auto_create_topics: bool = False
    default_partitions: int = 1
    default_replication_factor: int = 1
    # consumer groups (the group coordinator, brokers/groups; Kafka's names with _ for .)
    offsets_topic_num_partitions: int = 8  # partitions of __consumer_offsets, fixed when it is created
    offsets_topic_replication_factor: int = 3  # capped by the live brokers when it is created
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_commit_timeout_ms: int = 10_000  # a commit waits this long for the in-sync replicas
    offset_metadata_max_bytes: int = 4096
    group_consumer_heartbeat_interval_ms: int = 1000
    group_consumer_session_timeout_ms: int = 45_000  # for members that do not ask for one
    group_consumer_min_session_timeout_ms: int = 1000
    group_consumer_max_session_timeout_ms: int = 600_000
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    # transactions (the transaction coordinator, brokers/transactions; Kafka's names with _ for .)
    transaction_state_log_num_partitions: int = 8  # partitions of __transaction_state, fixed at creation
    transaction_state_log_replication_factor: int = 3  # capped by the live brokers when it is created
    transaction_state_log_segment_bytes: int = 100 * 1024 * 1024
    transaction_max_timeout_ms: int = 3_600_000  # the longest transaction.timeout.ms a producer may ask for
    # The log cleaner (compaction of cleanup.policy=compact topics; Kafka's log.cleaner.*):
    log_cleaner_enable: bool = True  # log.cleaner.enable
    log_cleaner_threads: int = 1  # log.cleaner.threads
    log_cleaner_io_max_bytes_per_second: int = 0  # log.cleaner.io.max.bytes.per.second; 0: no limit
    log_cleaner_dedupe_buffer_bytes: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
    log_cleaner_backoff_ms: int = 15_000  # log.cleaner.backoff.ms: idle threads look again after this
    # The binary data listener for the JVM Spark connector (brokers/server/data_listener.py):
    # auto: on unless security is configured (it has no TLS/SASL), on: required (refused with
    # security), off: never.  data_port 0 picks a free port (written to <data_dir>/data.port).
    data_listener: str = "auto"
    data_port: int = 0
    # How followers fetch from their leader: auto: over the leader's data listener when it has
    # one (stored frames as they are, with the node's TLS and inter-node authentication), else
    # gRPC; grpc: always gRPC (brokers/replica/fetcher.py).
    replica_fetch_transport: str = "auto"
    # The cluster's Delta tier (tiering, issue 15): one Delta table per topic under it
    # (<tier_location>/<topic>).  A local path or file:// URI every broker, tiering job and
    # reader can reach (shared storage on a real cluster: all brokers must name the same one),
    # or an object store URI s3://bucket/prefix.
    # "": <data_dir>/../tier (the local cluster: .spark-log/tier beside the node directories).
    tier_location: str = ""
    # The object store's options (deltalake / object_store names: aws_endpoint_url,
    # aws_access_key_id, aws_secret_access_key, aws_region, aws_allow_http, timeout, ...),
    # given to the tiering job and union readers through DescribeTier; never logged.
    tier_storage_options: dict[str, str] = field(default_factory=dict, repr=False)
    topic_defaults: TopicConfig = field(default_factory=TopicConfig)
    raft: RaftConfig = field(default_factory=RaftConfig)
    security: SecurityConfig = field(default_factory=SecurityConfig)

    def __post_init__(self) -> None:
        _require(self.broker_id >= 0, "broker_id", "must be >= 0")
        _require(0 <= self.port <= 65535, "port", "must be within 0..65535")
        _require(-1 <= self.metrics_port <= 65535, "metrics_port", "must be -1 (off), 0 (a free port) or a port")
        _require(self.metrics_port <= 0 or self.metrics_port != self.port, "metrics_port", "must differ from port")
        _require(bool(self.host), "host", "must not be empty")
        _require(bool(self.data_dir), "data_dir", "must not be empty")
        for role in self.process_roles:
            _require(role in ("broker", "controller"), "process_roles", f"unknown role {role!r}")
        _require(bool(self.process_roles), "process_roles", "must name at least one role")
        for voter in self.controller_quorum_voters:
            _require(_parse_voter(voter) is not None, "controller_quorum_voters", f"{voter!r} is not id@host:port")
        _require(self.heartbeat_interval_ms >= 1, "heartbeat_interval_ms", "must be >= 1")
        _require(
            self.session_timeout_ms > self.heartbeat_interval_ms,
            "session_timeout_ms",
            "must be greater than heartbeat_interval_ms",
        )
        _require(self.replica_lag_time_max_ms >= 1, "replica_lag_time_max_ms", "must be >= 1")
        _require(0 <= self.replica_fetch_wait_max_ms < self.replica_lag_time_max_ms, "replica_fetch_wait_max_ms",
                 "must be >= 0 and below replica_lag_time_max_ms (an idle follower would leave the ISR)")
        _require(self.shutdown_timeout_ms >= 100, "shutdown_timeout_ms", "must be >= 100")
        _require(self.num_io_threads >= 1, "num_io_threads", "must be >= 1")
        # auto-creation would let a producer with DESCRIBE on a topic create it (Kafka asks for
        # CREATE): not built, so refused with the authorizer on rather than left unchecked
        _require(not (self.auto_create_topics and self.security.authorizer_enabled), "auto_create_topics",
                 "cannot be true with security.authorizer_enabled (creating a topic needs CREATE; "
                 "create topics with Admin.create_topic or 'spark-log topics create')")
        _require(self.default_partitions >= 1, "default_partitions", "must be >= 1")
        _require(self.default_replication_factor >= 1, "default_replication_factor", "must be >= 1")
        _require(1 <= self.offsets_topic_num_partitions <= 1000, "offsets_topic_num_partitions", "must be within 1..1000")
        _require(self.offsets_topic_replication_factor >= 1, "offsets_topic_replication_factor", "must be >= 1")
        _require(self.offsets_topic_segment_bytes >= 1024, "offsets_topic_segment_bytes", "must be at least 1024")
        _require(1 <= self.transaction_state_log_num_partitions <= 1000, "transaction_state_log_num_partitions",
                 "must be within 1..1000")
        _require(self.transaction_state_log_replication_factor >= 1, "transaction_state_log_replication_factor",
                 "must be >= 1")
        _require(self.transaction_state_log_segment_bytes >= 1024, "transaction_state_log_segment_bytes",
                 "must be at least 1024")
        _require(self.transaction_max_timeout_ms >= 1000, "transaction_max_timeout_ms", "must be at least 1000")
        _require(self.offsets_commit_timeout_ms >= 1, "offsets_commit_timeout_ms", "must be >= 1")
        _require(self.offset_metadata_max_bytes >= 0, "offset_metadata_max_bytes", "must be >= 0")
        _require(self.group_consumer_heartbeat_interval_ms >= 1, "group_consumer_heartbeat_interval_ms", "must be >= 1")
        _require(1 <= self.group_consumer_min_session_timeout_ms <= self.group_consumer_max_session_timeout_ms,
                 "group_consumer_min_session_timeout_ms", "must be >= 1 and <= group_consumer_max_session_timeout_ms")
        _require(self.group_consumer_min_session_timeout_ms <= self.group_consumer_session_timeout_ms
                 <= self.group_consumer_max_session_timeout_ms, "group_consumer_session_timeout_ms",
                 "must be within the min and max session timeouts")
        _require(bool(self.group_consumer_assignors) and all(a in ("uniform", "range") for a in self.group_consumer_assignors)
                 and len(set(self.group_consumer_assignors)) == len(self.group_consumer_assignors),
                 "group_consumer_assignors", "must list 'uniform' and/or 'range', each once")
        _require(1 <= self.log_cleaner_threads <= 64, "log_cleaner_threads", "must be within 1..64")
        _require(self.log_cleaner_io_max_bytes_per_second >= 0, "log_cleaner_io_max_bytes_per_second",
                 "must be >= 0 (0: no limit)")
        _require(self.log_cleaner_dedupe_buffer_bytes >= 1024 * 1024, "log_cleaner_dedupe_buffer_bytes",
                 "must be at least 1 MiB")
        _require(self.log_cleaner_backoff_ms >= 1, "log_cleaner_backoff_ms", "must be >= 1")
        _require(self.data_listener in ("auto", "on", "off"), "data_listener", "must be 'auto', 'on' or 'off'")
        _require(0 <= self.data_port <= 65535, "data_port", "must be within 0..65535")
        _require(self.replica_fetch_transport in ("auto", "grpc"), "replica_fetch_transport",
                 "must be 'auto' or 'grpc'")
        scheme = self.tier_location.split("://", 1)[0] if "://" in self.tier_location else ""
        _require(scheme in ("", "file", "s3", "s3a"), "tier_location",
                 f"only local paths, file:// URIs and s3://bucket/prefix URIs are supported, "
                 f"got {self.tier_location!r}")
        _require(scheme not in ("s3", "s3a") or bool(self.tier_location.split("://", 1)[1].split("/", 1)[0]),
                 "tier_location", f"an s3:// location names a bucket (s3://bucket/prefix), got {self.tier_location!r}")
        _require(not self.tier_storage_options or scheme in ("s3", "s3a"), "tier_storage_options",
                 "only an object store tier_location (s3://...) takes storage options")

    def resolved_tier_location(self) -> str:
        """The tier's absolute local path (``tier_location``, default ``<data_dir>/../tier``), or
        its ``s3://bucket/prefix`` URI."""
        location = self.tier_location
        if location.startswith(("s3://", "s3a://")):
            return "s3://" + location.split("://", 1)[1].rstrip("/")
        if location.startswith("file://"):
            location = location[len("file://"):]
        if not location:
            return str((Path(self.data_dir).resolve().parent / "tier"))
        return str(Path(location).resolve())

    def voters(self) -> dict[int, str]:
        """Controller voters as ``{node_id: "host:port"}``."""
        parsed = (_parse_voter(v) for v in self.controller_quorum_voters)
        return {node_id: address for node_id, address in (p for p in parsed if p is not None)}


def _parse_voter(text: str) -> tuple[int, str] | None:
    node, sep, address = text.partition("@")
    host, colon, port = address.rpartition(":")
    if not sep or not colon or not host or not node.isdigit() or not port.isdigit():
        return None
    return int(node), address


# --- generic loading -----------------------------------------------------------------


def _normalise_keys(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = str(key).replace(".", "_").replace("-", "_")
        if name not in names:
            raise InvalidConfigError(
                f"unknown config key '{key}' for {cls.__name__}; known keys: "
                + ", ".join(sorted(n.replace("_", ".") if cls is TopicConfig else n for n in names)),
                key=str(key),
            )
        out[name] = value
    return out


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _coerce(key: str, value: Any, annotation: Any, hints_owner: type) -> Any:
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        if isinstance(value, annotation):
            return value
        if not isinstance(value, Mapping):
            raise InvalidConfigError(f"'{key}' must be a table of settings", key=key)
        return from_mapping(annotation, value, prefix=f"{key}.")
    origin = typing.get_origin(annotation)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise InvalidConfigError(f"'{key}' must be true or false, got {value!r}", key=key)
    if annotation is int:
        if isinstance(value, bool):
            raise InvalidConfigError(f"'{key}' must be an integer, got {value!r}", key=key)
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise InvalidConfigError(f"'{key}' must be an integer, got {value!r}", key=key)
    if annotation is float:
        if isinstance(value, bool):
            raise InvalidConfigError(f"'{key}' must be a number, got {value!r}", key=key)
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                pass
            else:
                if number == number:  # not NaN
                    return number
        raise InvalidConfigError(f"'{key}' must be a number, got {value!r}", key=key)
    if annotation is str:
        if isinstance(value, str):
            return value
        raise InvalidConfigError(f"'{key}' must be a string, got {value!r}", key=key)
    if origin is dict:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, (str, int, float, bool))
                                                     for k, v in value.items()):
            raise InvalidConfigError(f"'{key}' must be a table of string settings", key=key)
        return {k: _to_text(v) for k, v in value.items()}
    if origin is tuple:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise InvalidConfigError(f"'{key}' must be a list of strings, got {value!r}", key=key)
        return tuple(value)
    if origin in (typing.Union, types.UnionType):
        return value
    raise InvalidConfigError(f"'{key}' has an unsupported type", key=key)


def from_mapping(cls: type[T], values: Mapping[str, Any], *, prefix: str = "") -> T:
    """Build config ``cls`` from a mapping; unknown keys and bad values raise
    ``InvalidConfigError`` naming the key."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for name, value in _normalise_keys(cls, values).items():
        kwargs[name] = _coerce(prefix + name, value, hints[name], cls)
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a missing required key
        raise InvalidConfigError(f"{cls.__name__}: {exc}") from None


def to_mapping(config: Any) -> dict[str, Any]:
    """The config's fields as a plain dict (nested configs as dicts)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        out[f.name] = to_mapping(value) if dataclasses.is_dataclass(value) else value
    return out


def load_toml(cls: type[T], path: str | Path, **overrides: Any) -> T:
    """Read config ``cls`` from a TOML file; ``overrides`` win over the file."""
    try:
        with open(path, "rb") as handle:
            values = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise InvalidConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
    values.update(overrides)
    return from_mapping(cls, values)
