"""The nemesis's short slice in the suite: one run with a short fault window, checked.

The sweep is ``make nemesis RUNS=N`` (each run appended to ``tests/nemesis/ledger.csv``);
this runs one fixed seed with 10 s of faults and does not touch the ledger.  It also
checks the ledger itself parses (the README states its totals).  About 35 s.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.netns import available

from .ledger import read, totals
from .run import one_run

pytestmark = [pytest.mark.fault, pytest.mark.slow,
              pytest.mark.skipif(available() is not None, reason=f"{available()}")]


def test_one_nemesis_run_finds_no_anomaly(tmp_path: Path) -> None:
    row = one_run(7, fault_s=10.0, brokers=3, keep=tmp_path / "kept", work_root=tmp_path)
    assert not row.anomalies, f"nemesis seed 7: {row.anomalies}; kept in {row.kept} (faults.log, node logs)"
    assert row.acked > 50
    assert sum(row.faults.values()) >= 3


def test_the_ledger_parses_and_adds_up() -> None:
    rows = read()
    runs, bad, acked, _ = totals(rows)
    assert runs == len(rows) and bad <= runs and acked >= 0
