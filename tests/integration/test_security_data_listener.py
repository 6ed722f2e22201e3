"""The data listener on the SASL_SSL cluster: a SCRAM-authenticated connection lives no
longer than its user's credential, as a gRPC session does.

Found by a security review: after ``delete_user`` (or a new password) gRPC refused the
user (``authn.py`` checks the session on every call) while a data-listener connection
authenticated before kept fetching: ``_scram_finish`` made the connection its principal
for good.  Each request is now checked as gRPC checks a call's session; the first one after
the change answers SESSION_EXPIRED and the connection is closed.
"""
from __future__ import annotations

import itertools
import ssl
import uuid

import pytest

from spark_log import ClientSecurity, Producer, errors
from spark_log._data_transport import describe_listener
from spark_log._secure_channel import authenticated_principal, open_channel
from spark_log.acls import Operation, ResourceType
from spark_log.errors import ErrorCode
from spark_log.scram import ScramClient
from tests.support.data_client import DataClient, DataError, _s
from tests.support.secure_cluster import SecuredCluster
from tests.support.wait import wait_until

_n = itertools.count()


def name(prefix: str) -> str:
    return f"{prefix}-{next(_n)}-{uuid.uuid4().hex[:6]}"


def scram(cluster: SecuredCluster, grpc_address: str, security: ClientSecurity) -> DataClient:
    """A TLS connection to the data listener of the node at ``grpc_address``, authenticated
    with SCRAM as ``security``'s user (``DataError`` when SCRAM refuses)."""
    channel = open_channel(grpc_address, cluster.admin_security)
    try:
        info = describe_listener(channel, 10.0)
    finally:
        channel.close()
    client = DataClient(info.host, info.port)
    try:
        client.sock = ssl.create_default_context(cafile=cluster.ca_file).wrap_socket(client.sock,
                                                                                     server_hostname=info.host)
        assert security.username is not None and security.password is not None
        exchange = ScramClient(security.username, security.password, uuid.uuid4().hex)
        r = client.call(5, _s(exchange.first()))
        exchange_id, server_first = r.str(), r.str()
        r = client.call(6, _s(exchange_id) + _s(exchange.final(server_first)))
        exchange.verify(r.str())
        assert r.str() == f"User:{security.username}"
    except BaseException:
        client.close()
        raise
    return client


def grpc_refuses(grpc_address: str, security: ClientSecurity) -> bool:
    """The node at ``grpc_address`` refuses ``security`` over gRPC (its metadata has the change)."""
    channel = open_channel(grpc_address, security)
    try:
        authenticated_principal(channel, 10.0)
        return False
    except errors.AuthenticationError:
        return True
    finally:
        channel.close()


@pytest.fixture
def readable(sasl_cluster: SecuredCluster) -> tuple[str, ClientSecurity, str]:
    """(topic with one record, a user allowed to READ it, the gRPC address of its leader)."""
    t = name("dl-session")
    with sasl_cluster.admin() as admin:
        admin.create_topic(t, partitions=1, replication_factor=3)
    with Producer(sasl_cluster.bootstrap, security=sasl_cluster.admin_security, acks="all") as producer:
        producer.send(t, b"v", partition=0).result(timeout=30)
    with sasl_cluster.admin() as admin:
        leader = admin.describe_topics([t])[t].partitions[0].leader
    eve = sasl_cluster.user(name("eve"))
    sasl_cluster.allow(f"User:{eve.username}", ResourceType.TOPIC, t, Operation.READ)
    port = next(node.port for node in sasl_cluster.cluster.nodes if node.node_id == leader)
    return t, eve, f"127.0.0.1:{port}"


def _fetches(client: DataClient, t: str) -> bool:
    code, message, _hw, _next, frames = client.fetch(t, 0, 0)
    assert code == 0, message
    return bool(frames)


def _cut_off(client: DataClient, t: str) -> None:
    """The next request answers SESSION_EXPIRED (retriable: authenticate again) and nothing
    more is served on the connection: the broker closes it."""
    with pytest.raises(DataError) as refused:
        client.fetch(t, 0, 0)
    assert refused.value.code == ErrorCode.SESSION_EXPIRED, refused.value
    with pytest.raises(OSError):
        client.fetch(t, 0, 0)


def test_a_deleted_user_is_cut_off_on_the_data_listener(sasl_cluster: SecuredCluster,
                                                         readable: tuple[str, ClientSecurity, str]) -> None:
    t, eve, leader = readable
    with scram(sasl_cluster, leader, eve) as client:
        assert _fetches(client, t)
        with sasl_cluster.admin() as admin:
            admin.delete_user(eve.username)
        wait_until(lambda: grpc_refuses(leader, eve), timeout=30, message="the leader refuses the deleted user on gRPC")
        _cut_off(client, t)
    with pytest.raises(DataError) as refused:  # and she cannot authenticate again
        scram(sasl_cluster, leader, eve)
    assert refused.value.code == ErrorCode.AUTHENTICATION_FAILED


def test_a_new_password_ends_a_data_listener_connection(sasl_cluster: SecuredCluster,
                                                        readable: tuple[str, ClientSecurity, str]) -> None:
    t, eve, leader = readable
    with scram(sasl_cluster, leader, eve) as client:
        assert _fetches(client, t)
        renewed = sasl_cluster.user(eve.username, "a-new-password")  # returns once every node takes it
        _cut_off(client, t)
    with scram(sasl_cluster, leader, renewed) as client:  # the new password authenticates a new connection
        assert _fetches(client, t)
