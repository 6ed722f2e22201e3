"""``brokers.log.durable``: atomic replace and the one place for fsync and rename, all
through the file layer (``brokers.log.files``), the only module that touches the OS."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

import brokers
from brokers.log import durable, files


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

    class Recording(files.OsFiles):
        def fsync(self, fd: int) -> None:
            events.append("fsync file")

        def fsync_dir(self, directory: Path) -> None:
            events.append(f"fsync dir {Path(directory).name}")

        def replace(self, source: Path, target: Path) -> None:
            events.append("rename")
            super().replace(source, target)

    previous = files.use(Recording())
    try:
        durable.atomic_write(path, b"x")
    finally:
        files.use(previous)
    assert events == ["fsync file", "rename", f"fsync dir {tmp_path.name}"]
    assert path.read_bytes() == b"x"


def test_fsync_dir_of_a_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        durable.fsync_dir(tmp_path / "missing")


def _calls(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            names.add(f"{node.func.value.id}.{node.func.attr}")
    return names


_SYNC = {"os.fsync", "os.fdatasync", "os.replace", "os.rename"}
_WRITE = {"os.open", "os.close", "os.write", "os.pwrite", "os.pwritev", "os.ftruncate", "os.truncate", "os.remove",
          "os.unlink", "os.rename"}


@pytest.mark.parametrize("package", ["log", "raft"])
def test_storage_and_raft_fsync_and_rename_only_through_durable(package: str) -> None:
    """One narrow seam for durability: fsync and rename only in the file layer (and
    ``durable.py`` on top of it)."""
    root = Path(brokers.__file__).parent / package
    offenders = {}
    for source in sorted(root.glob("*.py")):
        if source.name == "files.py":
            continue
        found = _calls(ast.parse(source.read_text())) & _SYNC
        if found:
            offenders[source.name] = sorted(found)
    assert offenders == {}


def test_the_log_changes_files_only_through_the_file_layer() -> None:
    """A power-cut layer sees every write of the log, or it would restore too much."""
    root = Path(brokers.__file__).parent / "log"
    offenders = {}
    for source in sorted(root.glob("*.py")):
        if source.name == "files.py":
            continue
        tree = ast.parse(source.read_text())
        found = _calls(tree) & _WRITE
        found |= {f"{n.func.attr}()" for n in ast.walk(tree) if isinstance(n, ast.Call)
                  and isinstance(n.func, ast.Attribute) and n.func.attr in {"write_bytes", "write_text", "unlink"}
                  and not (isinstance(n.func.value, ast.Name) and n.func.value.id == "files")}
        if found:
            offenders[source.name] = sorted(found)
    assert offenders == {}


def test_slow_files_delays_what_the_fault_file_says_and_ignores_a_bad_file(tmp_path: Path) -> None:
    waits: list[float] = []
    fault_file = tmp_path / "disk.json"
    fault_file.write_text('{"3": {"write_ms": 5, "fsync_ms": 200}}')
    layer = files.SlowFiles(fault_file, 3, sleep=waits.append)
    target = tmp_path / "f"
    fd = layer.open(target, os.O_RDWR | os.O_CREAT)
    try:
        layer.pwrite(fd, b"abc", 0)
        layer.fsync(fd)
        assert waits == [0.005, 0.2]
        fault_file.write_text('{"3": {"fsync_ms": "slow"}}')   # does not parse: no faults, logged
        layer.fsync(fd)
        assert waits == [0.005, 0.2]
        fault_file.write_text('{"4": {"fsync_ms": 100}}')      # another broker's
        layer.fsync(fd)
        assert waits == [0.005, 0.2]
    finally:
        layer.close(fd)
    assert target.read_bytes() == b"abc"
