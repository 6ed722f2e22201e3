"""A local spark-log cluster of real node processes for tests (the dev launcher underneath).

    with local_cluster(tmp_path, brokers=3) as cluster:
        Producer(cluster.bootstrap) ...
        cluster.down(); cluster.up()          # a whole-cluster restart, data kept

Nodes are brokers and controller voters on 127.0.0.1 with a fast Raft (elections in a few
hundred ms) and short broker sessions.  Every process is stopped when the block exits
(SIGTERM, then SIGKILL), even when the test fails.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from brokers.launcher.local import LocalCluster

__all__ = ["local_cluster", "FAST_RAFT", "FAST_BROKER"]

FAST_RAFT: dict[str, object] = {}
FAST_BROKER: dict[str, object] = {}


@contextmanager
def local_cluster(root: Path, *, brokers: int = 3, timeout_s: float = 90.0) -> Iterator[LocalCluster]:
    cluster = LocalCluster(root, brokers=brokers, extra_config=FAST_BROKER, raft_config=FAST_RAFT)
    try:
        cluster.up(timeout_s=timeout_s)
        yield cluster
    finally:
        cluster.down(timeout_s=15)
