"""Byte code added to the zips Spark puts first on its Python workers' path."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from connectors.worker_bytecode import add_bytecode, has_bytecode, spark_python_zips


def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def _import(archive: Path, code: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(archive), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def test_every_source_gets_byte_code_that_imports_the_same_code(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "lib.zip", {"pkg/__init__.py": "", "pkg/mod.py": "def answer():\n    return 41 + 1\n",
                                          "pkg/data.txt": "not python", "pkg/broken.py": "def (:\n"})
    assert not has_bytecode(archive)
    assert add_bytecode(archive) is True
    with zipfile.ZipFile(archive) as zf:
        names = set(zf.namelist())
        assert zf.read("pkg/mod.py").decode().startswith("def answer")  # the sources stay
    assert {"pkg/__init__.pyc", "pkg/mod.pyc"} <= names and "pkg/data.txt" in names
    assert "pkg/broken.pyc" not in names  # what does not compile imports from source, as before
    assert has_bytecode(archive)
    out = _import(archive, "import pkg.mod as m; print(m.__file__); print(m.answer())")
    assert out.splitlines() == [f"{archive}{os.sep}pkg{os.sep}mod.pyc", "42"]
    # a traceback names the source inside the zip, as zipimport's own compile does
    assert _import(archive, "import pkg.mod as m; print(m.answer.__code__.co_filename)") == \
        os.path.join(str(archive), "pkg/mod.py")


def test_a_second_run_changes_nothing(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "lib.zip", {"pkg/__init__.py": "X = 1\n"})
    add_bytecode(archive)
    before = archive.stat().st_mtime_ns, archive.read_bytes()
    assert add_bytecode(archive) is False
    assert (archive.stat().st_mtime_ns, archive.read_bytes()) == before
    assert not list(tmp_path.glob(".*.tmp")), "a file written aside was left behind"


def test_byte_code_that_does_not_match_its_source_is_not_used(tmp_path: Path) -> None:
    built = _zip(tmp_path / "built.zip", {"pkg/__init__.py": "X = 1\n"})
    add_bytecode(built)
    with zipfile.ZipFile(built) as zf:
        stale = zf.read("pkg/__init__.pyc")
    edited = tmp_path / "edited.zip"
    with zipfile.ZipFile(edited, "w") as zf:
        zf.writestr("pkg/__init__.py", "X = 2\n")
        zf.writestr("pkg/__init__.pyc", stale)
    assert _import(edited, "import pkg; print(pkg.X)") == "2"


def test_the_original_file_is_replaced_not_written_through(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "lib.zip", {"pkg/__init__.py": "X = 1\n"})
    cache_copy = tmp_path / "cache.zip"
    os.link(archive, cache_copy)  # as an installer's cache hard-links it
    original = cache_copy.read_bytes()
    add_bytecode(archive)
    assert cache_copy.read_bytes() == original
    assert has_bytecode(archive) and not has_bytecode(cache_copy)


def test_make_install_gave_the_installed_pyspark_zips_byte_code() -> None:
    zips = spark_python_zips()
    assert any(z.name == "pyspark.zip" for z in zips), zips
    assert all(has_bytecode(z) for z in zips), [z for z in zips if not has_bytecode(z)]
