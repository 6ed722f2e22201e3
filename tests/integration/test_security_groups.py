"""Group and transaction calls on the secured cluster (``sasl_cluster``) never reach a topic
the caller has no ACL on (found by a security review).  ``mallory`` may READ group G (so
DESCRIBE it) and WRITE her transactional id and an output topic; she has no ACL on topic
``secret``, whose offset 42 the admin committed for G."""
from __future__ import annotations

import itertools
import uuid

import grpc
import pytest

from spark_log import Admin, Producer, errors
from spark_log._secure_channel import open_channel
from spark_log.acls import Operation, ResourceType
from spark_log.proto import groups_pb2 as gpb
from tests.support.secure_cluster import SecuredCluster

pytestmark = pytest.mark.integration

_n = itertools.count()
_GROUPS = "/spark_log.groups.v1.GroupCoordinator/"


def _name(prefix: str) -> str:
    return f"{prefix}-{next(_n)}-{uuid.uuid4().hex[:6]}"


def _call(channel: grpc.Channel, method: str, request: object, response_type: type) -> object:
    call = channel.unary_unary(_GROUPS + method, request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=response_type.FromString)  # type: ignore[attr-defined]
    return call(request, timeout=15)


def _setup(sasl_cluster: SecuredCluster) -> tuple[str, str, object, str]:
    secret, group = _name("secret"), _name("grp")
    with sasl_cluster.admin() as admin:
        admin.create_topic(secret, partitions=3, replication_factor=1)
        admin.alter_group_offsets(group, {(secret, 0): 42})
    mallory = sasl_cluster.user(_name("mallory"))
    principal = f"User:{mallory.username}"
    sasl_cluster.allow(principal, ResourceType.GROUP, group, Operation.READ)
    return secret, group, mallory, principal


def test_describe_group_shows_no_offsets_of_topics_the_caller_may_not_describe(sasl_cluster: SecuredCluster) -> None:
    secret, group, mallory, _ = _setup(sasl_cluster)
    channel = _coordinator(sasl_cluster, mallory, group)
    try:
        described = _call(channel, "DescribeGroup", gpb.DescribeGroupRequest(group_id=group), gpb.DescribeGroupResponse)
    finally:
        channel.close()
    assert [o.topic for o in described.offsets] == []  # type: ignore[attr-defined]
    with sasl_cluster.admin() as admin:  # the admin still sees them
        assert admin.describe_group(group).partitions[(secret, 0)].committed_offset == 42


def _coordinator(sasl_cluster: SecuredCluster, security: object, group: str) -> grpc.Channel:
    channel = open_channel(sasl_cluster.bootstrap.split(",")[0], security)  # type: ignore[arg-type]
    try:
        found = _call(channel, "FindCoordinator", gpb.FindCoordinatorRequest(group_id=group), gpb.FindCoordinatorResponse)
    finally:
        channel.close()
    return open_channel(found.address, security)  # type: ignore[attr-defined,arg-type]


def test_a_heartbeat_naming_a_topic_the_caller_may_not_describe_is_refused(sasl_cluster: SecuredCluster) -> None:
    """The coordinator would assign its partitions, telling their count (and, as the
    consumer reads them, the records) to a caller that may not even see the topic."""
    secret, group, mallory, _ = _setup(sasl_cluster)
    channel = _coordinator(sasl_cluster, mallory, group)
    try:
        with pytest.raises(grpc.RpcError) as refused:
            _call(channel, "ConsumerGroupHeartbeat", gpb.ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, subscribed_topic_names=[secret],
                rebalance_timeout_ms=30_000), gpb.ConsumerGroupHeartbeatResponse)
    finally:
        channel.close()
    assert isinstance(errors.from_rpc_error(refused.value), errors.TopicAuthorizationError)


def test_a_transactions_offsets_need_read_on_their_topics(sasl_cluster: SecuredCluster) -> None:
    secret, group, mallory, principal = _setup(sasl_cluster)
    out, txn = _name("out"), _name("txn")
    with sasl_cluster.admin() as admin:
        admin.create_topic(out, partitions=1, replication_factor=1)
    sasl_cluster.allow(principal, ResourceType.TOPIC, out, Operation.WRITE)
    sasl_cluster.allow(principal, ResourceType.TRANSACTIONAL_ID, txn, Operation.WRITE)
    with Admin(sasl_cluster.bootstrap, security=mallory) as admin:  # type: ignore[arg-type]
        with pytest.raises(errors.TopicAuthorizationError):  # her own commit is refused too
            admin.alter_group_offsets(group, {(secret, 0): 0})
    with Producer(sasl_cluster.bootstrap, security=mallory, transactional_id=txn) as producer:  # type: ignore[arg-type]
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(out, b"x")
        with pytest.raises(errors.TopicAuthorizationError):
            producer.send_offsets_to_transaction({(secret, 0): 0}, group)
        producer.abort_transaction()
    with sasl_cluster.admin() as admin:
        assert admin.describe_group(group).partitions[(secret, 0)].committed_offset == 42
