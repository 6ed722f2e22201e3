"""The tiering job killed with SIGKILL at each named crash point (``jobs/tier.py``), then run
again: the Delta table holds every committed record once, with no gap, and the brokers'
tiered offset matches the table; the whole topic still reads back from offset 0."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from brokers.launcher.local import LocalCluster
from jobs.tier import CRASH_POINTS
from spark_log import Admin
from spark_log.tier import TierTable
from tests.support.cluster import local_cluster
from tests.support.tiering import create_tiered, produce, read_all, tier_rows, wait_local_start

pytestmark = pytest.mark.fault

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("tier-crash"), brokers=3) as running:
        yield running


def _job(cluster: LocalCluster, topic: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=str(REPO), **env)
    return subprocess.run([sys.executable, "-m", "jobs.tier", "--bootstrap", cluster.bootstrap, "--topic", topic,
                           "--once"], capture_output=True, text=True, timeout=120, env=full, cwd=REPO,
                          start_new_session=True)   # the crash point kills the job's process group only


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_killed_at_each_point_then_restarted(cluster: LocalCluster, tmp_path: Path, point: str) -> None:
    bootstrap, topic = cluster.bootstrap, f"crash-{point}-{uuid.uuid4().hex[:6]}"
    create_tiered(bootstrap, topic, partitions=2)
    produced = produce(bootstrap, topic, 300)
    marker = tmp_path / "reached"
    crashed = _job(cluster, topic, {"SPARK_LOG_TIER_CRASH_AT": point, "SPARK_LOG_TIER_CRASH_MARKER": str(marker)})
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    assert marker.read_text().split() == [point]                 # the point was reached, then the kill
    with Admin(bootstrap) as admin:
        tiers = admin.describe_tier(topic)
    table = TierTable(tiers.location, topic)
    committed = point in ("after-commit", "before-local-delete")
    assert (table.load() is not None and not table.range(0).empty) == committed
    told = [p for (_, p), info in tiers.partitions.items() if info.tiered]
    assert len(told) == (1 if point == "before-local-delete" else 0)
    if not committed:
        assert list(Path(tiers.location, topic).rglob("*.parquet"))   # data files written, never committed
    more = produce(bootstrap, topic, 60, start=300)
    again = _job(cluster, topic, {})
    assert again.returncode == 0, again.stdout + again.stderr
    with Admin(bootstrap) as admin:
        tiers = admin.describe_tier(topic)
    rows = tier_rows(tiers.location, topic)
    assert len(rows) == len(set(rows))                           # each record once
    for p in (0, 1):
        info = tiers.partitions[(topic, p)]
        held = table.range(p)
        assert (held.start, held.end) == (info.tier_start, info.tiered_end) and held.start == 0
        records = [o for q, o, _, _ in sorted(produced + more) if q == p and held.start <= o < held.end]
        assert records and records[-1] >= held.end - 2          # the range reaches the closed segments' end
        assert [o for q, o in rows if q == p] == records         # no gap (tier frames take offsets, hold no record)
        wait_local_start(bootstrap, topic, p, 1)
    assert read_all(bootstrap, topic) == sorted(produced + more)
