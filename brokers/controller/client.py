"""ControllerClient: finds the active controller among the voters and talks to it.

    client = ControllerClient(["127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"])
    epoch = client.register_broker(broker_id=1, incarnation=uuid4().hex, address="127.0.0.1:9092")
    client.heartbeat(broker_id=1, broker_epoch=epoch)
    topic = client.create_topic("clicks", partitions=6, replication_factor=3)

Routing: requests go to the last known active controller, else to the voters in turn.
``NOT_CONTROLLER`` with a ``leader_address`` hint moves to that address at once; a hint
naming the node asked (it was just elected and is catching up) or ``THROTTLED`` (busy)
retries the same node after a back-off (``retry_backoff_ms``, doubling up to
``max_backoff_ms``, so a failover is noticed within about one election timeout);
without a hint (no leader yet) the client backs off and tries the next voter.  Connection-level
failures (``BrokerNotAvailableError``) move to the next voter as well.
``RequestTimeoutError`` is retried only for idempotent requests (heartbeats,
registrations, describes), since a timed-out create may still have happened.  After
``timeout_s`` seconds in total, the last error is raised.  Refusals (invalid topic,
fenced epoch, ...) are raised at once as their typed ``SparkLogError``.
Fault hook (tests, off by default): a voter whose link to this process's node is cut by
``SPARK_LOG_REPLICA_FAULTS`` (``brokers.net.faults``) answers nothing: each call to it
fails at once with ``BrokerNotAvailableError`` (needs ``voters`` as a mapping of ids).

Thread-safety: one client may be shared by threads (channels are thread-safe; the
leader hint is a plain attribute).  ``close()`` closes the channels.
"""
from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import grpc
import pyarrow as pa

from brokers.metadata.alter_isr import AlterIsr
from brokers.metadata.image import BrokerInfo, MetadataImage, PartitionInfo, SchemaVersion, TopicImage, frozen_map
from brokers.metadata.schema_codec import schema_from_bytes, schema_to_bytes
from brokers.metadata.snapshot import decode_image
from brokers.net import faults as link_faults
from brokers.net.channels import CONTROLLER_CHANNEL_OPTIONS, PLAINTEXT, Channels
from spark_log import errors
from spark_log.config import TopicConfig
from spark_log.proto import controller_pb2 as pb
from spark_log.proto import controller_pb2_grpc as pb_grpc
from spark_log.proto import isr_pb2, isr_pb2_grpc, quorum_pb2, quorum_pb2_grpc, security_pb2_grpc

from .controller import HeartbeatResult
from .wire import partition_from_pb

__all__ = ["ClusterDescription", "ControllerClient", "ElectionResult"]

# The generated gRPC module (spark_log/proto/controller_pb2_grpc.py) has no annotations; this
# name gives its stub constructor the type relied on here.
_new_stub: Callable[[grpc.Channel], pb_grpc.ControllerServiceStub] = pb_grpc.ControllerServiceStub
_new_security_stub: Callable[[grpc.Channel], Any] = security_pb2_grpc.SecurityControllerStub
_new_isr_stub: Callable[[grpc.Channel], Any] = isr_pb2_grpc.IsrControllerStub
_new_quorum_stub: Callable[[grpc.Channel], Any] = quorum_pb2_grpc.QuorumControllerStub


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    """One voter's view: who it thinks the controller is, and the registered brokers."""

    node_id: int
    is_active: bool
    controller_id: int | None
    controller_address: str | None
    controller_epoch: int
    metadata_offset: int
    brokers: Mapping[int, BrokerInfo]


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """One partition's preferred-leader election: its leader afterwards (None: offline)
    and, when the preferred replica does not lead, why (``reason``)."""

    topic: str
    partition: int
    preferred: int | None
    leader: int | None
    reason: str | None


def _topic_from_pb(desc: pb.TopicDescription) -> TopicImage:
    """A ``TopicImage`` from a description (its ``schemas`` hold only the latest)."""
    schemas: tuple[SchemaVersion, ...] = ()
    if desc.schema:
        schemas = (SchemaVersion(schema_id=desc.schema_id, schema=schema_from_bytes(desc.schema)),)
    return TopicImage(
        name=desc.name,
        topic_id=desc.topic_id,
        kind=desc.kind,
        key_columns=tuple(desc.key_columns),
        config=TopicConfig().with_overrides(dict(desc.configs)),
        partitions=frozen_map(dict(partition_from_pb(p) for p in desc.partitions)),
        schemas=schemas,
    )


