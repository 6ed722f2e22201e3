"""Suite-wide fixtures: a clean environment, loopback only."""
from __future__ import annotations

import os
from typing import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.support.jvm_options import with_suite_jvm_options
from tests.support.secure_cluster import SecuredCluster, secured_cluster

pytest_plugins = ["tests.sim.plugin"]

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# every JVM the suite starts runs C1 only with the serial collector (tests/support/jvm_options.py)
os.environ["JAVA_TOOL_OPTIONS"] = with_suite_jvm_options(os.environ.get("JAVA_TOOL_OPTIONS", ""))

# Property tests check behaviour, not timing: no per-example deadline and no "input
# generation is slow" health check, which a loaded CI machine trips on its own (a 1 s stall
# in one draw of a five-integer list failed test_partition_records_round_trip in a suite run
# beside another).  Tests that set their own settings keep them.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees a bootstrap, data dir or client config from the developer's shell, and
    none leaves one behind for the next: ``delenv`` of an unset variable records nothing to
    undo, so each is set first (recording its original state, restored after the test) and
    then removed.  A leaked ``SPARK_LOG_CLIENT_CONFIG`` once reached every Spark worker
    started later, whose clients then spoke TLS to plain clusters."""
    for name in ("SPARK_LOG_BOOTSTRAP", "SPARK_LOG_DATA_DIR", "SPARK_LOG_CLIENT_CONFIG"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def sasl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    """One secured 3-node cluster per test session (SASL_SSL: TLS on every listener and link,
    SCRAM clients, the authorizer on), shared by the integration and Spark security tests."""
    from brokers.launcher.secure import DevSecurity

    with secured_cluster(tmp_path_factory.mktemp("sasl-cluster"),
                         DevSecurity(tls=True, sasl=True, authorizer=True)) as cluster:
        yield cluster
