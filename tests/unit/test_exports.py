"""The public surface and the dependency direction (DESIGN.md section 2)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import spark_log

ROOT = Path(__file__).resolve().parents[2]


def _imports(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        if path.name.endswith("_pb2.py") or path.name.endswith("_pb2_grpc.py"):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


def test_all_names_exist_and_are_sorted() -> None:
    assert list(spark_log.__all__) == sorted(spark_log.__all__)
    for name in spark_log.__all__:
        assert hasattr(spark_log, name), name


def test_no_private_names_leak_into_all() -> None:
    assert not [name for name in spark_log.__all__ if name.startswith("_")]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("spark_log", {"brokers", "connectors", "jobs", "pyspark"}),
        ("brokers", {"connectors", "jobs", "pyspark"}),
        ("connectors", {"brokers", "jobs"}),
    ],
)
def test_dependencies_point_one_way(package: str, forbidden: set[str]) -> None:
    offenders = {path: sorted(names & forbidden) for path, names in _imports(package).items() if names & forbidden}
    assert not offenders, f"{package} must not import {sorted(forbidden)}: {offenders}"


def test_package_ships_type_marker() -> None:
    assert (ROOT / "spark_log" / "py.typed").exists()
