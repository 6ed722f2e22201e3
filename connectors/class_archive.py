"""A class-data-sharing archive of Spark's classes, so local Spark sessions start faster.

A Spark driver JVM loads and verifies about 20,000 classes from the jars pip's pyspark ships
before its first query.  JDK 17 can map classes a previous JVM loaded from a *dynamic CDS
archive* instead (``-XX:ArchiveClassesAtExit`` writes one, ``-XX:SharedArchiveFile`` maps it).
``make install`` builds one (``python -m connectors.class_archive build``: a small Spark
session that runs the kinds of query spark-log's jobs run, then exits); ``local_session``
(and the Spark application that hosts brokers) adds it to the driver's
``spark.driver.extraJavaOptions`` when one exists for the JVM and Spark at hand, and to the
executors' for a ``local-cluster`` master.  On this machine a local session's start and
first query take 9 s instead of 14, and a ``local-cluster[2,1,1024]``'s executors are up and
through a first job in 19 s instead of 28.

The archive is named after everything the JVM checks when it maps one (``archive_key``: the
``java`` binary Spark will run and its ``libjvm.so``, the pyspark version and Spark's jars),
so a JDK or pyspark upgrade simply finds no archive (Spark starts as before) rather than a
stale one.  A build writes aside, checks that a JVM maps the result with sharing forced on,
and only then renames it into place: the JVM crashes (SIGBUS) on a truncated archive, so a
partial one must never be found.

``SPARK_LOG_CLASS_ARCHIVE=off`` turns it off; ``SPARK_LOG_CLASS_ARCHIVE_DIR`` moves it
(default: ``<sys.prefix>/spark-log-class-archive``, inside the virtualenv).
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Mapping

from spark_log.errors import InvalidConfigError

__all__ = ["archive_key", "archive_dir", "archive_path", "with_archive", "java_options_conf", "build", "mapping_problem", "main"]

_SETTING = "SPARK_LOG_CLASS_ARCHIVE"


def _enabled() -> bool:
    value = os.environ.get(_SETTING, "auto").strip().lower() or "auto"
    if value not in ("auto", "off"):
        raise InvalidConfigError(f"{_SETTING} must be 'auto' or 'off', got {os.environ[_SETTING]!r}")
    return value == "auto"


def _spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def _java() -> Path | None:
    """The ``java`` Spark's launcher runs (``$JAVA_HOME/bin/java``, else the one on PATH)."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return Path(os.path.realpath(found)) if found and os.path.exists(found) else None


