# Databricks notebook source
# MAGIC %md
# MAGIC # Compacting a topic with Spark
# MAGIC
# MAGIC A topic with `cleanup.policy=compact` keeps, for every key, its latest record (a
# MAGIC changelog); a null value (a typed topic: its `tombstone.column`) deletes the key once
# MAGIC older than `delete.retention.ms`.  The brokers' cleaner does this by itself; for big
# MAGIC topics this notebook runs the Spark job instead (`jobs/compact.py`, also
# MAGIC `python -m jobs.compact --topic T [--dry-run]`): Spark reads the dirty range, decides
# MAGIC which record of each key survives, and the brokers rewrite their segments accordingly.
# MAGIC
# MAGIC Run as a plain script (`python jobs/notebooks/spark_log_compaction.py`) it uses the
# MAGIC embedded local cluster in `.spark-log` (started if needed, stopped again at the end).

# COMMAND ----------

import os
import sys
import uuid
from pathlib import Path

if "__file__" in globals():  # a plain script: make the repo importable here and in Spark's Python workers
    _repo = str(Path(__file__).resolve().parents[2])
    sys.path.insert(0, _repo)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_repo, os.environ.get("PYTHONPATH", "")) if p)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402

from brokers.launcher.local import LocalCluster  # noqa: E402
from connectors.session import local_session, register  # noqa: E402
from jobs.compact import compact_topic  # noqa: E402
from spark_log import Admin, Producer  # noqa: E402

local = None
started_here = False
bootstrap = os.environ.get("SPARK_LOG_BOOTSTRAP")
if not bootstrap:
    local = LocalCluster(os.environ.get("SPARK_LOG_DATA_DIR") or ".spark-log", brokers=3)
    started_here = not all(alive for *_, alive in local.status())
    bootstrap = local.up(timeout_s=120)

spark: SparkSession  # Databricks defines it; a plain script makes it below
made_session = "spark" not in globals()
if not made_session:  # Databricks (or a caller): the notebook's session
    register(spark)  # noqa: F821
else:
    spark = local_session(bootstrap, app_name="spark-log-compaction", master="local[2]")
admin = Admin(bootstrap)

# COMMAND ----------

# MAGIC %md ## A changelog topic
# MAGIC 5,000 updates of 100 accounts' balances; every 97th update closes the account (a
# MAGIC tombstone).  `min.cleanable.dirty.ratio=1.0` leaves the cleaning to us.

# COMMAND ----------

topic = f"balances-{uuid.uuid4().hex[:8]}"
admin.create_topic(topic, partitions=2, replication_factor=3,
                   config={"cleanup.policy": "compact", "segment.bytes": 16384, "delete.retention.ms": 0,
                           "min.cleanable.dirty.ratio": 1.0})
with Producer(bootstrap) as producer:
    for i in range(5000):
        balance = None if i % 97 == 0 else f"{(i * 7919) % 10_000}.00".encode()
        producer.send(topic, balance, key=f"account-{i % 100}".encode())
    producer.flush()
    producer.send(topic, b"0.00", key=b"account-new").result()  # closes the segments written above

# COMMAND ----------

# MAGIC %md ## Dry run: what would survive

# COMMAND ----------

dry = compact_topic(spark, topic, bootstrap=bootstrap, dry_run=True)
print(f"a clean would keep {dry.records_after} of {dry.records_before} records ({dry.bytes_before} bytes stored)")

# COMMAND ----------

# MAGIC %md ## Compact with Spark
# MAGIC Every replica rewrites its segments with the job's offset map; offsets never change,
# MAGIC and readers cross the gaps (`failOnDataLoss` is about retention, not compaction).

# COMMAND ----------

report = compact_topic(spark, topic, bootstrap=bootstrap)
for part in report.partitions:
    print(f"partition {part.partition}: records {part.records_before} -> {part.records_after}, "
          f"bytes {part.bytes_before} -> {part.bytes_after}")
latest = spark.read.format("spark-log").option("bootstrap", bootstrap).option("subscribe", topic).load()
latest.selectExpr("CAST(key AS STRING) AS account", "CAST(value AS STRING) AS balance", "partition", "offset").show(5)
assert report.records_after < report.records_before / 10 and report.bytes_after < report.bytes_before
print(f"COMPACTION NOTEBOOK OK: {report.records_before} -> {report.records_after} records, "
      f"{report.bytes_before} -> {report.bytes_after} bytes")

# COMMAND ----------

# MAGIC %md ## Clean up

# COMMAND ----------

admin.delete_topic(topic)
admin.close()
if made_session and "__file__" in globals():
    spark.stop()
if started_here and local is not None:
    local.down(timeout_s=30)
