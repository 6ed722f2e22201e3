"""A local spark-log cluster of real node processes for tests (the dev launcher underneath).

    with local_cluster(tmp_path, brokers=3) as cluster:
        Producer(cluster.bootstrap) ...
        cluster.down(); cluster.up()          # a whole-cluster restart, data kept

Nodes are brokers and controller voters on 127.0.0.1.  Every process is stopped when the
block exits (SIGTERM, then SIGKILL), even when the test fails.

There are no start-up retries: a cluster that is not healthy within ``timeout_s`` fails
the test (a stuck voter was a Raft bug, fixed by the KIP-595 truncation rule; a retry
here would hide its return).
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from brokers.launcher.local import LocalCluster

__all__ = ["local_cluster", "start_cluster"]


def start_cluster(root: Path, *, brokers: int = 3, timeout_s: float = 45.0,
                  extra_config: dict[str, object] | None = None) -> LocalCluster:
    """A healthy cluster under ``root``; raises ``TimeoutError`` (after stopping it) if not.
    ``extra_config``: more ``BrokerConfig`` keys for every node."""
    cluster = LocalCluster(Path(root), brokers=brokers, extra_config=extra_config)
    try:
        cluster.up(timeout_s=timeout_s)
    except BaseException:
        cluster.down(timeout_s=10)
        raise
    return cluster


@contextmanager
def local_cluster(root: Path, *, brokers: int = 3, timeout_s: float = 45.0,
                  extra_config: dict[str, object] | None = None) -> Iterator[LocalCluster]:
    cluster = start_cluster(root, brokers=brokers, timeout_s=timeout_s, extra_config=extra_config)
    try:
        yield cluster
    finally:
        cluster.down(timeout_s=15)
