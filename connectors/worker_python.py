"""Spark's Python workers import pyspark from the byte-compiled install, not Spark's source zips.

Spark starts every Python worker (the daemon and its forked workers, the data source planners,
the streaming source runner) with ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's source zip
first on ``PYTHONPATH``.  pip's pyspark ships those zips with sources only and Python never
caches byte code for a zip, so:

- every worker process compiles pyspark again at import: 1.3 to 1.7 s of CPU, where the
  byte-compiled package in site-packages takes 0.6 s.  A local application starts dozens of
  them, and a slow start can miss Spark's fixed 10 s connect-back of the streaming source
  runner (``PythonWorkerFactory.createSimpleWorker``);
- every task pays again: the worker calls ``importlib.invalidate_caches()`` per task, and
  Python 3.11's zip importer then re-reads the whole directory of pyspark.zip (1,377 entries,
  13 ms).

When those zips hold the very pyspark (and py4j) that the workers' interpreter has installed,
which is the case for a pip-installed pyspark run by the driver's own interpreter,
``adopt(spark)`` points the session's Python workers at a small launcher that drops the two
zips from ``PYTHONPATH`` and runs that interpreter: the same code, from byte code, and no zip
importer.  Anything else (another interpreter, a Spark distribution's own zips, a version that
differs) is left as Spark made it.  ``SPARK_LOG_WORKER_PYTHON=spark`` turns it off.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Sequence

from spark_log.errors import InvalidConfigError

__all__ = ["duplicate_zips", "launcher_for", "adopt"]

_SETTING = "SPARK_LOG_WORKER_PYTHON"
_VERSION = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']""", re.M)


def _enabled() -> bool:
    value = os.environ.get(_SETTING, "installed").strip().lower() or "installed"
    if value not in ("installed", "spark"):
        raise InvalidConfigError(f"{_SETTING} must be 'installed' or 'spark', got {os.environ[_SETTING]!r}")
    return value == "installed"


def _is_this_interpreter(python: str) -> bool:
    """True when ``python`` names the interpreter (and so the environment) running this driver."""
    found = shutil.which(python)
    if found is None:
        return False
    found, mine = os.path.abspath(found), os.path.abspath(sys.executable)
    if found == mine:
        return True
    same_names = {"python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}"}
    return os.path.dirname(found) == os.path.dirname(mine) and os.path.basename(found) in same_names


def _zip_version(archive: Path, member: str) -> str | None:
    try:
        with zipfile.ZipFile(archive) as zf:
            match = _VERSION.search(zf.read(member).decode("utf-8", "replace"))
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    return match.group(1) if match else None


def duplicate_zips(lib: Path, pyspark_version: str, py4j_version: str | None) -> list[Path]:
    """The zips in Spark's ``python/lib`` folder ``lib`` that hold exactly the pyspark and py4j
    versions this interpreter has installed."""
    duplicates: list[Path] = []
    spark_zip = lib / "pyspark.zip"
    if spark_zip.is_file() and _zip_version(spark_zip, "pyspark/version.py") == pyspark_version:
        duplicates.append(spark_zip)
    for py4j_zip in sorted(lib.glob("py4j-*-src.zip")):
        if py4j_version and _zip_version(py4j_zip, "py4j/version.py") == py4j_version:
            duplicates.append(py4j_zip)
    return duplicates


@functools.cache
def _installed_duplicates() -> tuple[Path, ...]:
    """Read once per process: the installed packages do not change under a running driver,
    and every ``local_session`` call would otherwise open both zips again."""
    import py4j.version  # type: ignore[import-untyped]
    import pyspark

    return tuple(duplicate_zips(Path(pyspark.__file__).parent / "python" / "lib", pyspark.__version__,
                                getattr(py4j.version, "__version__", None)))


def _script(python: str, dropped: Sequence[Path]) -> str:
    spellings = sorted({str(form) for path in dropped for form in (path.absolute(), path.resolve())})
    patterns = "|".join(shlex.quote(spelling) for spelling in spellings)
    return f"""#!/bin/sh
# spark-log (connectors/worker_python.py): Spark's Python workers on {python}, importing
# pyspark and py4j from that interpreter's byte-compiled install instead of Spark's source zips.
set -f
kept=
IFS=:
for entry in ${{PYTHONPATH-}}; do
  case $entry in
    {patterns}) ;;
    *) kept=${{kept:+$kept:}}$entry ;;
  esac
done
unset IFS
PYTHONPATH=$kept
export PYTHONPATH
exec {shlex.quote(python)} "$@"
"""


def _write(text: str) -> str:
    name = "spark-log-worker-python-" + hashlib.sha256(text.encode()).hexdigest()[:16]
    for folder in (Path(sys.prefix) / "bin", Path(tempfile.gettempdir())):
        path = folder / name
        if path.is_file() and path.read_text() == text and os.access(path, os.X_OK):
            return str(path)
        aside = folder / f".{name}.{os.getpid()}.tmp"
        try:
            aside.write_text(text)
            aside.chmod(0o755)
            os.replace(aside, path)
            return str(path)
        except OSError:
            aside.unlink(missing_ok=True)
    raise OSError("no writable folder for the worker launcher")


def launcher_for(python: str) -> str | None:
    """The launcher that runs ``python`` without Spark's duplicate source zips on its path, or
    None when that would not import the same code (another interpreter, versions that differ)
    or it is turned off."""
    if not _enabled() or not _is_this_interpreter(python):
        return None
    dropped = _installed_duplicates()
    if not dropped:
        return None
    try:
        return _write(_script(os.path.abspath(shutil.which(python) or python), dropped))
    except OSError:
        return None


def adopt(spark: Any) -> None:
    """Run ``spark``'s Python workers through ``launcher_for`` its Python, when it applies.
    Call it right after the session is created: functions and data sources registered later
    carry the launcher."""
    context = spark.sparkContext
    current = context.pythonExec
    if os.path.basename(current).startswith("spark-log-worker-python-"):
        return
    launcher = launcher_for(current)
    if launcher is not None:
        context.pythonExec = launcher
