"""Start and kill the kill tests' Spark jobs (``tests.spark.kill_job``) as their own process groups.

The jobs' JVMs (Spark's launcher and the driver) are short-lived: each starts Spark, runs a
batch or two and is killed.  They inherit the suite's JVM options from the environment
(``tests/support/jvm_options.py``, set by ``tests/conftest.py``: C1 only, the serial
collector), which halve a session's start and first query (16.8 and 17.7 CPU s with the
defaults, 9.1 and 10.0 with these; a JVM sink kill job 20.6-24.0 CPU s with the defaults,
10.9-12.0 with these).  Spark session starts are most of the kill tests' time.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def start_job(log: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    """``python -m tests.spark.kill_job *args`` in its own process group, with ``env`` added;
    its output goes to ``log`` (never a pipe that could fill)."""
    full = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, **env)
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "tests.spark.kill_job", *args], cwd=REPO, env=full,
                                start_new_session=True, stdout=out, stderr=subprocess.STDOUT)


def kill_job(process: subprocess.Popen[bytes]) -> None:
    """kill -9 the job's whole process group (driver, JVM, Python workers) and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=60)
