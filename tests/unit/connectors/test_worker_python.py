"""The launcher that keeps Spark's duplicate source zips off its Python workers' path."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from connectors import worker_python
from connectors.worker_python import duplicate_zips, launcher_for
from spark_log.errors import InvalidConfigError


def _zip(path: Path, member: str, version: str) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, f'__version__: str = "{version}"\n')
    return path


def test_only_zips_of_the_installed_versions_are_duplicates(tmp_path: Path) -> None:
    spark_zip = _zip(tmp_path / "pyspark.zip", "pyspark/version.py", "4.2.0")
    py4j_zip = _zip(tmp_path / "py4j-0.10.9.9-src.zip", "py4j/version.py", "0.10.9.9")
    assert duplicate_zips(tmp_path, "4.2.0", "0.10.9.9") == [spark_zip, py4j_zip]
    assert duplicate_zips(tmp_path, "4.1.0", "0.10.9.9") == [py4j_zip]
    assert duplicate_zips(tmp_path, "4.2.0", "0.10.9.7") == [spark_zip]
    assert duplicate_zips(tmp_path, "4.2.0", None) == [spark_zip]
    (tmp_path / "pyspark.zip").write_bytes(b"not a zip")
    assert duplicate_zips(tmp_path, "4.2.0", None) == []


def test_the_launcher_drops_exactly_the_duplicate_zips_from_pythonpath(tmp_path: Path) -> None:
    odd = tmp_path / "it's a dir" / "lib"
    odd.mkdir(parents=True)
    dropped = [_zip(odd / "pyspark.zip", "pyspark/version.py", "1"), _zip(odd / "py4j-1-src.zip", "py4j/version.py", "1")]
    launcher = tmp_path / "launcher"
    launcher.write_text(worker_python._script(sys.executable, dropped))
    launcher.chmod(0o755)
    kept_before, kept_after = "/a/b", f"{odd}/other.zip"
    path = os.pathsep.join([kept_before, str(dropped[0]), "/c*d", str(dropped[1]), kept_after])
    out = subprocess.run([str(launcher), "-c", "import os, sys; print(os.environ['PYTHONPATH']); print(sys.executable)"],
                         env=dict(os.environ, PYTHONPATH=path), capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.splitlines() == [os.pathsep.join([kept_before, "/c*d", kept_after]), sys.executable]


def test_another_interpreter_or_the_setting_off_gets_no_launcher(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    other = tmp_path / "python3"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    assert launcher_for(str(other)) is None
    assert launcher_for("no-such-python-here") is None
    assert launcher_for(sys.executable) is not None
    monkeypatch.setenv("SPARK_LOG_WORKER_PYTHON", "spark")
    assert launcher_for(sys.executable) is None
    monkeypatch.setenv("SPARK_LOG_WORKER_PYTHON", "fast")
    with pytest.raises(InvalidConfigError, match="SPARK_LOG_WORKER_PYTHON"):
        launcher_for(sys.executable)


def test_the_launcher_is_written_once_and_runs_this_interpreter() -> None:
    first = launcher_for(sys.executable)
    assert first is not None and launcher_for(sys.executable) == first
    out = subprocess.run([first, "-c", "import sys, pyspark; print(sys.prefix); print(pyspark.__file__)"],
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, worker_python._installed_duplicates()))),
                         capture_output=True, text=True, check=True, timeout=60)
    prefix, origin = out.stdout.splitlines()
    assert prefix == sys.prefix
    assert ".zip" not in origin and origin.endswith(os.path.join("pyspark", "__init__.py")), origin
