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


def test_connectors_use_only_public_spark_log_names() -> None:
    """The connector is a client like any other: no ``spark_log._private`` module."""
    offenders: dict[str, list[str]] = {}
    for path in sorted((ROOT / "connectors").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            modules = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            private = [m for m in modules if m.startswith("spark_log.") and any(
                part.startswith("_") for part in m.split(".")[1:])]
            if private:
                offenders.setdefault(str(path.relative_to(ROOT)), []).extend(private)
    assert not offenders, f"connectors must import only public spark_log names: {offenders}"


def test_partitioner_is_public() -> None:
    from spark_log import partitioner

    assert partitioner.partition_for_key(b"key", 7) == spark_log.partitioner.partition_for_key("key", 7)
    assert set(partitioner.__all__) >= {"key_array", "partitions_for_keys", "partition_for_key", "murmur2"}


def test_package_ships_type_marker() -> None:
    assert (ROOT / "spark_log" / "py.typed").exists()
