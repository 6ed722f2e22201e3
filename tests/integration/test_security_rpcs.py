"""Every RPC the node serves is authenticated and authorized, whoever registered it.

One in-process node (broker + controller, ``SASL_SSL``, authorizer on, inter-node secret).
The test takes the methods the node's server actually registered (``node.server.methods``:
the broker part, the controller, Raft, security, and one extra service a registrar adds
with no declared rule, as a feature built later would).  Every one of them but that test
service must have a rule in ``brokers/security/rules.py`` (the test fails naming each that
has none, so a service merged from another branch shows up here), no service may be
registered through a handler whose methods cannot be listed, and every method is called
with a request (built from its protocol descriptor) naming a resource in every field:

- without credentials: refused with ``AuthenticationError`` (only the SCRAM exchange itself
  is exempt, and it refuses an empty exchange the same way);
- as a SCRAM user without any ACL: refused with a typed authorization error before any
  handler runs (``WhoAmI`` is open to every authenticated caller, ``ListTopics`` and
  ``ListGroups`` answer only the topics or groups the caller may describe: none);
- the undeclared service is refused even for a principal that ACLs allow everything.

Adds about 3 s.
"""
from __future__ import annotations

from typing import Iterator

import grpc
import pytest
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

import spark_log.proto.broker_pb2  # noqa: F401 - registers the descriptors
import spark_log.proto.compaction_pb2  # noqa: F401
import spark_log.proto.controller_pb2  # noqa: F401
import spark_log.proto.groups_pb2  # noqa: F401
import spark_log.proto.raft_pb2  # noqa: F401
import spark_log.proto.security_pb2  # noqa: F401
from brokers.launcher.secure import upsert_user
from brokers.net.channels import TlsChannels
from brokers.net.node_auth import HEADER, node_token
from brokers.node import Node
from brokers.security.certs import LocalPki, write_secret
from brokers.security.rules import undeclared
from brokers.server import register as register_broker_part
from spark_log import ClientSecurity, errors
from spark_log._secure_channel import open_channel
from spark_log.proto import broker_pb2 as bpb
from spark_log.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from spark_log.config import BrokerConfig, RaftConfig, SecurityConfig, from_mapping
from tests.support.ports import free_port
from tests.support.wait import wait_until

EXEMPT = {"/spark_log.security.v1.Security/ScramStart", "/spark_log.security.v1.Security/ScramFinish"}
# open to any authenticated principal: who am I, filtered listings, and where a broker's data
# listener is (an address, as Metadata shows broker addresses; the listener checks each request)
OPEN = {"/spark_log.security.v1.Security/WhoAmI", "/spark_log.broker.v1.Admin/ListTopics",
        "/spark_log.groups.v1.GroupCoordinator/ListGroups", "/spark_log.data.v1.DataListener/Describe"}
NAME = "secret-topic"
UNDECLARED = "spark_log.test.Undeclared"


def _node_channel(node: Node, secret: bytes) -> grpc.Channel:
    """A channel to ``node`` as node 0 (the inter-node token: principal ``Node:0``, a super user)."""
    assert node.security.files is not None
    return TlsChannels(node.security.files, metadata=((HEADER, node_token(secret, 0)),)).open(node.address)


def _undeclared(node: Node) -> None:
    assert node.server is not None
    node.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(UNDECLARED, {
        "Call": grpc.unary_unary_rpc_method_handler(lambda request, context: b"served")}),))


@pytest.fixture(scope="module")
def secured_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, LocalPki, bytes]]:
    root = tmp_path_factory.mktemp("secured-node")
    pki = LocalPki.create(root / "tls")
    issued = pki.issue("spark-log-node-1", file_stem="node-1")
    secret_file = write_secret(root / "tls" / "secret")
    security = from_mapping(SecurityConfig, {
        "security_protocol": "SASL_SSL", "ssl_certfile": str(issued.cert), "ssl_keyfile": str(issued.key),
        "ssl_cafile": str(pki.ca_file), "inter_node_secret_file": str(secret_file), "authorizer_enabled": True,
        "super_users": ["User:admin"]})
    config = BrokerConfig(broker_id=1, port=free_port(), data_dir=str(root / "n1"), security=security,
                          raft=RaftConfig(tick_ms=10, election_ticks=10, fetch_wait_ticks=2))
    node = Node(config, registrars=[register_broker_part, _undeclared])
    node.start()
    try:
        wait_until(lambda: node.controller is not None and node.controller.is_active and node.broker_epoch() >= 0,
                   timeout=30, message="the secured node serves")
        secret = secret_file.read_bytes().strip()
        channel = _node_channel(node, secret)
        try:
            upsert_user(channel, "nobody", "nobody-pw")
            upsert_user(channel, "admin", "admin-pw")
        finally:
            channel.close()
        from spark_log import Admin

        with Admin(node.address, security=ClientSecurity(protocol="SASL_SSL", ca_file=str(pki.ca_file),
                                                         username="admin", password="admin-pw")) as admin:

            def serving() -> bool:
                try:
                    admin.list_offsets_for_topics([])
                    admin._cluster.refresh()
                except errors.BrokerNotAvailableError:
                    return False
                return True

            wait_until(serving, timeout=30, message="the broker caught up with the metadata log")
            admin.create_topic(NAME)
        yield node, pki, secret
    finally:
        node.stop()


