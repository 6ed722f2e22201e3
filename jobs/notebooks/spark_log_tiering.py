# Databricks notebook source
# MAGIC %md
# MAGIC # Tiering a topic to Delta, and reading it whole
# MAGIC
# MAGIC A topic with `remote.storage.enable=true` is copied, closed segment by closed segment,
# MAGIC into a Delta table (`jobs/tier.py`, also `python -m jobs.tier --once|--continuous`); the
# MAGIC brokers then keep only `local.retention.*` locally.  Readers (the Consumer, the
# MAGIC `spark-log` source) read below the brokers' log start from the table.
# MAGIC
# MAGIC Run as a plain script (`python jobs/notebooks/spark_log_tiering.py`) it uses the embedded
# MAGIC local cluster in `.spark-log` (started if needed, stopped again at the end).

# COMMAND ----------

import os
import sys
import time
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
from jobs.tier import spark_reader, tier_topic  # noqa: E402
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
if not made_session:
    register(spark)  # noqa: F821
else:
    spark = local_session(bootstrap, app_name="spark-log-tiering", master="local[2]")
admin = Admin(bootstrap)

# COMMAND ----------

# MAGIC %md ## A tiered topic: small segments, nothing kept locally once tiered

# COMMAND ----------

topic = f"clicks-{uuid.uuid4().hex[:8]}"
admin.create_topic(topic, partitions=2, replication_factor=3,
                   config={"remote.storage.enable": "true", "segment.bytes": 16384, "local.retention.ms": 0})
with Producer(bootstrap, batch_size=4096) as producer:
    for i in range(3000):
        producer.send(topic, f"click-{i}".encode(), key=f"user-{i % 50}".encode())
    producer.flush()

# COMMAND ----------

# MAGIC %md ## Tier it (the spark-log source reads, deltalake writes one Delta commit)

# COMMAND ----------

result = tier_topic(admin, topic, reader=spark_reader(spark, bootstrap))
print(f"tiered {result.rows} rows: {result.tiered} (Delta version {result.delta_version})")
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not all(
        i.log_start_offset > 0 for i in admin.describe_tier(topic).partitions.values()):
    time.sleep(0.5)  # the brokers' maintenance deletes the tiered segments locally (every 5 s)

# COMMAND ----------

# MAGIC %md ## Read it whole: the Delta tier below the brokers' log start, then the brokers

# COMMAND ----------

location = admin.describe_tier(topic).location
everything = (spark.read.format("spark-log").option("bootstrap", bootstrap).option("subscribe", topic)
              .option("startingOffsets", "earliest").load())
print(f"{everything.count()} records from offset 0; the brokers start at "
      f"{ {p: i.log_start_offset for (_, p), i in admin.describe_tier(topic).partitions.items()} }")
from deltalake import DeltaTable  # noqa: E402

history = DeltaTable(os.path.join(location, topic))
print(f"the Delta table: {history.to_pyarrow_table().num_rows} rows, version {history.version()}")
assert everything.count() == 3000
print("TIERING NOTEBOOK OK")

# COMMAND ----------

admin.delete_topic(topic)
admin.close()
if made_session and "__file__" in globals():
    spark.stop()
if started_here and local is not None:
    local.down(timeout_s=30)
