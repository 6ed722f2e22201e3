"""A broker or controller node starts without importing pandas: pandas is ~300 modules and
seconds of start-up on a loaded machine, and nodes that must start within a test's bound
never use it (``pa.array`` at module level imports it through pyarrow's pandas shim)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_importing_the_node_does_not_import_pandas() -> None:
    code = "import sys, brokers.node; print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas')[:3])"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=True)
    assert done.stdout.strip() == "[]", done.stdout