def _populated(descriptor: Descriptor, depth: int = 0) -> Message:
    """A request of ``descriptor``'s type naming ``NAME`` in every string field, with one
    element in every repeated message field (maps left empty)."""
    message = message_factory.GetMessageClass(descriptor)()
    for field in descriptor.fields:
        repeated = field.is_repeated
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            assert field.message_type is not None
            if depth >= 3 or field.message_type.GetOptions().map_entry:
                continue
            child = _populated(field.message_type, depth + 1)
            if repeated:
                getattr(message, field.name).append(child)
            else:
                getattr(message, field.name).CopyFrom(child)
        elif field.type == FieldDescriptor.TYPE_STRING:
            if repeated:
                getattr(message, field.name).append(NAME)
            else:
                setattr(message, field.name, NAME)
    return message


def _requests(methods: list[str]) -> list[tuple[str, bytes]]:
    """``(path, request bytes)`` of every method path in ``methods``."""
    pool = descriptor_pool.Default()
    requests = []
    for path in methods:
        if path.startswith(f"/{UNDECLARED}/"):
            requests.append((path, b""))
            continue
        # KeyError: a served method with no protocol descriptor (import its *_pb2 module above)
        descriptor = pool.FindMethodByName(path.strip("/").replace("/", "."))
        requests.append((path, _populated(descriptor.input_type).SerializeToString()))
    return requests


def _call(channel: grpc.Channel, path: str, request: bytes = b"") -> errors.SparkLogError | None:
    try:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(path)
        call(request, timeout=10)
    except grpc.RpcError as exc:
        return errors.from_rpc_error(exc)
    return None


def test_every_served_rpc_is_authenticated_and_authorized(secured_node: tuple[Node, LocalPki, bytes]) -> None:
    node, pki, _ = secured_node
    assert node.server is not None
    services = node.server.services
    for expected in ("spark_log.broker.v1.Broker", "spark_log.broker.v1.Admin", "spark_log.raft.RaftService",
                     "spark_log.controller.ControllerService", "spark_log.security.v1.Security",
                     "spark_log.security.v1.SecurityController", "spark_log.groups.v1.GroupCoordinator",
                     "spark_log.compaction.v1.Compaction", UNDECLARED):
        assert expected in services
    assert not node.server.unlisted, f"services whose methods cannot be listed: {node.server.unlisted}"
    served = [path for path in node.server.methods if not path.startswith(f"/{UNDECLARED}/")]
    missing = undeclared(served)
    assert not missing, ("served RPCs without an access rule: declare each in brokers/security/rules.py RULES "
                         f"(Kafka's operation and resource for it): {missing}")
    # the same check sees the test's registered service that has no rule
    assert undeclared(node.server.methods) == [f"/{UNDECLARED}/Call"]
    paths = _requests(node.server.methods)
    assert len(paths) > 35
    anonymous = open_channel(node.address, ClientSecurity(protocol="SSL", ca_file=str(pki.ca_file)))
    nobody = open_channel(node.address, ClientSecurity(protocol="SASL_SSL", ca_file=str(pki.ca_file),
                                                       username="nobody", password="nobody-pw"))
    try:
        for path, request in paths:
            refused = _call(anonymous, path, request)
            assert isinstance(refused, errors.AuthenticationError), f"{path} without credentials: {refused!r}"
            if path in EXEMPT:
                continue
            refused = _call(nobody, path, request)
            if path in OPEN:
                assert refused is None, f"{path}: {refused!r}"
                continue
            assert isinstance(refused, errors.UnauthorizedError), f"{path} as User:nobody: {refused!r}"
        from spark_log import Admin

        with Admin(node.address, security=ClientSecurity(protocol="SASL_SSL", ca_file=str(pki.ca_file),
                                                         username="nobody", password="nobody-pw")) as client:
            assert client.whoami() == "User:nobody"
            assert client.list_topics() == []  # the topic exists; nobody may not describe it
            assert client.list_groups() == []  # nobody may describe no group
    finally:
        anonymous.close()
        nobody.close()


