"""A secured local cluster for tests (``LocalCluster`` with ``DevSecurity``), and helpers to
give principals credentials and ACLs.

    with secured_cluster(tmp, DevSecurity(tls=True, sasl=True, authorizer=True)) as cluster:
        alice = cluster.user("alice")                       # a SCRAM user -> ClientSecurity
        cluster.allow("User:alice", ResourceType.TOPIC, "t", Operation.READ)
        Consumer(cluster.bootstrap, security=alice) ...

``cluster.admin_security`` is the dev cluster's admin (a super user); every process is
stopped when the block exits.  Users and ACLs reach the brokers through the metadata log,
asynchronously: ``user`` and ``allow`` return once every node's image has them (each node
authenticates the user; each node's ``DescribeAcls`` lists the bindings).  ``tests/conftest.py`` shares one ``SASL_SSL`` + authorizer
cluster per test session (fixture ``sasl_cluster``) between the integration and Spark
security tests.
"""
from __future__ import annotations

import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import grpc

from brokers.launcher.local import LocalCluster
from brokers.launcher.secure import TLS_DIR, DevSecurity
from brokers.security.certs import LocalPki
from spark_log import AclBinding, Admin, ClientSecurity
from spark_log._secure_channel import open_channel
from spark_log.acls import AclBindingFilter, Operation, binding_from_pb, filter_to_pb, PatternType, Permission, ResourceType
from spark_log.errors import SparkLogError
from spark_log.proto import security_pb2 as spb
from spark_log.proto import security_pb2_grpc as spb_grpc
from tests.support.wait import wait_until

__all__ = ["SecuredCluster", "secured_cluster"]


class SecuredCluster:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap
        self.admin_security = ClientSecurity.from_file(cluster.client_properties)
        self.ca_file = str(cluster.data_dir / TLS_DIR / "ca.pem")
        self.pki = LocalPki.create(cluster.data_dir / TLS_DIR)

    def admin(self) -> Admin:
        return Admin(self.bootstrap, security=self.admin_security)

    def user(self, name: str, password: str | None = None) -> ClientSecurity:
        """Create SCRAM user ``name`` (a random password unless given); its client settings."""
        password = password or secrets.token_urlsafe(16)
        with self.admin() as admin:
            admin.add_user(name, password)
        user = ClientSecurity(protocol="SASL_SSL", ca_file=self.ca_file, username=name, password=password)
        wait_until(lambda: self._on_every_node(user, lambda stub: stub.WhoAmI(spb.WhoAmIRequest(), timeout=10)
                                               .principal == f"User:{name}"),
                   timeout=30, message=f"every node authenticates User:{name}")
        return user

    def _on_every_node(self, security: ClientSecurity, check: Callable[[spb_grpc.SecurityStub], bool]) -> bool:
        """``check`` holds on every node (a refused or failed call: not yet)."""
        for node in self.cluster.nodes:
            channel = open_channel(f"127.0.0.1:{node.port}", security)
            try:
                if not check(spb_grpc.SecurityStub(channel)):
                    return False
            except (grpc.RpcError, SparkLogError):
                return False
            finally:
                channel.close()
        return True

    def certificate(self, common_name: str) -> ClientSecurity:
        """A client certificate ``CN=<common_name>`` from the cluster's CA (principal ``User:CN=...``)."""
        issued = self.pki.issue(common_name, server=False)
        protocol = "SASL_SSL" if self.cluster.security.sasl else "SSL"
        if protocol == "SASL_SSL":
            raise ValueError("a SASL_SSL cluster authenticates clients with SCRAM: use user()")
        return ClientSecurity(protocol=protocol, ca_file=self.ca_file, cert_file=str(issued.cert),
                              key_file=str(issued.key))

    def allow(self, principal: str, kind: ResourceType, name: str, *operations: Operation,
              pattern: PatternType = PatternType.LITERAL, permission: Permission = Permission.ALLOW) -> None:
        bindings = [AclBinding(kind, name, pattern, principal, "*", op, permission) for op in operations]
        with self.admin() as admin:
            admin.create_acls(bindings)
        selector = filter_to_pb(AclBindingFilter(principal=principal))

        def listed(stub: spb_grpc.SecurityStub) -> bool:
            response = stub.DescribeAcls(spb.DescribeAclsRequest(filter=selector), timeout=10)
            return set(bindings) <= {binding_from_pb(b) for b in response.bindings}

        wait_until(lambda: self._on_every_node(self.admin_security, listed), timeout=30,
                   message=f"every node lists the ACLs of {principal}")


@contextmanager
def secured_cluster(root: Path, security: DevSecurity, *, brokers: int = 3,
                    extra_config: dict[str, object] | None = None) -> Iterator[SecuredCluster]:
    cluster = LocalCluster(root, brokers=brokers, security=security, extra_config=extra_config)
    try:
        cluster.up(timeout_s=60)
        yield SecuredCluster(cluster)
    finally:
        cluster.down(timeout_s=15)
