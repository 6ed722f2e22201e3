"""Every benchmark module imports (a bench broken by a refactor elsewhere fails here, in the
suite, not first in ``make bench``: security_bench imported a helper client_bench no longer had)."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
MODULES = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")


def test_the_bench_folder_has_benches() -> None:
    assert "client_bench" in MODULES and "report" in MODULES, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_bench_module_imports(name: str) -> None:
    importlib.import_module(f"bench.{name}")