def test_an_rpc_without_a_declared_rule_is_refused_even_to_a_principal_allowed_everything(
        secured_node: tuple[Node, LocalPki, bytes]) -> None:
    node, pki, secret = secured_node
    channel = _node_channel(node, secret)
    try:
        # a node principal (super user) may call anything, the undeclared service included
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(f"/{UNDECLARED}/Call")
        assert call(b"", timeout=10) == b"served"
    finally:
        channel.close()
    admin = ClientSecurity(protocol="SASL_SSL", ca_file=str(pki.ca_file), username="admin", password="admin-pw")
    channel = _node_channel(node, secret)
    try:
        upsert_user(channel, "everything", "everything-pw")
    finally:
        channel.close()
    from spark_log import Admin

    with Admin(node.address, security=admin) as client:
        client.create_acls([AclBinding(kind, "*", PatternType.LITERAL, "User:everything", "*", Operation.ALL,
                                       Permission.ALLOW) for kind in (ResourceType.TOPIC, ResourceType.GROUP,
                                                                      ResourceType.TRANSACTIONAL_ID)]
                           + [AclBinding(ResourceType.CLUSTER, "spark-log-cluster", PatternType.LITERAL,
                                         "User:everything", "*", Operation.ALL, Permission.ALLOW)])
    everything = open_channel(node.address, ClientSecurity(protocol="SASL_SSL", ca_file=str(pki.ca_file),
                                                           username="everything", password="everything-pw"))
    try:
        assert _call(everything, "/spark_log.broker.v1.Admin/ListTopics") is None  # declared: allowed
        refused = _call(everything, f"/{UNDECLARED}/Call")
        assert isinstance(refused, errors.UnauthorizedError) and "no declared access rule" in refused.message
    finally:
        everything.close()


def test_a_client_cannot_pass_for_a_follower(secured_node: tuple[Node, LocalPki, bytes]) -> None:
    """A principal allowed READ on the topic reads as a consumer (``replica_id`` -1) but is
    refused as a follower (``replica_id`` >= 0: CLUSTER_ACTION, nodes only), which would
    skip the consumer quota and move the follower state the high watermark depends on."""
    node, pki, secret = secured_node
    channel = _node_channel(node, secret)
    try:
        upsert_user(channel, "reader", "reader-pw")
    finally:
        channel.close()
    from spark_log import Admin

    admin = ClientSecurity(protocol="SASL_SSL", ca_file=str(pki.ca_file), username="admin", password="admin-pw")
    with Admin(node.address, security=admin) as client:
        client.create_acls([AclBinding(ResourceType.TOPIC, NAME, PatternType.LITERAL, "User:reader", "*",
                                       Operation.READ, Permission.ALLOW)])
    reader = open_channel(node.address, ClientSecurity(protocol="SASL_SSL", ca_file=str(pki.ca_file),
                                                       username="reader", password="reader-pw"))
    fetch, list_offsets = "/spark_log.broker.v1.Broker/Fetch", "/spark_log.broker.v1.Broker/ListOffsets"

    def fetch_as(replica_id: int) -> bytes:
        return bpb.FetchRequest(replica_id=replica_id, max_wait_ms=0, partitions=[
            bpb.FetchPartition(topic=NAME, partition=0, fetch_offset=0, current_leader_epoch=-1)]).SerializeToString()

    def list_as(replica_id: int) -> bytes:
        return bpb.ListOffsetsRequest(replica_id=replica_id, partitions=[
            bpb.ListOffsetsPartition(topic=NAME, partition=0, timestamp=-1, current_leader_epoch=-1)
        ]).SerializeToString()

    try:
        # the ACL reaches the broker's image asynchronously: wait for the consumer read to pass
        wait_until(lambda: _call(reader, fetch, fetch_as(-1)) is None, timeout=30,
                   message="User:reader may fetch as a consumer")
        assert _call(reader, list_offsets, list_as(-1)) is None
        for replica_id in (0, 1, 7):
            for path, request in ((fetch, fetch_as(replica_id)), (list_offsets, list_as(replica_id))):
                refused = _call(reader, path, request)
                assert isinstance(refused, errors.ClusterAuthorizationError), f"{path} as replica {replica_id}: {refused!r}"
    finally:
        reader.close()
