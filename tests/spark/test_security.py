"""The Spark connector on a secured cluster (``sasl_cluster``: SASL_SSL, authorizer on),
configured with Kafka's option names.

- a secured write and read round trip (``kafka.security.protocol``, ``kafka.ssl.*``,
  ``kafka.sasl.*``);
- the source refuses a principal without READ with the typed authorization error, the
  sink one without WRITE;
- no secret in any log, error or checkpoint: a job (its own process) carries a planted
  password through a streaming query, a batch read and a refused authentication; every
  file of the run (its stdout/stderr, Python log, Spark event log, checkpoints) and of the
  cluster (node logs, metadata log, partitions) is searched for the password.  A control
  run that prints it on purpose proves the search finds it.

Adds about 30 s (one Spark process for the job; the queries share the session's Spark).
"""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from spark_log.acls import Operation, ResourceType
from tests.support.secure_cluster import SecuredCluster

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


def _options(cluster: SecuredCluster, user: str, password: str) -> dict[str, str]:
    return {"bootstrap": cluster.bootstrap, "kafka.security.protocol": "SASL_SSL",
            "kafka.ssl.truststore.location": cluster.ca_file, "kafka.ssl.truststore.type": "PEM",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                                       f'username="{user}" password="{password}";')}


def _fresh(cluster: SecuredCluster, prefix: str, partitions: int = 2) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with cluster.admin() as admin:
        admin.create_topic(topic, partitions=partitions, replication_factor=3)
    return topic


def _user(cluster: SecuredCluster, topic: str, *operations: Operation) -> tuple[str, str]:
    name, password = f"spark-{uuid.uuid4().hex[:6]}", secrets.token_urlsafe(12)
    cluster.user(name, password)
    cluster.allow(f"User:{name}", ResourceType.TOPIC, topic, *operations)
    return name, password


def test_a_secured_round_trip_with_kafka_option_names(spark: Any, sasl_cluster: SecuredCluster, fmt: str) -> None:
    """Both implementations: the JVM one over the data listener (TLS with the brokers'
    certificates, SCRAM on the connection, each request checked against the ACLs)."""
    topic = _fresh(sasl_cluster, "spark-secured")
    options = _options(sasl_cluster, *_user(sasl_cluster, topic, Operation.READ, Operation.WRITE))
    df = spark.createDataFrame([(f"k{i}", f"v{i}".encode()) for i in range(20)], "key string, value binary")
    df.write.format(fmt).options(**options).option("topic", topic).mode("append").save()
    back = spark.read.format(fmt).options(**options).option("subscribe", topic).load()
    assert sorted(r.value for r in back.select("value").collect()) == sorted(f"v{i}".encode() for i in range(20))


def test_a_wrong_password_is_refused(spark: Any, sasl_cluster: SecuredCluster, fmt: str) -> None:
    topic = _fresh(sasl_cluster, "spark-badpass", partitions=1)
    name, _password = _user(sasl_cluster, topic, Operation.READ)
    options = _options(sasl_cluster, name, "not-the-password")
    with pytest.raises(Exception) as failed:
        spark.read.format(fmt).options(**options).option("subscribe", topic).load().collect()
    assert "AUTHENTICATION_FAILED" in str(failed.value) and "not-the-password" not in str(failed.value)


def test_the_source_refuses_a_principal_without_read(spark: Any, sasl_cluster: SecuredCluster, fmt: str) -> None:
    topic = _fresh(sasl_cluster, "spark-noread", partitions=1)
    with sasl_cluster.admin() as admin:
        from spark_log import Producer

        with Producer(sasl_cluster.bootstrap, security=sasl_cluster.admin_security) as producer:
            producer.send(topic, b"secret record").result(timeout=30)
        assert admin.list_offsets(topic) == {0: 1}
    options = _options(sasl_cluster, *_user(sasl_cluster, topic, Operation.DESCRIBE))
    query = (spark.readStream.format(fmt).options(**options).option("subscribe", topic)
             .option("startingOffsets", "earliest").load()
             .writeStream.format("memory").queryName(f"noread_{uuid.uuid4().hex[:6]}")
             .trigger(availableNow=True).start())
    with pytest.raises(Exception) as failed:
        query.awaitTermination(120)
    assert "TOPIC_AUTHORIZATION_FAILED" in str(failed.value) and "not allowed read" in str(failed.value)


def test_the_sink_refuses_a_principal_without_write(spark: Any, sasl_cluster: SecuredCluster, fmt: str) -> None:
    topic = _fresh(sasl_cluster, "spark-nowrite", partitions=1)
    options = _options(sasl_cluster, *_user(sasl_cluster, topic, Operation.DESCRIBE))
    df = spark.createDataFrame([("k", b"v")], "key string, value binary")
    with pytest.raises(Exception) as failed:
        df.write.format(fmt).options(**options).option("topic", topic).mode("append").save()
    assert "TOPIC_AUTHORIZATION_FAILED" in str(failed.value) and "not allowed write" in str(failed.value)
    with sasl_cluster.admin() as admin:
        assert admin.list_offsets(topic) == {0: 0}


