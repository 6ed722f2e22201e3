"""The Databricks-style tour notebook: Databricks source format, and runnable as a plain
Python script against its own local cluster (as CI runs it).

The test does not take the notebook's "TOUR OK" for it: the notebook keeps its topic and
cluster (``SPARK_LOG_TOUR_KEEP_TOPIC=1``) and the test reads every stored event itself with a
plain ``Consumer``: each event id once, every id of a committed micro-batch present, and the
streaming aggregation counted exactly the events stored; then it stops the cluster."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from brokers.launcher.local import LocalCluster
from tests.support.event_ids import stored_event_ids

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "jobs" / "notebooks" / "spark_log_tour.py"


def test_notebook_is_in_databricks_source_format() -> None:
    text = NOTEBOOK.read_text()
    assert text.splitlines()[0] == "# Databricks notebook source"
    cells = text.split("\n# COMMAND ----------\n")
    assert len(cells) >= 8
    assert sum(1 for c in cells if c.strip().startswith("# MAGIC %md")) >= 4
    compile(text, str(NOTEBOOK), "exec")


@pytest.mark.spark
@pytest.mark.fault
@pytest.mark.slow
def test_notebook_runs_as_a_script(tmp_path: Path) -> None:
    data_dir = tmp_path / "cluster"
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOG_DATA_DIR=str(data_dir), SPARK_LOG_TOUR_KEEP_TOPIC="1")
    env.pop("SPARK_LOG_BOOTSTRAP", None)
    try:
        result = subprocess.run([sys.executable, str(NOTEBOOK)], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=540)
        out = result.stdout
        assert result.returncode == 0, f"exit {result.returncode}\n{out[-4000:]}\n{result.stderr[-4000:]}"
        assert "killing broker" in out and "is back" in out, out[-4000:]
        counts = re.search(r"^committed (\d+), stored \d+ .*counted (\d+)$", out, re.M)
        kept = re.search(r"^kept topic (\S+) on (\S+)$", out, re.M)
        assert counts is not None and kept is not None, out[-4000:]
        committed, counted = int(counts[1]), int(counts[2])
        ids = [i for i in stored_event_ids(kept[2], kept[1]) if isinstance(i, int) and i >= 0]  # < 0: the sample
        assert committed > 0
        assert len(ids) == len(set(ids)), "an event id is stored twice"
        assert set(range(committed)) <= set(ids), "an event of a committed micro-batch is missing"
        assert counted == len(ids), f"the aggregation counted {counted} of {len(ids)} stored events"
        assert "TOUR OK:" in out  # and the notebook's own check agrees
    finally:
        # the notebook's local cluster runs in processes of its own (kept, or left by a killed notebook)
        LocalCluster(data_dir, brokers=3).down(timeout_s=60)
    assert not (data_dir / "bootstrap").exists(), "the cluster is still running"
