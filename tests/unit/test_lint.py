"""The code passes ruff's correctness rules (pyflakes + syntax; ``[tool.ruff]`` in
pyproject.toml): no undefined names, no unused imports or variables."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run([str(ruff), "check", "--no-cache", "--output-format", "concise",
                             "spark_log", "brokers", "connectors", "jobs", "bench", "tests"],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
