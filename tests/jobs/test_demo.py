"""The main job, ``python -m jobs.demo``, run as ``make demo`` runs it (a subprocess), on its
own local cluster in a temporary directory; a shortened writing phase keeps it bounded."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.fault, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_demo_kills_a_broker_and_counts_every_event_once(tmp_path: Path) -> None:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    result = subprocess.run(
        [sys.executable, "-m", "jobs.demo", "--data-dir", str(tmp_path / "cluster"), "--seconds", "16",
         "--down-seconds", "4", "--progress-seconds", "2"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=540,
    )
    out = result.stdout
    assert result.returncode == 0, f"exit {result.returncode}\n{out[-4000:]}\n{result.stderr[-4000:]}"
    assert "killing broker" in out and "is back (restarted)" in out, out[-4000:]
    check = re.search(r"^CHECK OK: (\d+) clicks counted == (\d+) events written \(nothing lost, nothing doubled\)$",
                      out, re.MULTILINE)
    assert check is not None, out[-4000:]
    assert check.group(1) == check.group(2) and int(check.group(1)) > 0
    assert "stopping the local cluster we started" in out
    assert not (tmp_path / "cluster" / "bootstrap").exists(), "the demo left its cluster running"
