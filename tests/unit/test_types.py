"""The product code passes ``mypy --strict`` (``[tool.mypy]`` in pyproject.toml: spark_log,
brokers, connectors and jobs; each override there names its reason)."""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_mypy_strict_finds_nothing() -> None:
    mypy = Path(sys.executable).with_name("mypy")
    with tempfile.TemporaryDirectory(prefix="mypy-cache-") as cache:  # never a stale cache in the tree
        result = subprocess.run([str(mypy), "--cache-dir", cache, "--no-error-summary"],
                                cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
