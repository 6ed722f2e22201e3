"""A stalled broker (SIGSTOP: the socket accepts, nothing answers) must not stall clients
that know other brokers: metadata requests and read-only Admin calls give each broker one
bounded try (``_client.READ_TRY_S``) and then ask the next
one, instead of spending the whole request timeout on the stalled one."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from spark_log import Admin, _client
from spark_log._client import Cluster
from tests.support.cluster import local_cluster

pytestmark = pytest.mark.integration


def test_metadata_refresh_skips_a_stalled_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # shorter tries keep the test quick; the request timeouts below stay longer than one try
    monkeypatch.setattr(_client, "READ_TRY_S", 4.0)
    with local_cluster(tmp_path / "cluster") as cluster:
        client = Cluster(cluster.bootstrap, request_timeout_s=_client.READ_TRY_S + 5)
        admin = Admin(cluster.bootstrap, request_timeout_ms=int((_client.READ_TRY_S + 5) * 1000))
        try:
            admin.create_topic("seen", partitions=2)
            admin._cluster.refresh()  # the Admin has learnt every broker: the stalled one comes first
            client.refresh()
            first = client.addresses()[0]
            assert len(client.addresses()) == 3, "the client learnt every broker"
            stalled = next(n for n in cluster.nodes if first.endswith(f":{n.port}"))
            os.kill(stalled.pid, signal.SIGSTOP)
            try:
                # With the whole request timeout spent on the stalled broker this raises
                # RequestTimeoutError; skipping it, another broker answers.
                answer = client.refresh()
                assert {b.broker_id for b in answer.brokers} == {n.node_id for n in cluster.nodes}
                assert admin._cluster.addresses()[0] == first
                assert "seen" in admin.list_topics()
                assert admin.describe_topic("seen", live=False).num_partitions == 2
            finally:
                os.kill(stalled.pid, signal.SIGCONT)
        finally:
            client.close()
            admin.close()