class ControllerClient:
    """A client of the controller quorum (see the module docstring)."""

    def __init__(
        self,
        voters: Sequence[str] | Mapping[int, str],
        *,
        timeout_s: float = 15.0,
        rpc_timeout_s: float = 5.0,
        retry_backoff_ms: int = 25,
        max_backoff_ms: int = 100,
        channels: Channels = PLAINTEXT,
    ) -> None:
        addresses = list(voters.values()) if isinstance(voters, Mapping) else list(voters)
        if not addresses:
            raise errors.InvalidConfigError("a controller client needs at least one voter address")
        self.voters = addresses
        self.channels = channels  # the node's security (brokers.net.channels)
        self._closed = False
        self.timeout_s = timeout_s
        self.rpc_timeout_s = rpc_timeout_s
        self.retry_backoff_ms = retry_backoff_ms
        self.max_backoff_s = max_backoff_ms / 1000
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, pb_grpc.ControllerServiceStub] = {}
        self._security_stubs: dict[str, Any] = {}
        self._isr_stubs: dict[str, Any] = {}
        self._quorum_stubs: dict[str, Any] = {}
        self._rotation = itertools.cycle(range(len(addresses)))
        self.leader_hint: str | None = None
        # tests' network-partition hook (brokers.net.faults); None, one check per call, when off
        self._voter_ids = {a: i for i, a in voters.items()} if isinstance(voters, Mapping) else {}
        self._links = link_faults.process_links()

    def __enter__(self) -> "ControllerClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every channel; a call in flight, or retrying, then fails at once with
        ``BrokerNotAvailableError`` instead of reconnecting until its deadline (so a node
        stops promptly even while its ISR thread or a forwarded Admin request waits)."""
        with self._lock:
            self._closed = True
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
            self._stubs.clear()
            self._security_stubs.clear()
            self._isr_stubs.clear()
            self._quorum_stubs.clear()

    def _channel(self, address: str) -> grpc.Channel:
        """The channel to ``address`` (caller holds ``_lock``)."""
        if self._closed:
            raise errors.BrokerNotAvailableError("the controller client is closed")
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = self.channels.open(address, CONTROLLER_CHANNEL_OPTIONS)
        return channel

    def _stub(self, address: str) -> Any:
        with self._lock:
            stub = self._stubs.get(address)
            if stub is None:
                stub = self._stubs[address] = _new_stub(self._channel(address))
            return stub

    def _security_stub(self, address: str) -> Any:
        """The ``SecurityController`` service of ``address`` (security.proto)."""
        with self._lock:
            stub = self._security_stubs.get(address)
            if stub is None:
                stub = self._security_stubs[address] = _new_security_stub(self._channel(address))
            return stub

    def _isr_stub(self, address: str) -> Any:
        """The ``IsrController`` service of ``address`` (isr.proto)."""
        with self._lock:
            stub = self._isr_stubs.get(address)
            if stub is None:
                stub = self._isr_stubs[address] = _new_isr_stub(self._channel(address))
            return stub

    def _quorum_stub(self, address: str) -> Any:
        """The ``QuorumController`` service of ``address`` (quorum.proto)."""
        with self._lock:
            stub = self._quorum_stubs.get(address)
            if stub is None:
                stub = self._quorum_stubs[address] = _new_quorum_stub(self._channel(address))
            return stub

    def _next_voter(self) -> str:
        with self._lock:
            return self.voters[next(self._rotation)]

    def _once(self, address: str, method: str, request: Any, timeout_s: float, *, security: bool = False,
              quorum: bool = False, isr: bool = False) -> Any:
        if self._links is not None and self._links.cut_to(self._voter_ids.get(address)):
            raise errors.BrokerNotAvailableError(f"link to controller voter {address} is cut (fault hook)")
        stub = (self._security_stub(address) if security
                else self._quorum_stub(address) if quorum else self._isr_stub(address) if isr else self._stub(address))
        try:
            return getattr(stub, method)(request, timeout=timeout_s)
        except grpc.RpcError as exc:
            raise errors.from_rpc_error(exc, address=address) from None

    def _call(self, method: str, request: Any, *, idempotent: bool, sticky: bool = True,
              security: bool = False, quorum: bool = False, isr: bool = False) -> Any:
        deadline = time.monotonic() + self.timeout_s
        backoff_s = self.retry_backoff_ms / 1000
        address = self.leader_hint or self._next_voter()
        while True:
            remaining = deadline - time.monotonic()
            try:
                response = self._once(address, method, request, max(0.05, min(self.rpc_timeout_s, remaining)),
                                      security=security, quorum=quorum, isr=isr)
                if sticky:
                    self.leader_hint = address
                return response
            except errors.NotControllerError as exc:
                hint = exc.leader_address
                retry_now = hint is not None and hint != address
                # hint == address: just elected and catching up; ask it again shortly
                next_address = hint if hint is not None else self._next_voter()
                error: errors.SparkLogError = exc
            except errors.ThrottledError as exc:
                retry_now, next_address, error = False, address, exc
            except (errors.BrokerNotAvailableError, errors.RequestTimeoutError) as exc:
                if isinstance(exc, errors.RequestTimeoutError) and not idempotent:
                    raise
                retry_now, next_address, error = False, self._next_voter(), exc
            self.leader_hint = None
            if time.monotonic() >= deadline or self._closed:
                raise error
            if not retry_now:
                time.sleep(min(backoff_s, max(0.0, deadline - time.monotonic())))
                backoff_s = min(self.max_backoff_s, backoff_s * 2)
            address = next_address

    # --- brokers -----------------------------------------------------------------------

    def register_broker(self, *, broker_id: int, incarnation: str, address: str, rack: str = "") -> int:
        """Register (a retry with the same incarnation is harmless); returns the broker epoch."""
        request = pb.RegisterBrokerRequest(broker_id=broker_id, incarnation=incarnation, address=address, rack=rack)
        return int(self._call("RegisterBroker", request, idempotent=True).broker_epoch)

    def heartbeat(self, *, broker_id: int, broker_epoch: int) -> HeartbeatResult:
        """``FencedEpochError`` means: register again."""
        request = pb.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=broker_epoch)
        response = self._call("BrokerHeartbeat", request, idempotent=True)
        return HeartbeatResult(
            fenced=response.fenced, broker_epoch=response.broker_epoch, metadata_offset=response.metadata_offset
        )

    # --- topics ------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        *,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, Any] | None = None,
        schema: pa.Schema | None = None,
        key_columns: Sequence[str] = (),
        kind: str | None = None,
    ) -> TopicImage:
        """Create a topic; returns its image (``schemas`` holds only the first schema, none
        for ``kind="typed"`` without a schema)."""
        request = pb.CreateTopicRequest(
            name=name,
            partitions=partitions,
            replication_factor=replication_factor,
            configs={str(k): _config_text(v) for k, v in (config or {}).items()},
            schema=schema_to_bytes(schema) if schema is not None else b"",
            key_columns=list(key_columns),
            kind=kind or "",
        )
        return _topic_from_pb(self._call("CreateTopic", request, idempotent=False).topic)

    def delete_topic(self, name: str) -> None:
        self._call("DeleteTopic", pb.DeleteTopicRequest(name=name), idempotent=False)

    def alter_configs(
        self, topic: str, *, set: Mapping[str, Any] | None = None, delete: Sequence[str] = ()  # noqa: A002
    ) -> dict[str, str]:
        """Returns every config of the topic after the change (dotted names)."""
        request = pb.AlterConfigsRequest(
            topic=topic, set={str(k): _config_text(v) for k, v in (set or {}).items()}, delete=list(delete)
        )
        return dict(self._call("AlterConfigs", request, idempotent=True).configs)

    def register_schema(self, topic: str, schema: pa.Schema) -> int:
        """Add a compatible schema version; returns its schema id."""
        request = pb.RegisterSchemaRequest(topic=topic, schema=schema_to_bytes(schema))
        return int(self._call("RegisterSchema", request, idempotent=True).schema_id)

    def alter_partition(
        self,
        *,
        broker_id: int,
        broker_epoch: int,
        topic: str,
        partition: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: Sequence[int],
    ) -> PartitionInfo:
        """Ask to change a partition's ISR as its leader; returns the new partition state.
        ``FencedEpochError``: the caller's view is stale (refresh metadata, do not retry)."""
        request = pb.AlterPartitionRequest(
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            topic=topic,
            partition=partition,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            new_isr=list(new_isr),
        )
        return partition_from_pb(self._call("AlterPartition", request, idempotent=False).partition)[1]

    def alter_partitions(self, items: Sequence[AlterIsr]) -> list[PartitionInfo | errors.SparkLogError]:
        """Many ``alter_partition`` requests in one call (isr.proto), committed together; per
        item, in order, the new partition state or the typed refusal.  A failure of the
        whole call raises (then each item's outcome is unknown)."""
        request = isr_pb2.AlterPartitionsRequest(items=[
            pb.AlterPartitionRequest(broker_id=i.broker_id, broker_epoch=i.broker_epoch, topic=i.topic,
                                     partition=i.partition, leader_epoch=i.leader_epoch,
                                     partition_epoch=i.partition_epoch, new_isr=list(i.new_isr))
            for i in items])
        response = self._call("AlterPartitions", request, idempotent=False, isr=True)
        out: list[PartitionInfo | errors.SparkLogError] = []
        for result in response.results:
            if result.error_code:
                out.append(errors.from_code(result.error_code, result.error_message))
            else:
                out.append(partition_from_pb(result.partition)[1])
        if len(out) != len(items):
            raise errors.SparkLogError(f"the controller answered {len(out)} of {len(items)} ISR changes")
        return out

    def alter_partition_reassignment(self, topic: str, partition: int, target: Sequence[int]) -> PartitionInfo:
        """Start, replace or (empty ``target``) cancel a reassignment (see
        ``brokers.controller.reassignment``); returns the partition's state afterwards.
        Idempotent: the same target (or a cancel) again changes nothing."""
        request = pb.AlterPartitionReassignmentsRequest(topic=topic, partition=partition, target_replicas=list(target))
        return partition_from_pb(self._call("AlterPartitionReassignments", request, idempotent=True).partition)[1]

    def elect_leaders(self, partitions: Sequence[tuple[str, int]] | None = None) -> list[ElectionResult]:
        """Preferred-leader election now (every partition if ``partitions`` is None)."""
        request = pb.ElectLeadersRequest(partitions=[pb.PartitionRef(topic=t, partition=p) for t, p in partitions or ()])
        response = self._call("ElectLeaders", request, idempotent=True)
        return [
            ElectionResult(
                topic=r.topic,
                partition=r.partition,
                preferred=None if r.preferred < 0 else r.preferred,
                leader=None if r.leader < 0 else r.leader,
                reason=r.reason or None,
            )
            for r in response.results
        ]

    # --- security (security.proto's SecurityController) ---------------------------------------

    def security(self, method: str, request: Any) -> Any:
        """Forward a user, ACL or quota change (``AlterUserScramCredentials``, ``CreateAcls``,
        ``DeleteAcls``, ``AlterClientQuotas``) to the active controller; returns its answer
        (which carries the metadata offset holding the change).  Each is idempotent."""
        return self._call(method, request, idempotent=True, security=True)

    # --- describing ----------------------------------------------------------------------

    def describe_quorum(self) -> quorum_pb2.DescribeQuorumResponse:
        """The Raft leader's view of the quorum (quorum.proto's ``QuorumController``), as it
        answered: followed to the leader through NOT_CONTROLLER hints, retried while no
        leader is known (until ``timeout_s``)."""
        response: quorum_pb2.DescribeQuorumResponse = self._call(
            "DescribeQuorum", quorum_pb2.DescribeQuorumRequest(), idempotent=True, quorum=True)
        return response

    def describe_cluster(self, address: str | None = None) -> ClusterDescription:
        """One voter's view (``address``, or any reachable voter)."""
        request = pb.DescribeClusterRequest()
        if address is not None:
            response = self._once(address, "DescribeCluster", request, self.rpc_timeout_s)
        else:
            response = self._call("DescribeCluster", request, idempotent=True, sticky=False)
        return ClusterDescription(
            node_id=response.node_id,
            is_active=response.is_active,
            controller_id=None if response.controller_id < 0 else response.controller_id,
            controller_address=response.controller_address or None,
            controller_epoch=response.controller_epoch,
            metadata_offset=response.metadata_offset,
            brokers=frozen_map(
                {
                    b.broker_id: BrokerInfo(
                        broker_id=b.broker_id,
                        incarnation=b.incarnation,
                        broker_epoch=b.broker_epoch,
                        address=b.address,
                        rack=b.rack,
                        fenced=b.fenced,
                    )
                    for b in response.brokers
                }
            ),
        )

    def describe_image(self, address: str | None = None) -> MetadataImage:
        """The metadata image of one voter (``address``, or any reachable voter)."""
        request = pb.DescribeImageRequest()
        if address is not None:
            response = self._once(address, "DescribeImage", request, self.rpc_timeout_s)
        else:
            response = self._call("DescribeImage", request, idempotent=True, sticky=False)
        return decode_image(response.snapshot)


def _config_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
