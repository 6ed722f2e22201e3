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
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register", "local_session", "FORMAT"]

FORMAT = "spark-log"

# Filter pushdown for Python data sources is off by default in Spark; the batch reader
# implements pushFilters, which Spark refuses to call unless this is on.
_SESSION_CONF = {"spark.sql.python.filterPushdown.enabled": "true"}


def register(spark: "SparkSession") -> None:
    """Register the ``spark-log`` data source on ``spark`` (idempotent).

    Also enables Python data source filter pushdown for the session, which the batch
    reader needs (``spark.sql.python.filterPushdown.enabled``).
    """
    from .source import SparkLogDataSource

    for key, value in _SESSION_CONF.items():
        spark.conf.set(key, value)
    spark.dataSource.register(SparkLogDataSource)


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
) -> "SparkSession":
    """A local SparkSession wired to a spark-log cluster, with ``spark-log`` registered.

    The session binds to 127.0.0.1, has the UI off and few shuffle partitions.  When a
    bootstrap is found it becomes the default of every query (driver and executors);
    without one, queries need the ``bootstrap`` option.  ``conf`` entries win.
    """
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
    if address:
        os.environ["SPARK_LOG_BOOTSTRAP"] = address
        builder = builder.config("spark.executorEnv.SPARK_LOG_BOOTSTRAP", address)
    for key, value in {**_SESSION_CONF, **dict(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
