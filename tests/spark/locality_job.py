"""Task locality of the JVM reader on ``local-cluster[2,1,1024]`` (its own process: one
SparkContext a process).

    python -m tests.spark.locality_job BOOTSTRAP TOPIC JAR

Reads TOPIC through the JVM implementation (class name; JAR is its jar without the
DataSourceRegister) with ``io.sparklog.spark.TaskLocality`` listening, and prints one JSON
object: ``preferred`` (each topic-partition's preferred locations as the scan planned
them), ``tasks`` (every task of the read: stage, index, executor, host, Spark's task
locality, success) and ``rows`` (rows read).

``spark.locality.wait`` is 10 minutes, longer than the test lets this job run: a task whose
preferred executor is busy waits for it, never runs at a lower locality level elsewhere.
Each executor has one core and three of the four partitions may prefer the same one, so
tasks queue behind each other; with a wait of 10 s, an executor's first task (a new JVM
loading the connector) outlasted it on a loaded machine, and the queued tasks ran
NODE_LOCAL on the other executor (CI run q-1, and twice in two runs beside 6 busy loops).
"""
from __future__ import annotations

import json
import sys
from typing import Any

from tests.support.wait import wait_until


MASTER = "local-cluster[2,1,1024]"


def main(bootstrap: str, topic: str, jar: str) -> None:
    from pyspark.sql import SparkSession

    from connectors.class_archive import java_options_conf
    from connectors.worker_python import adopt

    spark = (SparkSession.builder.master(MASTER).appName("spark-log-locality")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.executor.memory", "512m").config("spark.jars", jar)
             .config("spark.locality.wait", "10min")
             .config(map=java_options_conf(MASTER))
             .getOrCreate())
    adopt(spark)
    try:
        sc = spark.sparkContext
        sc.setLogLevel("ERROR")
        jvm: Any = spark._jvm
        wait_until(lambda: sc._jsc.sc().getExecutorMemoryStatus().size() >= 3, timeout=120, interval=0.2,
                   message="the two executors of local-cluster[2,1,1024] registered")  # driver + 2
        listener = jvm.io.sparklog.spark.TaskLocality()
        sc._jsc.sc().addSparkListener(listener)
        rows = (spark.read.format("io.sparklog.spark.SparkLogProvider").option("bootstrap", bootstrap)
                .option("subscribe", topic).load().count())
        # every task end was posted before count() returned; this waits until the listener got them
        sc._jsc.sc().listenerBus().waitUntilEmpty()
        preferred = {}
        for line in jvm.io.sparklog.spark.TaskLocality.preferred().splitlines():
            name, _, locations = line.partition(" ")
            preferred[name] = locations.split(",")
        tasks = [dict(zip(("stage", "index", "executor", "host", "locality", "successful"), line.split(" ")))
                 for line in listener.report().splitlines()]
        print(json.dumps({"preferred": preferred, "tasks": tasks, "rows": rows}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
