"""``brokers.log.durable``: atomic replace and the one place for fsync and rename."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

import brokers
from brokers.log import durable


def test_atomic_write_replaces_and_leaves_no_tmp(tmp_path: Path) -> None:
    path = tmp_path / "state"
    durable.atomic_write(path, b"one")
    durable.atomic_write(path, b"two" * 100_000)
    assert path.read_bytes() == b"two" * 100_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_a_failed_write_keeps_the_old_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state"
    durable.atomic_write(path, b"old")

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "EIO")

    monkeypatch.setattr(durable, "fsync_fd", broken_fsync)
    with pytest.raises(OSError):
        durable.atomic_write(path, b"new")
    assert path.read_bytes() == b"old"


def test_atomic_write_syncs_the_file_before_the_rename_and_the_directory_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state"
    events: list[str] = []
    real_replace = os.replace
    monkeypatch.setattr(durable, "fsync_fd", lambda fd: events.append("fsync file"))
    monkeypatch.setattr(durable, "fsync_dir", lambda d: events.append(f"fsync dir {Path(d).name}"))
    monkeypatch.setattr(durable.os, "replace", lambda a, b: (events.append("rename"), real_replace(a, b)))
    durable.atomic_write(path, b"x")
    assert events == ["fsync file", "rename", f"fsync dir {tmp_path.name}"]


def test_fsync_dir_of_a_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        durable.fsync_dir(tmp_path / "missing")


def _calls(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            names.add(f"{node.func.value.id}.{node.func.attr}")
    return names


@pytest.mark.parametrize("package", ["log", "raft"])
def test_storage_and_raft_fsync_and_rename_only_through_durable(package: str) -> None:
    """One narrow seam for durability (a power-loss file layer goes under it later)."""
    root = Path(brokers.__file__).parent / package
    offenders = {}
    for source in sorted(root.glob("*.py")):
        if source.name == "durable.py":
            continue
        found = _calls(ast.parse(source.read_text())) & {"os.fsync", "os.fdatasync", "os.replace", "os.rename"}
        if found:
            offenders[source.name] = sorted(found)
    assert offenders == {}
