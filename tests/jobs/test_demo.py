"""The main job, ``python -m jobs.demo``, run as ``make demo`` runs it (a subprocess), on its
own local cluster in a temporary directory; a shortened writing phase keeps it bounded.

The test does not take the demo's word for it: the demo keeps its topic (``--keep-topic``)
and the test reads every stored record itself with a plain ``Consumer``, checking that each
event id is stored once, that every id of a committed micro-batch is there, and that the
windowed aggregation counted exactly the records stored; then it stops the cluster."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from brokers.launcher.local import LocalCluster
from tests.support.event_ids import stored_event_ids

pytestmark = [pytest.mark.spark, pytest.mark.fault, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_demo_kills_a_broker_and_counts_every_event_once(tmp_path: Path) -> None:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    data_dir = tmp_path / "cluster"
    try:
        result = subprocess.run(
            [sys.executable, "-m", "jobs.demo", "--data-dir", str(data_dir), "--seconds", "16",
             "--down-seconds", "4", "--progress-seconds", "2", "--keep-topic"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=540,
        )
        out = result.stdout
        assert result.returncode == 0, f"exit {result.returncode}\n{out[-4000:]}\n{result.stderr[-4000:]}"
        assert "killing broker" in out and "is back (restarted)" in out, out[-4000:]
        written = re.search(r"^events written by the writer query: (\d+) in \d+ committed", out, re.M)
        aggregated = re.search(r"^clicks counted by the windowed aggregation: (\d+) ", out, re.M)
        kept = re.search(r"^kept topic (\S+) on (\S+)$", out, re.M)
        assert written is not None and aggregated is not None and kept is not None, out[-4000:]
        committed, counted = int(written[1]), int(aggregated[1])
        ids = stored_event_ids(kept[2], kept[1])
        assert committed > 0
        assert len(ids) == len(set(ids)), "an event id is stored twice"
        assert set(range(committed)) <= set(ids), "an event of a committed micro-batch is missing"
        assert counted == len(ids), f"the aggregation counted {counted} of {len(ids)} stored events"
        assert "CHECK OK:" in out  # and the demo's own check agrees
    finally:
        LocalCluster(data_dir, brokers=3).down(timeout_s=60)
    assert not (data_dir / "bootstrap").exists(), "the cluster is still running"