def archive_key() -> str | None:
    """A digest of what a JVM checks when it maps the archive (None without a ``java``)."""
    from importlib.metadata import version

    java = _java()
    if java is None:
        return None
    digest = hashlib.sha256()
    digest.update(str(java).encode())
    for libjvm in sorted(glob.glob(str(java.parent.parent / "lib" / "*" / "libjvm.so"))):
        stat = os.stat(libjvm)
        digest.update(f"{libjvm}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    digest.update(version("pyspark").encode())
    home = _spark_home()
    digest.update(str(home).encode())
    for jar in sorted(os.scandir(home / "jars"), key=lambda entry: entry.name):
        digest.update(f"{jar.name}:{jar.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def archive_dir() -> Path:
    return Path(os.environ.get("SPARK_LOG_CLASS_ARCHIVE_DIR") or os.path.join(sys.prefix, "spark-log-class-archive"))


def archive_path() -> Path | None:
    """Where this JVM's and Spark's archive is (or would be); None without a ``java``."""
    key = archive_key()
    return None if key is None else archive_dir() / f"spark-{key}.jsa"


def _archive_option() -> str | None:
    """``-XX:SharedArchiveFile=...`` when an archive exists for this JVM and Spark (and
    ``SPARK_LOG_CLASS_ARCHIVE`` is not ``off``), else None.  Spark splits Java options at
    spaces, so an archive whose path has one is not used."""
    if not _enabled():
        return None
    path = archive_path()
    if path is None or " " in str(path) or not path.is_file():
        return None
    return f"-XX:SharedArchiveFile={path}"


def _added(option: str | None, existing: str) -> str:
    if option is None or "SharedArchiveFile" in existing:  # the user's own archive wins
        return existing
    return f"{option} {existing}".strip()


def with_archive(existing: str = "") -> str:
    """``existing`` JVM options (a driver's or a local executor's) with the archive added
    (``_archive_option``); else ``existing`` as it is."""
    return _added(_archive_option(), existing)


def java_options_conf(master: str, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``spark.driver.extraJavaOptions`` (and, for a ``local-cluster`` master, whose
    executors run this machine's JVM and Spark, ``spark.executor.extraJavaOptions``) that map
    the archive, merged with those in ``conf``; empty when there is no archive to add."""
    conf = conf or {}
    option = _archive_option()
    keys = ["spark.driver.extraJavaOptions"]
    if master.startswith("local-cluster"):
        keys.append("spark.executor.extraJavaOptions")
    merged = {key: _added(option, conf.get(key, "")) for key in keys}
    return {key: value for key, value in merged.items() if value != conf.get(key, "")}


# What the archive's JVM runs: a session like local_session's, a batch query through a
# Python data source and a Python worker (Arrow), Parquet read and write, and a file
# stream with a checkpoint, which are the kinds of query spark-log's jobs and tests run.
_WARM_UP = r"""
import os, sys
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader

class Rows(DataSource):
    @classmethod
    def name(cls): return "class_archive_rows"
    def schema(self): return "key binary, value binary, offset bigint"
    def reader(self, schema): return RowsReader()

class RowsReader(DataSourceReader):
    def read(self, partition):
        import pyarrow as pa
        yield pa.record_batch({"key": [b"k"] * 10, "value": [b"v"] * 10, "offset": list(range(10))})

spark = (SparkSession.builder.master("local[2]").appName("spark-log-class-archive")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.driver.extraJavaOptions", "-XX:ArchiveClassesAtExit=" + sys.argv[1]).getOrCreate())
jvm = spark.sparkContext._gateway.proc  # spark-submit execs the driver JVM: this is it
classpath = spark.sparkContext._jvm.java.lang.System.getProperty("java.class.path")
work = sys.argv[2]
spark.dataSource.register(Rows)
rows = spark.read.format("class_archive_rows").load()
rows.groupBy("key").count().collect()
rows.write.parquet(os.path.join(work, "in"))
def double(batches):
    for batch in batches:
        yield batch
spark.read.parquet(os.path.join(work, "in")).mapInArrow(double, rows.schema).collect()
stream = (spark.readStream.schema(rows.schema).parquet(os.path.join(work, "in")).writeStream.format("noop")
          .option("checkpointLocation", os.path.join(work, "checkpoint")).trigger(availableNow=True).start())
stream.awaitTermination(300)
spark.stop()
jvm.stdin.close()  # the gateway JVM exits at its stdin's end, writing the archive as it goes
jvm.wait(timeout=300)
print("CLASS_ARCHIVE_CLASSPATH=" + classpath)
"""


def build(timeout_s: float = 600) -> Path:
    """Build the archive for this JVM and Spark (see the module doc); returns its path.
    Raises ``RuntimeError`` (with the JVM's output) if no mappable archive came out."""
    path = archive_path()
    if path is None:
        raise RuntimeError("no java found (JAVA_HOME or PATH): Spark needs Java 17")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".building-") as work:
        aside = Path(work) / path.name
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, JAVA_TOOL_OPTIONS="")
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        run = subprocess.run([sys.executable, "-c", _WARM_UP, str(aside), work], env=env, capture_output=True,
                             text=True, timeout=timeout_s)
        # the JVM logs its CDS warnings (jars it skips) to the same stdout
        found = [line.partition("=")[2] for line in run.stdout.splitlines() if line.startswith("CLASS_ARCHIVE_CLASSPATH=")]
        if run.returncode != 0 or len(found) != 1:
            raise RuntimeError(f"the archive's Spark session failed (exit {run.returncode}):\n{run.stderr[-3000:]}")
        problem = mapping_problem(aside, found[0])
        if problem:
            raise RuntimeError(problem)
        os.replace(aside, path)
    return path


def mapping_problem(archive: Path, classpath: str) -> str | None:
    """None if a JVM with ``classpath`` maps ``archive`` with sharing forced on
    (``-Xshare:on`` fails instead of starting without it), else what went wrong."""
    java = _java()
    if java is None or not archive.is_file():
        return f"no java, or no archive at {archive}"
    with tempfile.TemporaryDirectory(prefix="spark-log-class-archive-check-") as work:  # a crash's hs_err file
        check = subprocess.run([str(java), f"-XX:SharedArchiveFile={archive}", "-Xshare:on", "-XX:-CreateCoredumpOnCrash",
                                "-cp", classpath, "-version"], capture_output=True, text=True, timeout=120, cwd=work)
    if check.returncode != 0:
        return f"the archive does not map (exit {check.returncode}):\n{check.stdout[-2000:]}{check.stderr[-2000:]}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m connectors.class_archive", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["build", "path"])
    args = parser.parse_args(argv)
    if args.command == "path":
        print(archive_path() or "")
        return 0
    path = archive_path()
    if path is not None and path.is_file():
        print(f"spark-log: class archive up to date: {path}")
        return 0
    try:
        print(f"spark-log: built class archive {build()}")
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"spark-log: no class archive (Spark starts without one): {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
