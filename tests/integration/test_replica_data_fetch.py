"""Followers fetching over the leaders' data listeners (``REPLICA_FETCH``, issue 19) on a
3-node mutual-TLS cluster with the authorizer on: the followers authenticate with their node
certificates (super users) and replicate byte for byte; another certificate is refused
``CLUSTER_ACTION``, and a forged inter-node token is refused.  (The SASL_SSL cluster's
``NODE_AUTH`` path is checked in ``test_security.py``; the plaintext one in
``test_replication.py``.)  Adds about 12 s (its own cluster)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from brokers.launcher.secure import DevSecurity
from brokers.net.channels import TlsChannels
from brokers.net.node_auth import HEADER
from brokers.net.tls import TlsFiles
from brokers.replica.data_fetch import DataFetchClient
from brokers.replica.replica_wire import ReplicaWanted
from brokers.server.data_listener import PORT_FILE
from spark_log import Producer, errors
from tests.support.replica_logs import read_replica, replica_dir
from tests.support.secure_cluster import SecuredCluster, secured_cluster
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mtls3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    with secured_cluster(tmp_path_factory.mktemp("mtls3"), DevSecurity(tls=True, mtls=True, authorizer=True),
                         brokers=3, extra_config={"heartbeat_interval_ms": 200, "session_timeout_ms": 3000}) as cluster:
        yield cluster


def _data_port(cluster: SecuredCluster, node_id: int) -> int:
    path = cluster.cluster.node_dir(node_id) / PORT_FILE
    wait_until(path.is_file, timeout=30, message=f"node {node_id}'s data listener")
    return int(path.read_text())


def _channels(cluster: SecuredCluster, common_name: str, token: str | None = None) -> TlsChannels:
    security = cluster.certificate(common_name)
    files = TlsFiles(certfile=str(security.cert_file), keyfile=str(security.key_file), cafile=cluster.ca_file)
    return TlsChannels(files, metadata=((HEADER, token),) if token else ())


def test_followers_replicate_over_mutual_tls_data_listeners(mtls3: SecuredCluster) -> None:
    with mtls3.admin() as admin:
        admin.create_topic("mtls-rf3", partitions=3, replication_factor=3, config={"min.insync.replicas": "3"})
    values = [f"v{i}".encode() for i in range(300)]
    with Producer(mtls3.bootstrap, security=mtls3.admin_security, acks="all", linger_ms=2) as producer:
        futures = [producer.send("mtls-rf3", v, partition=i % 3) for i, v in enumerate(values)]
        acked = [f.result(timeout=60) for f in futures]   # min.insync.replicas=3: every follower fetched
    expected: dict[int, list[tuple[int, bytes]]] = {0: [], 1: [], 2: []}
    for value, (partition, offset) in zip(values, acked):
        expected[partition].append((offset, value))
    nodes = mtls3.cluster.nodes

    def replicas_match() -> bool:
        return all(read_replica(replica_dir(mtls3.cluster.node_dir(n.node_id), "mtls-rf3", p)) == sorted(rows)
                   for n in nodes for p, rows in expected.items())

    wait_until(replicas_match, timeout=30, message="every replica holds exactly the acknowledged records")
    logs = "".join((mtls3.cluster.node_dir(n.node_id) / "node.log").read_text(errors="replace") for n in nodes)
    assert "over its data listener" in logs and "cannot use broker" not in logs


def test_a_certificate_that_is_not_a_node_may_not_fetch_as_a_replica(mtls3: SecuredCluster) -> None:
    port = _data_port(mtls3, 1)
    client = DataFetchClient("127.0.0.1", port, channels=_channels(mtls3, "erin"))
    try:
        with pytest.raises(errors.ClusterAuthorizationError, match="cluster_action"):
            client.fetch(replica_id=2, max_wait_ms=0, max_bytes=1 << 20,
                         partitions=[ReplicaWanted("mtls-rf3", 0, 0, 0, -1, 0)])
    finally:
        client.close()


def test_a_forged_inter_node_token_is_refused(mtls3: SecuredCluster) -> None:
    port = _data_port(mtls3, 1)
    with pytest.raises(errors.AuthenticationError, match="inter-node token"):
        DataFetchClient("127.0.0.1", port, channels=_channels(mtls3, "mallory", token="2:" + "0" * 64))


def test_the_data_fetch_client_refuses_a_leader_outside_the_ca(mtls3: SecuredCluster, tmp_path: Path) -> None:
    from brokers.security.certs import LocalPki

    other = LocalPki.create(tmp_path / "other-ca").issue("spark-log-node-9", server=False)
    files = TlsFiles(certfile=str(other.cert), keyfile=str(other.key), cafile=str(tmp_path / "other-ca" / "ca.pem"))
    port = _data_port(mtls3, 1)
    with pytest.raises(OSError):   # ssl.SSLCertVerificationError: the leader's certificate is not of this CA
        DataFetchClient("127.0.0.1", port, channels=TlsChannels(files))