def _files_holding(roots: list[Path], secret: bytes) -> tuple[list[Path], int]:
    """Every regular file under ``roots`` whose bytes hold ``secret``, and how many files were read."""
    found, read = [], 0
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                read += 1
                if secret in path.read_bytes():
                    found.append(path)
    return found, read


def _run_job(run_dir: Path, cluster: SecuredCluster, user: str, password: str, source: str, sink: str,
             *extra: str) -> subprocess.CompletedProcess[bytes]:
    run_dir.mkdir(parents=True)
    env = dict(os.environ, PLANTED_USER=user, PLANTED_PASSWORD=password, PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    with open(run_dir / "stdout.log", "wb") as out, open(run_dir / "stderr.log", "wb") as err:
        return subprocess.run([sys.executable, "-m", "tests.spark.secret_job", str(run_dir), cluster.bootstrap,
                               cluster.ca_file, source, sink, *extra], stdout=out, stderr=err, env=env, cwd=run_dir,
                              timeout=600)  # a hang guard: the job takes ~30 s on a quiet machine, minutes under heavy load


def test_no_secret_in_logs_errors_or_checkpoints(sasl_cluster: SecuredCluster, tmp_path: Path) -> None:
    source, sink = _fresh(sasl_cluster, "planted-in"), _fresh(sasl_cluster, "planted-out")
    user, password = f"planted-{uuid.uuid4().hex[:6]}", f"PlAnTeD-{secrets.token_hex(12)}"
    sasl_cluster.user(user, password)
    sasl_cluster.allow(f"User:{user}", ResourceType.TOPIC, source, Operation.READ)
    sasl_cluster.allow(f"User:{user}", ResourceType.TOPIC, sink, Operation.READ, Operation.WRITE)
    from spark_log import Producer

    with Producer(sasl_cluster.bootstrap, security=sasl_cluster.admin_security) as producer:
        for i in range(30):
            producer.send(source, f"v{i}".encode(), key=f"k{i}".encode())
    run = tmp_path / "run"
    done = _run_job(run, sasl_cluster, user, password, source, sink)
    stdout = (run / "stdout.log").read_text()
    assert done.returncode == 0, (run / "stderr.log").read_text()[-3000:]
    assert "sink rows: 30" in stdout and "wrong user refused" in stdout
    stderr = (run / "stderr.log").read_text()
    assert "AUTHENTICATION_FAILED" in stderr  # the refused query's error is in the run's files
    assert list((run / "checkpoints" / "stream" / "offsets").iterdir())  # and its checkpoint
    assert list((run / "events").iterdir())  # and Spark's event log
    leaked, read = _files_holding([run, sasl_cluster.cluster.data_dir], password.encode())
    assert read > 50
    assert not leaked, f"the planted password is in {leaked}"

    control = tmp_path / "control"
    assert _run_job(control, sasl_cluster, user, password, source, sink, "--leak").returncode == 0
    leaked, _ = _files_holding([control], password.encode())
    assert {p.name for p in leaked} == {"stdout.log", "stderr.log", "job.log", "0"}


@pytest.fixture(scope="module")
def mtls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One node with mutual TLS and the authorizer (no SASL): the client certificate is the principal."""
    from brokers.launcher.secure import DevSecurity
    from tests.support.secure_cluster import secured_cluster

    with secured_cluster(tmp_path_factory.mktemp("spark-mtls"), DevSecurity(tls=True, mtls=True, authorizer=True),
                         brokers=1) as cluster:
        yield cluster


def test_mutual_tls_with_a_client_certificate(spark: Any, mtls_cluster: SecuredCluster, fmt: str) -> None:
    """kafka.security.protocol=SSL with a PEM keystore (the JVM implementation converts the EC
    key and chain in memory): the certificate's subject is the principal the ACLs name."""
    topic = f"spark-mtls-{uuid.uuid4().hex[:8]}"
    with mtls_cluster.admin() as admin:
        admin.create_topic(topic, partitions=1)
    name = f"spark-{uuid.uuid4().hex[:6]}"
    cert = mtls_cluster.certificate(name)
    principal = f"User:CN={name}"
    options = {"bootstrap": mtls_cluster.bootstrap, "kafka.security.protocol": "SSL",
               "kafka.ssl.truststore.location": mtls_cluster.ca_file, "kafka.ssl.certificate.location": cert.cert_file,
               "kafka.ssl.key.location": cert.key_file}
    df = spark.createDataFrame([(f"k{i}", f"v{i}".encode()) for i in range(10)], "key string, value binary")
    with pytest.raises(Exception) as refused:
        df.write.format(fmt).options(**options).option("topic", topic).mode("append").save()
    assert "TOPIC_AUTHORIZATION_FAILED" in str(refused.value) and principal in str(refused.value)
    mtls_cluster.allow(principal, ResourceType.TOPIC, topic, Operation.READ, Operation.WRITE)
    df.write.format(fmt).options(**options).option("topic", topic).mode("append").save()
    back = spark.read.format(fmt).options(**options).option("subscribe", topic).load()
    assert sorted(r.value for r in back.select("value").collect()) == sorted(f"v{i}".encode() for i in range(10))
