"""A local spark-log cluster of real node processes for tests (the dev launcher underneath).

    with local_cluster(tmp_path, brokers=3) as cluster:
        Producer(cluster.bootstrap) ...
        cluster.down(); cluster.up()          # a whole-cluster restart, data kept

Nodes are brokers and controller voters on 127.0.0.1.  Every process is stopped when the
block exits (SIGTERM, then SIGKILL), even when the test fails.

Start-up retries: the metadata quorum sometimes leaves one voter that never applies the
metadata log (seen under heavy load; reported to the raft part).  A cluster that is not
healthy within ``timeout_s`` is torn down and started afresh in a new directory, up to
``attempts`` times, so that tests of the broker part are not hostage to it.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from brokers.launcher.local import LocalCluster

__all__ = ["local_cluster", "start_cluster"]


def start_cluster(root: Path, *, brokers: int = 3, timeout_s: float = 45.0, attempts: int = 3) -> LocalCluster:
    """A healthy cluster under ``root/attempt-<i>``; raises the last ``TimeoutError``."""
    error: Exception | None = None
    for attempt in range(attempts):
        cluster = LocalCluster(Path(root) / f"attempt-{attempt}", brokers=brokers)
        try:
            cluster.up(timeout_s=timeout_s)
            return cluster
        except (TimeoutError, RuntimeError) as exc:
            error = exc
            cluster.down(timeout_s=10)
    assert error is not None
    raise error


@contextmanager
def local_cluster(root: Path, *, brokers: int = 3, timeout_s: float = 45.0) -> Iterator[LocalCluster]:
    cluster = start_cluster(root, brokers=brokers, timeout_s=timeout_s)
    try:
        yield cluster
    finally:
        cluster.down(timeout_s=15)
