"""A stalled broker (SIGSTOP: the socket accepts, nothing answers) must not stall clients
that know other brokers: a metadata request is read-only, so after one per-broker try
(``_client._METADATA_TRY_S``) the client asks the next broker instead of spending its
whole request timeout on the stalled one."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from spark_log import _client
from spark_log._client import Cluster
from tests.support.cluster import local_cluster

pytestmark = pytest.mark.integration


def test_metadata_refresh_skips_a_stalled_broker(tmp_path: Path) -> None:
    with local_cluster(tmp_path / "cluster") as cluster:
        client = Cluster(cluster.bootstrap, request_timeout_s=_client._METADATA_TRY_S + 5)
        try:
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
            finally:
                os.kill(stalled.pid, signal.SIGCONT)
        finally:
            client.close()
