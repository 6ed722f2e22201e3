"""Mutual TLS on real brokers (``spark-log dev up --tls --mtls --authorizer``, one node):
the certificate's subject is the principal, a client without a certificate from the CA
cannot connect, and a renewed node certificate is served without a restart.  Adds about 6 s.
"""
from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path
from typing import Iterator

import pytest
from cryptography import x509

from brokers.launcher.secure import DevSecurity
from brokers.security.certs import LocalPki
from spark_log import Admin, ClientSecurity, Producer, errors
from spark_log.acls import Operation, ResourceType
from tests.support.secure_cluster import SecuredCluster, secured_cluster
from tests.support.wait import wait_until


@pytest.fixture(scope="module")
def mtls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    with secured_cluster(tmp_path_factory.mktemp("mtls"), DevSecurity(tls=True, mtls=True, authorizer=True),
                         brokers=1) as cluster:
        yield cluster


def test_the_certificate_subject_is_the_principal(mtls_cluster: SecuredCluster) -> None:
    with mtls_cluster.admin() as admin:
        assert admin.whoami() == "User:CN=spark-log-admin"
        admin.create_topic("mtls-topic")
    erin = mtls_cluster.certificate("erin")
    with Admin(mtls_cluster.bootstrap, security=erin) as admin:
        assert admin.whoami() == "User:CN=erin"
    with Producer(mtls_cluster.bootstrap, security=erin, delivery_timeout_ms=10_000) as producer:
        with pytest.raises(errors.TopicAuthorizationError, match="User:CN=erin"):
            producer.send("mtls-topic", b"x").result(timeout=30)
    mtls_cluster.allow("User:CN=erin", ResourceType.TOPIC, "mtls-topic", Operation.WRITE)
    with Producer(mtls_cluster.bootstrap, security=erin) as producer:
        assert producer.send("mtls-topic", b"x").result(timeout=30) == (0, 0)


def test_clients_without_a_certificate_of_the_ca_cannot_connect(mtls_cluster: SecuredCluster,
                                                                tmp_path: Path) -> None:
    stranger = LocalPki.create(tmp_path / "other-ca").issue("mallory", server=False)
    for security in (ClientSecurity(protocol="SSL", ca_file=mtls_cluster.ca_file),
                     ClientSecurity(protocol="SSL", ca_file=mtls_cluster.ca_file, cert_file=str(stranger.cert),
                                    key_file=str(stranger.key))):
        started = time.monotonic()
        with pytest.raises(errors.BrokerNotAvailableError):  # the TLS handshake refuses them
            with Admin(mtls_cluster.bootstrap, security=security, request_timeout_ms=2000) as admin:
                admin.list_topics()
        assert time.monotonic() - started < 15


def _served_serial(address: str, ca: str, cert: Path, key: Path) -> int:
    host, _, port = address.rpartition(":")
    context = ssl.create_default_context(cafile=ca)
    context.load_cert_chain(str(cert), str(key))
    context.set_alpn_protocols(["h2"])
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_a_renewed_node_certificate_is_served_without_a_restart(mtls_cluster: SecuredCluster) -> None:
    tls = mtls_cluster.cluster.data_dir / "tls"
    admin_cert, admin_key = tls / "admin.pem", tls / "admin.key"
    address = mtls_cluster.bootstrap.split(",")[0]
    before = _served_serial(address, mtls_cluster.ca_file, admin_cert, admin_key)
    pid = mtls_cluster.cluster.nodes[0].pid
    renewed = mtls_cluster.pki.issue("spark-log-node-1", file_stem="node-1")  # same files, new key and serial
    serial = x509.load_pem_x509_certificate(renewed.cert.read_bytes()).serial_number
    assert serial != before
    wait_until(lambda: _served_serial(address, mtls_cluster.ca_file, admin_cert, admin_key) == serial, timeout=15,
               message="the node serves its renewed certificate")
    assert mtls_cluster.cluster.nodes[0].pid == pid  # same process
    with mtls_cluster.admin() as admin:
        assert admin.whoami() == "User:CN=spark-log-admin"
