"""Byte code for the Python that Spark's own Python workers import.

Spark starts its Python workers (the daemon's forked workers, the data source planners, the
streaming source runner) with ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's source zip
first on ``PYTHONPATH``.  pip's pyspark ships those zips with sources only, and Python never
caches byte code for a zip, so every worker process compiles pyspark again at import: 1.3 to
1.7 s of CPU where the byte-compiled package in site-packages takes 0.6 s.  A local Spark
application starts dozens of such processes, and a slow start can miss Spark's fixed 10 s
connect-back of the streaming source runner (``PythonWorkerFactory.createSimpleWorker``).

``make install`` adds, next to every ``.py`` in those zips, the ``.pyc`` that zipimport
looks for (PEP 552 hash-based byte code checked against its source, so a pyc that does not
match the source beside it is never used, and an interpreter of another version falls back
to the source).  The sources stay: the zips import the same code, only faster.  A zip is
rewritten aside and renamed into place (pip installers may hard-link the original from
their cache, which the rename leaves untouched); a zip that already carries byte code is
left alone.  ``python -m connectors.worker_bytecode`` does it for the installed pyspark.
"""
from __future__ import annotations

import argparse
import importlib.util
import marshal
import os
import sys
import zipfile
from pathlib import Path

__all__ = ["has_bytecode", "add_bytecode", "spark_python_zips", "main"]

_CHECKED_HASH = 0b11  # PEP 552 flags: hash-based, checked against the source


def has_bytecode(archive: Path) -> bool:
    """True when ``archive`` already carries byte code (``add_bytecode`` writes a whole zip at
    once, so one ``.pyc`` means it ran)."""
    with zipfile.ZipFile(archive) as zf:
        return any(name.endswith(".pyc") for name in zf.namelist())


def _pyc(source: bytes, filename: str) -> bytes:
    code = compile(source, filename, "exec", dont_inherit=True)
    return (importlib.util.MAGIC_NUMBER + _CHECKED_HASH.to_bytes(4, "little")
            + importlib.util.source_hash(source) + marshal.dumps(code))


def add_bytecode(archive: Path) -> bool:
    """Rewrite ``archive`` with a checked-hash ``.pyc`` beside every ``.py``; returns False
    (and changes nothing) when it already has them.  A source that does not compile with this
    interpreter keeps no ``.pyc`` and imports from source as before."""
    archive = Path(archive)
    if has_bytecode(archive):
        return False
    aside = archive.with_name(f".{archive.name}.{os.getpid()}.tmp")
    try:
        with zipfile.ZipFile(archive) as zin, zipfile.ZipFile(aside, "w", zipfile.ZIP_DEFLATED) as zout:
            names = set(zin.namelist())
            for info in zin.infolist():
                data = zin.read(info)
                zout.writestr(info, data)
                if not info.filename.endswith(".py") or info.filename + "c" in names:
                    continue
                try:
                    # the name zipimport itself gives code compiled from the zip: same tracebacks
                    pyc = _pyc(data, os.path.join(str(archive), info.filename))
                except (SyntaxError, ValueError):
                    continue
                entry = zipfile.ZipInfo(info.filename + "c", date_time=info.date_time)
                entry.compress_type = zipfile.ZIP_DEFLATED
                entry.external_attr = info.external_attr
                zout.writestr(entry, pyc)
        with open(aside, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(aside, archive)
    finally:
        aside.unlink(missing_ok=True)
    return True


def spark_python_zips() -> list[Path]:
    """The zips Spark puts first on its workers' ``PYTHONPATH``: ``$SPARK_HOME/python/lib/*.zip``
    of the installed pyspark (none when pyspark is not a pip install that ships them)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return []
    return sorted((Path(spec.origin).parent / "python" / "lib").glob("*.zip"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m connectors.worker_bytecode", description=__doc__.split("\n")[0])
    parser.parse_args(argv)
    for archive in spark_python_zips():
        try:
            changed = add_bytecode(archive)
        except (OSError, zipfile.BadZipFile) as exc:
            print(f"spark-log: left {archive} as it is ({exc}); Spark's Python workers compile it at every start",
                  file=sys.stderr)
            continue
        print(f"spark-log: {'added byte code to' if changed else 'byte code already in'} {archive}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
