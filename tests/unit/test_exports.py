"""The public surface: ``spark_log``'s exports and the shared kernel's modules (the
dependency direction and the import structure: ``test_imports.py``)."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import spark_log

from .test_imports import KERNEL

ROOT = Path(__file__).resolve().parents[2]


def test_all_names_exist_and_are_sorted() -> None:
    assert list(spark_log.__all__) == sorted(spark_log.__all__)
    for name in spark_log.__all__:
        assert hasattr(spark_log, name), name


def test_no_private_names_leak_into_all() -> None:
    assert not [name for name in spark_log.__all__ if name.startswith("_")]


@pytest.mark.parametrize("name", [k for k in KERNEL if k != "spark_log.proto"])
def test_kernel_modules_are_public_with_explicit_exports(name: str) -> None:
    """The shared kernel (brokers and connectors build on it): public modules, each with an
    ``__all__`` of names it defines, none private."""
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported, f"{name} has no __all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
    assert not [n for n in exported if n.startswith("_")]


@pytest.mark.parametrize("service", ["broker", "compaction", "controller", "raft", "groups"])
def test_kernel_holds_the_generated_protocol(service: str) -> None:
    messages = importlib.import_module(f"spark_log.proto.{service}_pb2")
    stubs = importlib.import_module(f"spark_log.proto.{service}_pb2_grpc")
    assert messages.DESCRIPTOR.package and [name for name in dir(stubs) if name.endswith("Stub")]


def test_wire_format_and_schema_codecs_are_in_the_kernel() -> None:
    """What brokers decode lives in public modules (they must not import the clients)."""
    from spark_log import filters, schemas

    assert {"filter_schema", "serialize_filter", "deserialize_filter"} <= set(filters.__all__)
    assert {"schema_to_bytes", "schema_from_bytes", "BYTES_SCHEMA", "HEADERS_TYPE"} <= set(schemas.__all__)


def test_partitioner_is_public() -> None:
    from spark_log import partitioner

    assert partitioner.partition_for_key(b"key", 7) == spark_log.partitioner.partition_for_key("key", 7)
    assert set(partitioner.__all__) >= {"key_array", "partitions_for_keys", "partition_for_key", "murmur2"}


def test_package_ships_type_marker() -> None:
    assert (ROOT / "spark_log" / "py.typed").exists()
