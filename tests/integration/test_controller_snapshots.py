"""The metadata image as the Raft snapshot, across real processes.

With a small ``snapshot_every_entries``, the voters snapshot their image and drop the
log below it; a voter whose disk was wiped must then be brought up to date from a
snapshot (``MetadataListener.restore``) and end with the same image as the others.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.node_cluster import NodeCluster
from tests.support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def snapshot_files(cluster: NodeCluster, i: int) -> list[Path]:
    return [p for p in (cluster.data_dir(i) / "metadata").rglob("*.snapshot") if p.is_file()]


def test_a_wiped_voter_catches_up_from_a_snapshot(tmp_path: Path) -> None:
    with NodeCluster(tmp_path, size=3, roles=("broker", "controller"), snapshot_every_entries=20) as cluster:
        cluster.start_all()
        leader = cluster.wait_for_active_controller()
        wait_until(lambda: len(cluster.image(leader).live_brokers()) == 3, timeout=30, message="brokers not registered")
        victim = next(i for i in cluster.ids if i != leader)
        cluster.kill(victim)
        cluster.wipe(victim)
        names = [f"snap-{n}" for n in range(30)]  # >= 30 x 3 records: several snapshots
        for name in names:
            cluster.client.create_topic(name, partitions=1, replication_factor=2)
        cluster.client.alter_configs("snap-0", set={"retention.ms": 1234})
        assert snapshot_files(cluster, leader), "the leader never wrote a metadata snapshot"
        cluster.start(victim)
        reference = cluster.image(cluster.wait_for_active_controller())
        wait_until(
            lambda: cluster.image(victim).offset >= reference.offset,
            timeout=30,
            message=lambda: f"wiped node {victim} did not catch up; log:\n{cluster.log_tail(victim)}",
        )
        assert snapshot_files(cluster, victim), "the wiped node caught up without a snapshot"
        image = cluster.image(victim)
        assert set(names) <= set(image.topics)
        assert image.topics["snap-0"].config.retention_ms == 1234

        # Records keep landing (the rejoined broker's replicas re-enter ISRs), so compare the
        # two images at the same metadata offset: the state machines must have converged.
        def converged() -> bool:
            mine, theirs = cluster.image(victim), cluster.image(cluster.wait_for_active_controller())
            return mine.offset == theirs.offset and mine.topics == theirs.topics and mine.brokers == theirs.brokers

        wait_until(converged, timeout=30, message=lambda: f"wiped node {victim} did not converge with the leader")
