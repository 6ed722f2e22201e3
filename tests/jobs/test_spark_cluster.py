"""Brokers hosted on a Spark ``local-cluster``: runs ``spark_cluster_cases.py`` in its own
pytest process and reports each of its cases here.

The cases need a SparkContext with a ``local-cluster[4,1,1024]`` master, and a Python
process holds one SparkContext at a time: run in the suite's process they would depend on
no other test module having started a session first.  A child pytest process gives them a
fresh JVM whatever ran before; its JUnit XML report carries each case's outcome and
failure text back, and every expected case must have run and passed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CASES_FILE = Path(__file__).with_name("spark_cluster_cases.py")
CASES = (
    "test_each_broker_runs_in_its_own_executor_with_a_stable_identity",
    "test_clients_and_connector_read_and_write",
    "test_losing_a_broker_hosting_executor_loses_no_acknowledged_record",
)
CHILD_TIMEOUT_S = 540  # inside the suite's 600 s per-test timeout


def _outcomes(report: Path) -> dict[str, tuple[str, str]]:
    outcomes: dict[str, tuple[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome, text = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = child.tag
                text = (child.get("message") or "") + "\n" + (child.text or "")
                break
        outcomes[case.get("name", "")] = (outcome, text)
    return outcomes


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    work = tmp_path_factory.mktemp("spark-cluster-child")
    report = work / "report.xml"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    child = subprocess.run(
        [sys.executable, "-m", "pytest", str(CASES_FILE), "-q", "-p", "no:cacheprovider",
         f"--junitxml={report}", f"--basetemp={work / 'tmp'}", "-o", "junit_family=xunit2"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    assert report.exists(), f"the child pytest wrote no report (exit {child.returncode}):\n{child.stdout[-4000:]}\n{child.stderr[-4000:]}"
    found = _outcomes(report)
    assert set(found) == set(CASES), f"cases run {sorted(found)} != expected {sorted(CASES)}:\n{child.stdout[-4000:]}"
    return found


@pytest.mark.parametrize("case", CASES)
def test_hosted_brokers(outcomes: dict[str, tuple[str, str]], case: str) -> None:
    outcome, text = outcomes[case]
    assert outcome == "passed", f"{case} {outcome}:\n{text[-6000:]}"
