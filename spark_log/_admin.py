"""``Admin``: topics, configs, schemas, offsets and consumer groups; SCRAM users, ACLs and client quotas.

Topic, config and schema changes go to any broker, which forwards them to the active
controller; they are committed to the metadata log when the call returns.
``create_topic`` additionally waits (up to ``request_timeout_ms``) until every partition
has a leader that serves it, so producers and raw Produce calls can write right away.

Every method raises the typed errors of ``spark_log.errors`` (``TopicAlreadyExistsError``,
``InvalidConfigError``, ``InvalidPartitionsError``, ``InvalidReplicationFactorError``,
``InvalidSchemaError``, ``SchemaMismatchError``, ``UnknownTopicOrPartitionError``...);
retriable ones are retried until ``request_timeout_ms`` first.

Consumer groups (``list_groups``, ``describe_group``, ``alter_group_offsets``,
``reset_group_offsets``, ``delete_group``, ``delete_group_offsets``) go to each group's
coordinator (``spark_log/_group_admin.py``).
"""
from __future__ import annotations

import dataclasses
import datetime
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import grpc
import pyarrow as pa

from . import _client, _compaction, _quorum, _tiering, errors
from ._client import Cluster, error_from_pb, retry
from ._live_state import live_states
from . import _reassignment
from . import _security_admin as _sec
from .acls import AclBinding, AclBindingFilter
from .config import BROKER_DEFAULT_COUNT, TopicConfig
from .proto import quorum_pb2_grpc as qpb_grpc
from .proto import security_pb2_grpc as spb_grpc
from ._group_admin import GroupAdmin, GroupDescription, GroupListing
from ._group_session import OffsetAndMetadata
from .errors import InvalidRequestError, SparkLogError
from .proto import broker_pb2 as pb
from .schemas import schema_from_bytes, schema_to_bytes
from .security import ClientSecurity

__all__ = ["Admin", "TopicDescription", "PartitionDescription", "list_offsets_for"]


_READ_ONLY = frozenset({"DescribeTopic", "ListTopics", "DescribeUserScramCredentials", "DescribeAcls",
                        "DescribeClientQuotas", "WhoAmI", "DescribeQuorum"})
