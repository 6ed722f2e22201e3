"""Spark session helpers: register the ``spark-log`` format, or build a local session
already wired to the embedded local cluster.

``register(spark)`` is the one call a notebook needs.  ``local_session()`` is the
laptop path: it finds the local cluster's bootstrap (argument, ``SPARK_LOG_BOOTSTRAP``,
else the file ``.spark-log/bootstrap`` that ``spark-log dev up`` writes; with
``start_cluster=True`` it runs ``spark-log dev up`` first), exports it to the driver and
to executors (``spark.executorEnv.SPARK_LOG_BOOTSTRAP``) and builds a small local
SparkSession bound to 127.0.0.1 with the format registered.
"""
from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Mapping

from .class_archive import java_options_conf
from .worker_python import adopt as adopt_worker_python

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register", "local_session", "FORMAT", "JVM_CLASS", "jvm_jar", "jvm_available", "unregistered_jvm_jar"]

FORMAT = "spark-log"
JVM_CLASS = "io.sparklog.spark.SparkLogProvider"
_JVM_JAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jvm", "build", "spark-log-jvm.jar")


def jvm_jar() -> str | None:
    """The JVM implementation's jar (``make install`` builds it when a JDK is present), or
    None.  ``SPARK_LOG_CONNECTOR=python`` hides it (the Python connector is used)."""
    if os.environ.get("SPARK_LOG_CONNECTOR", "").lower() == "python":
        return None
    return _JVM_JAR if os.path.exists(_JVM_JAR) else None


def unregistered_jvm_jar(directory: str) -> str | None:
    """A copy of the JVM jar without its ``DataSourceRegister`` entry (None without the jar):
    on a session's classpath its source is reachable only by class name (``JVM_CLASS``) while
    ``spark-log`` stays the Python data source, so one session can run both (tests, bench)."""
    import zipfile

    jar = jvm_jar()
    if jar is None:
        return None
    out = os.path.join(directory, "spark-log-jvm-classes.jar")
    with zipfile.ZipFile(jar) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            if not item.filename.startswith("META-INF/services/"):
                target.writestr(item, source.read(item.filename))
    return out


def jvm_available(spark: "SparkSession") -> bool:
    """Whether ``format("spark-log")`` resolves to the JVM implementation on ``spark``: its jar
    (with its ``DataSourceRegister`` entry) is on the classpath.  In PySpark 4.2 such a jar
    silently wins over a Python data source of the same name."""
    try:
        jvm: Any = getattr(spark.sparkContext, "_jvm")
        conf: Any = getattr(spark, "_jsparkSession").sessionState().conf()
        found = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(FORMAT, conf)
        return bool(found.getName() == JVM_CLASS)
    except Exception:  # noqa: BLE001 - py4j raises its own error types when nothing serves the name
        return False


# Filter pushdown for Python data sources is off by default in Spark; the batch reader
# implements pushFilters, which Spark refuses to call unless this is on.
_SESSION_CONF = {"spark.sql.python.filterPushdown.enabled": "true"}


def register(spark: "SparkSession", *, force_python: bool = False) -> str:
    """Make the ``spark-log`` format available on ``spark`` (idempotent); returns which
    implementation ``format("spark-log")`` uses: ``"jvm"`` or ``"python"``.

    When the JVM implementation's jar is on the session's classpath (``local_session`` puts
    it on ``spark.jars``), nothing is registered: its ``DataSourceRegister`` serves the name
    (newer Spark versions refuse a Python source of the same name).  Otherwise the Python
    data source is registered, with Python data source filter pushdown enabled for the session
    (``spark.sql.python.filterPushdown.enabled``, which its batch reader needs).
    ``force_python`` registers the Python source even then (it is then reachable only if
    the jar is not on the classpath; tests use it under another name).
    """
    if jvm_available(spark) and not force_python:
        return "jvm"
    from .source import SparkLogDataSource

    for key, value in _SESSION_CONF.items():
        spark.conf.set(key, value)
    spark.dataSource.register(SparkLogDataSource)
    return "python"


def _bootstrap(bootstrap: str | None, start_cluster: bool) -> str | None:
    if bootstrap:
        return bootstrap
    if os.environ.get("SPARK_LOG_BOOTSTRAP"):
        return os.environ["SPARK_LOG_BOOTSTRAP"]
    if start_cluster:
        subprocess.run([sys.executable, "-m", "spark_log.cli", "dev", "up"], check=True)
    path = os.path.join(".spark-log", "bootstrap")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip() or None
    return None


def local_session(
    bootstrap: str | None = None,
    *,
    app_name: str = "spark-log",
    master: str = "local[2]",
    start_cluster: bool = False,
    conf: Mapping[str, str] | None = None,
    connector: str = "auto",
) -> "SparkSession":
    """A local SparkSession wired to a spark-log cluster, with ``spark-log`` registered.

    The session binds to 127.0.0.1, has the UI off and few shuffle partitions; its driver
    maps Spark's classes from the class archive ``make install`` built, when there is one
    for this JVM and Spark (``connectors.class_archive``: a faster start).  When a
    bootstrap is found it becomes the default of every query (driver and executors);
    without one, queries need the ``bootstrap`` option.  ``conf`` entries win.

    ``connector``: ``"auto"`` puts the JVM implementation's jar on ``spark.jars`` when it
    was built (``jvm_jar()``), so ``spark-log`` is the JVM one, else registers the Python
    one; ``"python"`` never adds the jar; ``"jvm"`` requires it (``FileNotFoundError``).
    """
    if connector not in ("auto", "python", "jvm"):
        raise ValueError(f"connector must be 'auto', 'python' or 'jvm', got {connector!r}")
    jar = None if connector == "python" else jvm_jar()
    if connector == "jvm" and jar is None:
        raise FileNotFoundError(f"the JVM connector jar is missing ({_JVM_JAR}): run `make install` with a JDK")
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    address = _bootstrap(bootstrap, start_cluster)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if jar is not None:
        builder = builder.config("spark.jars", jar)
    if address:
        os.environ["SPARK_LOG_BOOTSTRAP"] = address
        builder = builder.config("spark.executorEnv.SPARK_LOG_BOOTSTRAP", address)
    settings = {**_SESSION_CONF, **dict(conf or {})}
    settings.update(java_options_conf(master, settings))
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    adopt_worker_python(spark)
    register(spark)
    return spark
