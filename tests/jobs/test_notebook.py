"""The Databricks-style tour notebook: Databricks source format, and runnable as a plain
Python script against its own local cluster (as CI runs it)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from brokers.launcher.local import LocalCluster

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
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOG_DATA_DIR=str(tmp_path / "cluster"))
    env.pop("SPARK_LOG_BOOTSTRAP", None)
    try:
        result = subprocess.run([sys.executable, str(NOTEBOOK)], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=540)
    except subprocess.TimeoutExpired:
        # the notebook's local cluster runs in processes of its own: a killed notebook leaves them
        LocalCluster(tmp_path / "cluster", brokers=3).down(timeout_s=60)
        raise
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    assert "TOUR OK:" in result.stdout, result.stdout[-4000:]
    assert not (tmp_path / "cluster" / "bootstrap").exists(), "the notebook left its cluster running"