# The generated gRPC module has no annotations; this name types its stub constructor.
_security_stub: Any = spb_grpc.SecurityStub
_quorum_stub: Any = qpb_grpc.QuorumStub


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One partition: the controller's view (``leader`` None: offline), then the live state
    its leader reported (``Admin.describe_topic``).  The live fields are None when the
    leader could not be asked (offline, unreachable, or a description that does not carry
    them, such as ``create_topic``'s).  ``log_end_offsets`` maps every replica to its log end
    offset as the leader knows it (None: that follower has not fetched since the leader was
    elected).  ``under_replicated``: fewer in-sync replicas than the replication factor
    (Kafka's ``--under-replicated-partitions``; during a reassignment the replicas being
    added, ``adding_replicas``, do not count until it completes)."""

    partition: int
    leader: int | None
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    high_watermark: int | None = None
    log_start_offset: int | None = None
    last_stable_offset: int | None = None
    log_end_offsets: dict[int, int | None] | None = None
    log_size_bytes: int | None = None  # the leader's log on disk
    under_replicated: bool = False
    offline: bool = False
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """A topic as the controller committed it.  ``schema`` is the current schema (bytes
    topics: the fixed bytes schema); ``schemas`` maps every schema id to its schema."""

    name: str
    topic_id: str
    kind: str
    partitions: dict[int, PartitionDescription]
    config: dict[str, str]
    schema: pa.Schema | None
    schema_id: int
    schemas: dict[int, pa.Schema]
    key_columns: tuple[str, ...]
    replication_factor: int

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)


def _describe(message: pb.TopicDescription) -> TopicDescription:
    schemas = {s.schema_id: schema_from_bytes(s.arrow_schema) for s in message.schemas}
    current = message.schemas[-1].schema_id if message.schemas else -1
    return TopicDescription(
        name=message.name,
        topic_id=message.topic_id,
        kind=message.kind or "bytes",
        partitions={
            p.partition: PartitionDescription(p.partition, p.leader_id if p.leader_id >= 0 else None,
                                              p.leader_epoch, tuple(p.replicas), tuple(p.isr),
                                              under_replicated=len(p.isr) < len(p.replicas) - len(p.adding_replicas),
                                              offline=p.leader_id < 0, adding_replicas=tuple(p.adding_replicas),
                                              removing_replicas=tuple(p.removing_replicas))
            for p in message.partitions
        },
        config=dict(message.configs),
        schema=schemas.get(current),
        schema_id=current,
        schemas=schemas,
        key_columns=tuple(message.key_columns),
        replication_factor=message.replication_factor,
    )


def _isolation(isolation_level: str) -> pb.IsolationLevel:
    """The wire isolation level of ``isolation_level`` (checked as the Consumer checks it)."""
    if isolation_level not in ("read_uncommitted", "read_committed"):
        raise errors.InvalidConfigError("isolation_level must be 'read_uncommitted' or 'read_committed', "
                                        f"got {isolation_level!r}", key="isolation_level")
    return pb.READ_COMMITTED if isolation_level == "read_committed" else pb.READ_UNCOMMITTED


def _spec_to_wire(spec: Any) -> int:
    if spec == "earliest":
        return -2
    if spec == "latest":
        return -1
    if isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
        return spec
    raise InvalidRequestError(f"offset spec must be 'earliest', 'latest' or a timestamp in ms >= 0, got {spec!r}")


def list_offsets_for(cluster: Cluster, tps: Sequence[tuple[str, int]], spec: int,
                     isolation: pb.IsolationLevel = pb.READ_UNCOMMITTED, *, deadline_s: float = 30.0) -> dict[tuple[str, int], int]:
    """Offsets of ``tps`` for a wire spec (-2 earliest, -1 latest, else a timestamp),
    asking each partition's leader; retries leader moves until ``deadline_s``.

    Each request carries the leader epoch of the client's metadata (KIP-320): a broker whose
    epoch differs refuses it (``FencedLeaderEpochError`` / ``UnknownLeaderEpochError``,
    retried after a refresh), so a client that has seen a newer leader never takes a deposed
    leader's "latest".  An answer naming an older leader epoch than the client has seen
    (a broker that does not check) is retried the same way."""
    out: dict[tuple[str, int], int] = {}
    todo = list(tps)
    deadline = time.monotonic() + deadline_s
    delay = 0.05
    while todo:
        by_leader: dict[str, list[tuple[str, int, int]]] = {}
        last: SparkLogError | None = None
        for tp in todo:
            try:
                address, epoch = cluster.leader(*tp)
            except SparkLogError as exc:
                if not exc.retriable:
                    raise
                cluster.forget(tp[0])
                last = exc
                continue
            by_leader.setdefault(address, []).append((tp[0], tp[1], epoch))
        for address, group in by_leader.items():
            request = pb.ListOffsetsRequest(
                replica_id=-1, isolation_level=isolation,
                partitions=[pb.ListOffsetsPartition(topic=t, partition=p, timestamp=spec, current_leader_epoch=epoch)
                            for t, p, epoch in group])
            try:
                response: pb.ListOffsetsResponse = cluster.broker(address).ListOffsets(
                    request, timeout=cluster.request_timeout_s)
            except grpc.RpcError as exc:
                error = errors.from_rpc_error(exc, address=address)
                if not error.retriable:
                    raise error from None
                last = error
                for t, _p, _e in group:
                    cluster.forget(t)
                continue
            for result in response.partitions:
                failure = error_from_pb(result.error)
                if failure is None and 0 <= result.leader_epoch < cluster.known_leader_epoch(result.topic,
                                                                                               result.partition):
                    failure = errors.FencedLeaderEpochError(
                        f"{result.topic}-{result.partition}: {address} answered in leader epoch {result.leader_epoch}, "
                        f"older than one already seen")
                if failure is None:
                    out[(result.topic, result.partition)] = result.offset
                elif failure.retriable:
                    cluster.forget(result.topic)
                    last = failure
                else:
                    raise failure
        todo = [tp for tp in todo if tp not in out]
        if todo:
            if time.monotonic() + delay > deadline:
                raise last or errors.RequestTimeoutError("list offsets timed out")
            time.sleep(delay)  # backoff before retrying a leader move, not synchronisation
            delay = min(delay * 2, 1.0)
    return out


class Admin:
    """Administers topics (see the module docstring).  Thread-safe."""

    def __init__(self, bootstrap: str | Sequence[str] | None = None, *, request_timeout_ms: int = 30_000,
                 security: ClientSecurity | None = None, client_id: str = "") -> None:
        self._timeout_s = request_timeout_ms / 1000
        self._cluster = Cluster(bootstrap, request_timeout_s=self._timeout_s, security=security, client_id=client_id)
        self._groups = GroupAdmin(self._cluster, timeout_s=self._timeout_s, list_offsets=lambda tps, spec, deadline_s:
                                  list_offsets_for(self._cluster, tps, spec, deadline_s=deadline_s))

    def _call(self, method: str, request: Any, topics: Sequence[str] = (),
              on_attempt: Callable[[], None] | None = None) -> Any:
        """One Admin RPC through any broker, retried (see ``_client.retry``); ``on_attempt``
        is called before each attempt."""
        # An unknown topic is nearly always definitive (Kafka's AdminClient reports it at
        # once), but a broker that just restarted answers it until its metadata catches up:
        # retried briefly, not for the whole request timeout.
        # Read-only calls give each broker at most _client.READ_TRY_S, then ask the next one.
        read_only = method in _READ_ONLY
        timeout_s = min(self._timeout_s, _client.READ_TRY_S) if read_only else self._timeout_s

        def once() -> Any:
            if on_attempt is not None:
                on_attempt()
            return self._cluster.call_any(
                lambda address: getattr(self._cluster.admin(address), method)(request, timeout=timeout_s),
                read_only=read_only)
        return retry(once, cluster=self._cluster, topics=topics, deadline_s=self._timeout_s,
                     brief=(errors.UnknownTopicOrPartitionError,))

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        schema: pa.Schema | None = None,
        key_columns: Sequence[str] | None = None,
        config: Mapping[str, Any] | None = None,
        *,
        kind: str | None = None,
        validate_only: bool = False,
    ) -> TopicDescription:
        """Create a topic: a bytes topic without ``schema``, a typed topic with one.

        ``kind="typed"`` without ``schema`` creates a typed topic with no schema yet: the
        first ``register_schema`` (or the first Spark write, which registers the
        DataFrame's) sets it as schema id 0; until then ``Producer.send``/``send_batch``
        raise ``NoSchemaError``, consumers find nothing to read and ``get_schema`` raises
        ``NoSchemaError``.  ``kind="bytes"`` with a schema is an ``InvalidRequestError``.
        ``config`` takes Kafka names or snake_case (``{"retention.ms": 60000}``).
        ``partitions`` / ``replication_factor`` not given (None): the broker's
        ``default_partitions`` / ``default_replication_factor`` (1 unless configured; sent
        as -1, as Kafka's CreateTopics does).  Returns once the topic is committed and
        (unless ``validate_only``) every partition's leader serves it.
        """
        if schema is not None and not isinstance(schema, pa.Schema):
            raise errors.InvalidSchemaError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
        if kind not in (None, "bytes", "typed"):
            raise InvalidRequestError(f"kind must be 'bytes' or 'typed', got {kind!r}")
        if kind == "bytes" and schema is not None:
            raise InvalidRequestError("a bytes topic has the fixed bytes schema; give kind='typed' with a schema")
        if isinstance(key_columns, str):
            key_columns = [key_columns]
        request = pb.CreateTopicRequest(
            name=name, partitions=BROKER_DEFAULT_COUNT if partitions is None else int(partitions),
            replication_factor=BROKER_DEFAULT_COUNT if replication_factor is None else int(replication_factor),
            configs={str(k): _config_text(v) for k, v in (config or {}).items()},
            arrow_schema=schema_to_bytes(schema) if schema is not None else b"",
            key_columns=list(key_columns or ()), validate_only=validate_only, kind=kind or "",
        )
        attempts = 0

        def attempt() -> None:
            nonlocal attempts
            attempts += 1

        try:
            description = _describe(self._call("CreateTopic", request, on_attempt=attempt))
        except errors.TopicAlreadyExistsError as exc:
            if attempts < 2 or validate_only:
                raise
            description = self._created_by_an_earlier_attempt(request, exc)
        if not validate_only:
            self._wait_for_leaders(name, description.num_partitions or max(1, request.partitions))
        return description

    def _created_by_an_earlier_attempt(self, request: pb.CreateTopicRequest,
                                       error: errors.TopicAlreadyExistsError) -> TopicDescription:
        """A retried CreateTopic found its topic existing.  An earlier attempt may have created
        it and lost its answer (the broker's wait for the controller timed out under load,
        its metadata lagged behind the commit, the connection dropped): if the topic is the
        one this call asked for (kind, partitions and replication factor where given, key
        columns, schema, every config it set), that is this call's success and its
        description is returned; any other topic raises ``error``."""
        existing = self.describe_topic(request.name, live=False)
        schema = schema_from_bytes(request.arrow_schema) if request.arrow_schema else None
        kind = request.kind or ("typed" if schema is not None else "bytes")
        defaults = TopicConfig().to_kafka_names()
        asked = {k: v for k, v in TopicConfig().with_overrides(dict(request.configs)).to_kafka_names().items()
                 if defaults.get(k) != v}
        same = (existing.kind == kind
                and request.partitions in (BROKER_DEFAULT_COUNT, existing.num_partitions)
                and request.replication_factor in (BROKER_DEFAULT_COUNT, existing.replication_factor)
                and existing.key_columns == tuple(request.key_columns)
                and (schema is None or (existing.schema is not None and existing.schema.equals(schema)))
                and all(existing.config.get(k) == v for k, v in asked.items()))
        if not same:
            raise error
        return existing

    def _wait_for_leaders(self, name: str, count: int) -> None:
        deadline = time.monotonic() + self._timeout_s
        while True:
            try:
                info = self._cluster.topic(name, refresh=True)
                if len(info.partitions) >= count and all(p.leader_id >= 0 for p in info.partitions.values()):
                    # and each leader serves it (its own metadata may lag the broker we asked)
                    remaining = max(0.1, deadline - time.monotonic())
                    list_offsets_for(self._cluster, [(name, p) for p in info.partitions], -1, deadline_s=remaining)
                    return
            except errors.UnknownTopicOrPartitionError:
                pass
            if time.monotonic() > deadline:
                raise errors.RequestTimeoutError(f"topic {name!r} was created but its leaders did not show up in time")
            time.sleep(0.02)  # polling the cluster's metadata, not synchronising threads

    def list_topics(self) -> list[str]:
        return sorted(self._call("ListTopics", pb.ListTopicsRequest()).names)

    def describe_topic(self, name: str, *, live: bool = True) -> TopicDescription:
        """The topic as the controller committed it and, with ``live``, each partition's live
        state from its leader (high watermark, log start, log end offset per replica; one
        ``DescribePartitions`` per leader, all in flight at once).  A leader that cannot be
        reached (or a partition with no leader) leaves that partition's live fields None
        instead of failing the describe; ``UnknownTopicOrPartitionError`` if there is no
        such topic."""
        description = self._describe_committed(name)
        return self._with_live_state({name: description})[name] if live else description

    def describe_topics(self, names: Sequence[str] | None = None, *, live: bool = True) -> dict[str, TopicDescription]:
        """``{name: description}`` of ``names`` (default: every topic), as ``describe_topic``;
        the leaders are asked once for all of them.  Without ``names`` a topic deleted while
        describing is left out; a named topic that does not exist raises."""
        explicit = names is not None
        descriptions: dict[str, TopicDescription] = {}
        for name in (list(names) if names is not None else self.list_topics()):
            try:
                descriptions[name] = self._describe_committed(name)
            except errors.UnknownTopicOrPartitionError:
                if explicit:
                    raise
        return self._with_live_state(descriptions) if live else descriptions

    def under_replicated_partitions(self, names: Sequence[str] | None = None) -> list[tuple[str, PartitionDescription]]:
        """``(topic, partition)`` descriptions, by topic then partition, of every partition
        that is under-replicated or offline (``describe_topics``)."""
        return [(name, p) for name, d in sorted(self.describe_topics(names).items())
                for _, p in sorted(d.partitions.items()) if p.under_replicated or p.offline]

    def _describe_committed(self, name: str) -> TopicDescription:
        return _describe(self._call("DescribeTopic", pb.DescribeTopicRequest(name=name), [name]))

    def _with_live_state(self, descriptions: dict[str, TopicDescription]) -> dict[str, TopicDescription]:
        wanted = {(name, p.partition): p for name, d in descriptions.items() for p in d.partitions.values()}

        def fresh(names: Sequence[str]) -> dict[tuple[str, int], PartitionDescription]:
            out: dict[tuple[str, int], PartitionDescription] = {}
            for name in names:
                try:
                    d = descriptions[name] = self._describe_committed(name)
                except SparkLogError:
                    continue          # keep the view we have; its live fields stay unknown
                out.update({(name, p.partition): p for p in d.partitions.values()})
            return out

        states, views = live_states(self._cluster, wanted, describe=fresh, deadline_s=min(self._timeout_s, 5.0),
                                    call_timeout_s=min(self._timeout_s, 5.0))
        out: dict[str, TopicDescription] = {}
        for name, d in descriptions.items():
            partitions: dict[int, PartitionDescription] = {}
            for index in d.partitions:
                view = views.get((name, index), d.partitions[index])
                assert isinstance(view, PartitionDescription)
                state = states.get((name, index))
                if state is not None:
                    view = dataclasses.replace(
                        view, high_watermark=state.high_watermark, log_start_offset=state.log_start_offset,
                        last_stable_offset=state.last_stable_offset,
                        log_end_offsets={r: state.log_end_offsets.get(r) for r in view.replicas},
                        log_size_bytes=state.log_size_bytes)
                partitions[index] = view
            out[name] = dataclasses.replace(d, partitions=partitions)
        return out

    def delete_topic(self, name: str) -> None:
        self._call("DeleteTopic", pb.DeleteTopicRequest(name=name))
        self._cluster.forget(name)

    def alter_configs(self, name: str, set: Mapping[str, Any] | None = None,
                      delete: Sequence[str] | None = None, *, validate_only: bool = False) -> TopicDescription:
        """Set and/or reset (``delete``) topic configs; returns the new description."""
        request = pb.AlterConfigsRequest(topic=name, set={str(k): _config_text(v) for k, v in (set or {}).items()},
                                         delete=list(delete or ()), validate_only=validate_only)
        return _describe(self._call("AlterConfigs", request, [name]))

    def register_schema(self, name: str, schema: pa.Schema) -> int:
        """Evolve a typed topic's schema (only compatible changes); returns the schema id.
        A topic created without a schema on its first typed write gets this one."""
        if not isinstance(schema, pa.Schema):
            raise errors.InvalidSchemaError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
        request = pb.RegisterSchemaRequest(topic=name, arrow_schema=schema_to_bytes(schema))
        schema_id = int(self._call("RegisterSchema", request, [name]).schema_id)
        self._cluster.forget(name)
        return schema_id

    def get_schema(self, name: str) -> pa.Schema:
        """The topic's current schema; ``NoSchemaError`` for a typed topic without one yet."""
        description = self.describe_topic(name, live=False)
        if description.schema is None:
            raise errors.NoSchemaError(
                f"topic {name!r} has no schema yet; register one (Admin.register_schema) or write with the Spark sink")
        return description.schema

    def list_offsets(self, topic: str, spec: str | int = "latest", *,
                     isolation_level: str = "read_uncommitted") -> dict[int, int]:
        """``{partition: offset}`` for ``spec`` "earliest", "latest" (the high watermark) or a
        timestamp in ms (the first offset whose record timestamp is >= it; the latest
        offset when there is none).  ``isolation_level``: "read_uncommitted" or
        "read_committed" (the last stable offset for "latest"); anything else:
        ``InvalidConfigError``."""
        wire = _spec_to_wire(spec)
        isolation = _isolation(isolation_level)
        info = self._cluster.topic(topic, refresh=True)
        offsets = list_offsets_for(self._cluster, [(topic, p) for p in sorted(info.partitions)], wire, isolation,
                                   deadline_s=self._timeout_s)
        return {p: o for (_, p), o in sorted(offsets.items())}

    def list_offsets_for_topics(self, topics: Sequence[str], spec: str | int = "latest", *,
                                isolation_level: str = "read_uncommitted") -> dict[tuple[str, int], int]:
        """``{(topic, partition): offset}`` for every partition of ``topics`` (``spec`` as
        ``list_offsets``), in one metadata request plus one ListOffsets request per leader
        broker, however many topics.  ``UnknownTopicOrPartitionError`` if a topic does not
        exist."""
        wire = _spec_to_wire(spec)
        isolation = _isolation(isolation_level)
        if isinstance(topics, str) or any(not isinstance(t, str) for t in topics):
            raise InvalidRequestError(f"topics must be a sequence of topic names, got {topics!r}")
        names = list(dict.fromkeys(topics))
        if not names:
            return {}
        self._cluster.refresh(names)
        tps = [(name, p) for name in names for p in sorted(self._cluster.topic(name).partitions)]
        offsets = list_offsets_for(self._cluster, tps, wire, isolation, deadline_s=self._timeout_s)
        return {tp: offsets[tp] for tp in tps}

    # --- reassignment and preferred-leader election (spark_log/_reassignment.py) ------------

    def alter_partition_reassignments(
        self, reassignments: Mapping[tuple[str, int], Sequence[int] | None], *, wait: bool = False,
        timeout_s: float | None = None, on_progress: Callable[[int, int], None] | None = None,
    ) -> dict[tuple[str, int], _reassignment.PartitionReassignment]:
        """Move partitions to new replica sets online: ``{(topic, partition): [broker ids]}``
        starts (or replaces) a reassignment, ``None`` cancels one (a no-op if none is
        pending).  The target's first broker becomes the preferred leader.  Returns each
        partition's state after the request; with ``wait``, returns once every reassignment
        completed (``RequestTimeoutError`` after ``timeout_s``, default the request timeout;
        the moves continue).  Refusals: ``UnknownTopicOrPartitionError``,
        ``InvalidRequestError`` (duplicate, unknown or negative broker ids, an empty list).
        ``on_progress(done, total)``: with ``wait``, as ``wait_for_reassignments``."""
        out = _reassignment.alter(self._call, reassignments)
        if wait:
            self.wait_for_reassignments(list(out), timeout_s=timeout_s, on_progress=on_progress)
        return out

    def list_partition_reassignments(self, topic: str | None = None
                                     ) -> dict[tuple[str, int], _reassignment.PartitionReassignment]:
        """Pending reassignments (of ``topic``, or of every topic): replicas, adding, removing."""
        return _reassignment.list_pending(self._call, topic)

    def wait_for_reassignments(self, partitions: Sequence[tuple[str, int]] | None = None, *,
                               timeout_s: float | None = None,
                               on_progress: Callable[[int, int], None] | None = None) -> None:
        """Wait until none of ``partitions`` (every partition if None) is being reassigned.

        ``on_progress(done, total)`` after each look: per replica being added, the offsets
        it copied up to the leader's high watermark, plus one once it is in the ISR (so
        ``total`` is high watermark + 1 a replica, and grows while producers write); a
        partition whose reassignment completed counts as done.  ``done`` never goes back: a
        replica counts what it reached at any look (a new leader, e.g. the target's first
        replica taking over, knows no follower's log end at first).  The last call has
        ``done == total``."""
        last: dict[tuple[str, int], tuple[int, int]] = {}
        reached: dict[tuple[str, int, int], int] = {}  # (topic, partition, replica) -> most counted at any look
        highest: dict[tuple[str, int], int] = {}  # the highest high watermark seen

        def observe(pending: dict[tuple[str, int], _reassignment.PartitionReassignment]) -> None:
            assert on_progress is not None
            described = {topic: self.describe_topic(topic) for topic in sorted({t for t, _ in pending})}
            for tp, state in pending.items():
                p = described[tp[0]].partitions.get(tp[1])
                if p is None or p.high_watermark is None:
                    continue  # its leader did not answer: keep the last look
                hw = highest[tp] = max(p.high_watermark, highest.get(tp, 0))  # a new leader's HW may lag the old one's
                ends = p.log_end_offsets or {}
                done = 0
                for r in state.adding:
                    key = (tp[0], tp[1], r)
                    reached[key] = max(reached.get(key, 0), min(ends.get(r) or 0, hw) + (1 if r in p.isr else 0))
                    done += reached[key]
                last[tp] = (done, (hw + 1) * len(state.adding))
            for tp, (_, whole) in list(last.items()):
                if tp not in pending:
                    last[tp] = (whole, whole)
            on_progress(sum(d for d, _ in last.values()), sum(w for _, w in last.values()))

        _reassignment.wait_done(self._call, partitions, self._timeout_s if timeout_s is None else timeout_s,
                                observe=observe if on_progress is not None else None)

    def elect_leaders(self, topic: str | None = None, partitions: Sequence[int] | None = None
                      ) -> dict[tuple[str, int], _reassignment.ElectionResult]:
        """Preferred-leader election now, for every partition, every partition of ``topic``,
        or ``partitions`` of ``topic``: leadership moves to each partition's first replica if
        it is live and in the ISR.  Returns per partition the leader afterwards and, when the
        preferred replica does not lead, the reason (``ElectionResult.reason``)."""
        return _reassignment.elect(self._call, topic, partitions)

    # --- tiering to Delta (spark_log/_tiering.py, spark_log/tier.py) ---------------------------

    def describe_tier(self, topics: str | Sequence[str]) -> _tiering.TierDescription:
        """Each partition of ``topics`` as its leader sees it: the Delta tier's range
        ``[tier_start, tiered_end)``, the local log's, ``tierable_end``; and the cluster's
        tier location."""
        names = [topics] if isinstance(topics, str) else list(topics)
        return _tiering.describe(self._cluster, names, timeout_s=self._timeout_s)

    def commit_tiered(self, topic: str, partition: int, *, start: int, end: int) -> _tiering.TierInfo:
        """The tiering job's report after a durable Delta commit: the tier holds
        ``[start, end)`` of the partition (the brokers may then delete those segments
        locally, by ``local.retention.*``).  Idempotent."""
        return _tiering.commit(self._cluster, topic, partition, start=start, end=end, timeout_s=self._timeout_s)

    # --- compaction (spark_log/_compaction.py) -----------------------------------------------

    def describe_compaction(self, topic: str, *, replicas: bool = False) -> dict[int, list[_compaction.ReplicaCompaction]]:
        """Each partition's compaction state: the leader's (cleaned offset, dirty ratio,
        latest plan, last clean) and, with ``replicas``, every replica's (leader first)."""
        return _compaction.describe(self._cluster, topic, replicas=replicas, timeout_s=self._timeout_s)

    def compact(self, topic: str, partitions: Sequence[int] | None = None, *, wait: bool = False,
                timeout_s: float | None = None, on_progress: Callable[[int, int], None] | None = None
                ) -> dict[int, list[_compaction.ReplicaCompaction]]:
        """Ask the leaders of ``partitions`` (all if None) of ``topic`` to clean now (below
        their cleanable end, honouring ``min.compaction.lag.ms``).  With ``wait``, returns
        once every replica applied the leader's latest plan (``RequestTimeoutError`` after
        ``timeout_s``, default the request timeout).  Raises ``TopicNotCompactedError`` when
        the topic's ``cleanup.policy`` lacks ``compact``.  ``on_progress(settled, total)``:
        called with the partitions settled so far while waiting."""
        asked = _compaction.compact(self._cluster, topic, partitions, timeout_s=self._timeout_s)
        if wait:
            return self.wait_for_compaction(topic, list(asked), timeout_s=timeout_s, on_progress=on_progress)
        return {p: [state] for p, state in asked.items()}

    def wait_for_compaction(self, topic: str, partitions: Sequence[int] | None = None, *,
                            timeout_s: float | None = None, on_progress: Callable[[int, int], None] | None = None
                            ) -> dict[int, list[_compaction.ReplicaCompaction]]:
        """Wait until every replica of ``partitions`` applied its leader's latest plan and
        the leader has nothing left to plan (see ``compact``)."""
        return _compaction.wait(self._cluster, topic, partitions,
                                timeout_s=self._timeout_s if timeout_s is None else timeout_s, on_progress=on_progress)

    def offer_offset_map(self, topic: str, partition: int, offset_map: pa.Table, *, start: int,
                         end: int) -> _compaction.PlanInfo:
        """Compaction by a Spark job: ``offset_map`` (columns ``key`` binary, ``offset`` int64)
        holds the latest offset of every key in ``[start, end)`` (``start``: the partition's
        cleaned offset).  Each follower gets it for its apply, then the leader publishes a
        plan ending at ``end`` (returned).  Every replica checks the map against its log
        record by record and cleans with its own map if it does not match
        (``InvalidOffsetMapError`` in its log; nothing is lost).  Raises
        ``CompactionConflictError`` when the cleaned offset moved (describe and recompute)."""
        data = _compaction.map_bytes(offset_map)
        info = self._cluster.topic(topic, refresh=True)
        meta = info.partitions.get(partition)
        if meta is None:
            raise errors.UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition}")
        leader_address, _ = self._cluster.leader(topic, partition)
        for replica in meta.replicas:
            address = self._cluster.broker_address(replica)
            if replica != meta.leader_id and address is not None:
                try:
                    _compaction.offer_map(self._cluster, address, topic, partition, start=start, end=end, data=data,
                                          plan=False, timeout_s=self._timeout_s)
                except SparkLogError:
                    pass  # that replica builds its own map
        plan = _compaction.offer_map(self._cluster, leader_address, topic, partition, start=start, end=end, data=data,
                                     plan=True, timeout_s=self._timeout_s)
        assert plan is not None
        return plan
    # --- security: SCRAM users, ACLs, client quotas (spark_log/_security_admin.py) ------------

    def _security(self, method: str, request: Any, *, stub: Any = _security_stub) -> Any:
        """One ``Security`` (or, with ``stub``, another service's) RPC through any broker,
        retried like the other Admin calls."""
        read_only = method in _READ_ONLY
        timeout_s = min(self._timeout_s, _client.READ_TRY_S) if read_only else self._timeout_s

        def once() -> Any:
            return self._cluster.call_any(
                lambda address: getattr(stub(self._cluster.channel(address)), method)(
                    request, timeout=timeout_s), read_only=read_only)
        return retry(once, cluster=self._cluster, deadline_s=self._timeout_s)

    # --- the metadata quorum (spark_log/_quorum.py) ---------------------------------------------

    def describe_quorum(self) -> _quorum.QuorumDescription:
        """The metadata quorum's Raft state as its leader sees it (Kafka's DescribeQuorum):
        leader id and epoch, high watermark, and per voter and observer its log end offset,
        lag and last fetch / caught-up times.  Any broker forwards the request to the leader;
        retried while an election runs (``RequestTimeoutError`` after the request timeout).
        Needs DESCRIBE on the cluster (``ClusterAuthorizationError`` otherwise)."""
        return _quorum.describe(lambda method, request: self._security(method, request, stub=_quorum_stub))

    def add_user(self, name: str, password: str, *, iterations: int = 4096) -> None:
        """Create SCRAM-SHA-256 user ``name``, or change its password.  Only the salted,
        iterated, hashed credential leaves this process; sessions opened with an old
        password end.  ``InvalidRequestError`` for a bad name or iteration count."""
        _sec.add_user(self._security, name, password, iterations=iterations)

    def delete_user(self, name: str) -> None:
        """Delete user ``name`` (its sessions end); ``ResourceNotFoundError`` if absent."""
        _sec.delete_user(self._security, name)

    def list_users(self, names: Sequence[str] = ()) -> list[_sec.ScramUser]:
        """SCRAM users (all, or ``names``): name, mechanism and iterations only."""
        return _sec.list_users(self._security, names)

    def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Add ACLs (``spark_log.AclBinding``); existing ones are not added twice.
        ``SecurityDisabledError`` when the brokers run without an authorizer."""
        _sec.create_acls(self._security, bindings)

    def describe_acls(self, selector: AclBindingFilter | None = None) -> list[AclBinding]:
        """ACLs matching ``selector`` (default: all)."""
        return _sec.describe_acls(self._security, selector or AclBindingFilter())

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
        """Remove every ACL matching any of ``filters``; returns the removed ones."""
        return _sec.delete_acls(self._security, filters)

    def alter_client_quotas(self, entity: Mapping[str, str | None], set: Mapping[str, float] | None = None,  # noqa: A002
                            remove: Sequence[str] = ()) -> None:
        """Set (bytes per second) or remove ``producer_byte_rate`` / ``consumer_byte_rate``
        of a Kafka quota entity: ``{"user": "alice"}``, ``{"client-id": "etl"}``, both, or
        ``None`` values for the default user / client id."""
        _sec.alter_client_quotas(self._security, entity, set, remove)

    def describe_client_quotas(self) -> list[_sec.QuotaEntry]:
        """Every quota entity and its rates."""
        return _sec.describe_client_quotas(self._security)

    def whoami(self) -> str:
        """The principal a broker authenticates this client as (``User:alice``,
        ``User:CN=...``, ``User:ANONYMOUS``)."""
        from .proto import security_pb2 as spb

        return str(self._security("WhoAmI", spb.WhoAmIRequest()).principal)

    # --- consumer groups (spark_log/_group_admin.py) ------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every group the cluster knows (with members or committed offsets), by id:
        ``GroupListing(group_id, state, members, coordinator_id)``."""
        return self._groups.list_groups()

    def describe_group(self, group_id: str) -> GroupDescription:
        """The group's state (``Empty``, ``Reconciling``, ``Stable``), epochs, assignor,
        members (subscription, current and target assignment) and, per partition it
        committed or a member owns, ``GroupPartition(committed_offset, metadata,
        log_end_offset, lag, member_id)``.  ``GroupIdNotFoundError`` for an unknown group."""
        return self._groups.describe_group(group_id)

    def list_group_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        """Every committed offset of the group."""
        return self._groups.committed(group_id)

    def alter_group_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int | tuple[int, str] | OffsetAndMetadata]
                            ) -> None:
        """Commit ``offsets`` (``{(topic, partition): offset | (offset, metadata)}``) for a
        group without members; ``NonEmptyGroupError`` while it has some."""
        self._groups.alter_group_offsets(group_id, offsets)

    def reset_group_offsets(self, group_id: str, topics: str | Sequence[str], *,
                            to: str | datetime.datetime | None = None, shift_by: int | None = None,
                            to_offset: int | None = None, partitions: Sequence[int] | None = None,
                            execute: bool = True) -> dict[tuple[str, int], int]:
        """Reset the group's offsets of ``topics`` (all their partitions, or ``partitions``)
        to ``to="earliest"|"latest"|datetime`` (the first record at or after it), the
        committed offsets shifted by ``shift_by`` (no committed offset: from the earliest),
        or ``to_offset``; every result is clamped to the partition's [earliest, latest].
        Returns the new offsets; with ``execute=False`` commits nothing (a dry run).
        ``NonEmptyGroupError`` while the group has members."""
        return self._groups.reset_group_offsets(group_id, topics, to=to, shift_by=shift_by, to_offset=to_offset,
                                                partitions=partitions, execute=execute)

    def delete_group(self, group_id: str) -> None:
        """Delete the group and its committed offsets; ``NonEmptyGroupError`` while it has
        members, ``GroupIdNotFoundError`` if it does not exist."""
        self._groups.delete_group(group_id)

    def delete_group_offsets(self, group_id: str, topic: str, partitions: Sequence[int] | None = None
                             ) -> list[tuple[str, int]]:
        """Delete the group's committed offsets of ``topic`` (all its partitions, or
        ``partitions``); returns what was deleted.  ``GroupSubscribedToTopicError`` when live
        members subscribe to ``topic``."""
        return self._groups.delete_group_offsets(group_id, topic, partitions)

    # -- transactions --------------------------------------------------------------------

    def describe_transaction(self, transactional_id: str) -> dict[str, object]:
        """What the coordinator holds for ``transactional_id`` (state, producer id and
        epoch, the open transaction's participants and their partitions, the last
        committed label of a Spark sink)."""
        from ._txn_client import TxnRpc
        from .proto import transactions_pb2 as tpb

        answer = TxnRpc(self._cluster, timeout_s=self._timeout_s).call(
            transactional_id, "DescribeTxn", tpb.DescribeTxnRequest(transactional_id=transactional_id))
        return {"transactional_id": answer.transactional_id, "state": answer.state,
                "producer_id": answer.producer_id, "producer_epoch": answer.producer_epoch, "label": answer.label,
                "committed_label": answer.committed_label, "timeout_ms": answer.timeout_ms,
                "coordinator_id": answer.coordinator_id,
                "participants": {p.producer_id: sorted((t.topic, t.partition) for t in p.partitions)
                                 for p in answer.participants}}

    def end_batch_transaction(self, transactional_id: str, *, label: int, run: str, commit: bool,
                              participants: Sequence[int], timeout_s: float = 120.0) -> None:
        """The Spark sink driver's commit (or abort) of micro-batch ``label``'s transaction
        (opened by writer ``run``): only ``participants`` (the task attempts whose results
        Spark took) commit, every other joiner's records are aborted; returns once every
        marker is written.  ``InvalidTxnStateError`` when the batch's transaction was
        aborted meanwhile (a timeout, a newer run of the query)."""
        from ._txn_client import TxnRpc
        from .proto import transactions_pb2 as tpb

        TxnRpc(self._cluster, timeout_s=60.0).call(transactional_id, "EndTxn", tpb.EndTxnRequest(
            transactional_id=transactional_id, commit=commit, label=label, run=run, participants=list(participants)),
            deadline_s=timeout_s)

    def close(self) -> None:
        self._cluster.close()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _config_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
