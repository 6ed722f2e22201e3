# Databricks notebook source
# MAGIC %md
# MAGIC # A tour of spark-log
# MAGIC
# MAGIC spark-log is a streaming log with Kafka's model (topics, partitions, offsets) that stores
# MAGIC **Arrow record batches** and plugs into Spark as the `spark-log` data source.
# MAGIC This notebook walks through the main job's story step by step:
# MAGIC
# MAGIC 1. connect to a cluster and create a typed topic;
# MAGIC 2. write and read it in batch;
# MAGIC 3. stream click events into it and aggregate them in a second stream, with checkpoints;
# MAGIC 4. lose a broker mid-stream and bring it back;
# MAGIC 5. check that every event was counted exactly once.
# MAGIC
# MAGIC On Databricks, attach it to a cluster whose brokers were started by
# MAGIC `conf/databricks/spark-log-init.sh` and set `SPARK_LOG_BOOTSTRAP`.  Run as a plain script
# MAGIC (`python jobs/notebooks/spark_log_tour.py`), it uses the embedded local cluster in
# MAGIC `.spark-log` (started if needed, stopped again at the end).

# COMMAND ----------

# MAGIC %md ## 1. Connect

# COMMAND ----------

import os
import sys
import tempfile
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
from pyspark.sql.streaming.query import StreamingQuery  # noqa: E402

from brokers.launcher.local import LocalCluster  # noqa: E402
from connectors.session import local_session, register  # noqa: E402
from jobs.demo import CLICK_SCHEMA, click_events, stop_between_batches, wait_topic_known, window_counts  # noqa: E402
from spark_log import Admin  # noqa: E402

local = None
started_here = False
bootstrap = os.environ.get("SPARK_LOG_BOOTSTRAP")
if not bootstrap:
    local = LocalCluster(os.environ.get("SPARK_LOG_DATA_DIR") or ".spark-log", brokers=3)
    started_here = not all(alive for *_, alive in local.status())
    bootstrap = local.up(timeout_s=120)

spark: SparkSession  # Databricks defines it; a plain script makes it below
if "spark" in globals():  # Databricks: the notebook's session
    register(spark)  # noqa: F821
else:
    spark = local_session(bootstrap, app_name="spark-log-tour", master="local[2,4]")
    spark.sparkContext.setLogLevel("ERROR")
print("brokers:", bootstrap)

# COMMAND ----------

# MAGIC %md ## 2. A typed topic, written and read in batch
# MAGIC A typed topic has an Arrow schema; Spark writes DataFrames whose columns cast to it.

# COMMAND ----------

admin = Admin(bootstrap)
topic = f"tour-clicks-{uuid.uuid4().hex[:6]}"
admin.create_topic(topic, partitions=4, replication_factor=3, schema=CLICK_SCHEMA)
print(admin.describe_topic(topic))

sample = spark.createDataFrame(
    [(-3, "user-1", "/", "US"), (-2, "user-2", "/cart", "DE"), (-1, "user-1", "/checkout", "US")],
    "event_id long, user_id string, page string, country string",
).selectExpr("*", "current_timestamp() AS event_time")
sample.write.mode("append").format("spark-log").option("bootstrap", bootstrap).option("topic", topic).save()

batch = spark.read.format("spark-log").option("bootstrap", bootstrap).option("subscribe", topic).load()
batch.select("partition", "offset", "event_id", "user_id", "page", "country").orderBy("event_id").show()
assert batch.count() == 3

# COMMAND ----------

# MAGIC %md ## 3. Stream click events in, aggregate them out
# MAGIC The writer turns Spark's rate source into click events; the reader counts clicks per
# MAGIC 10-second window and country.  Both keep their offsets in a checkpoint.

# COMMAND ----------

work = Path(tempfile.mkdtemp(prefix="spark-log-tour-"))
writer = (click_events(spark, rows_per_second=100).writeStream.format("spark-log")
          .option("bootstrap", bootstrap).option("topic", topic)
          .option("checkpointLocation", str(work / "writer")).trigger(processingTime="1 second").start())
events = (spark.readStream.format("spark-log").option("bootstrap", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").load().where("event_id >= 0"))
reader = (window_counts(events).writeStream.outputMode("complete").format("memory").queryName("tour_counts")
          .option("checkpointLocation", str(work / "reader")).trigger(processingTime="1 second").start())


def wait_for_batches(query: StreamingQuery, count: int, timeout_s: float = 180.0) -> None:
    """Until ``query`` has completed ``count`` more micro-batches."""

    def last_batch() -> int:
        progress = query.lastProgress
        return progress.batchId if progress is not None else -1

    first = last_batch()
    deadline = time.monotonic() + timeout_s
    while last_batch() < first + count:
        if query.exception() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{query.name or 'writer'} is not progressing: {query.exception()}")
        time.sleep(0.5)
    progress = query.lastProgress
    assert progress is not None
    print(f"batch {progress.batchId}: {progress.numInputRows} rows, "
          f"{progress.processedRowsPerSecond:.0f} rows/s processed")


wait_for_batches(writer, 3)
wait_for_batches(reader, 1)
spark.sql("SELECT window.start, country, clicks FROM tour_counts ORDER BY start, country").show(8, truncate=False)

# COMMAND ----------

# MAGIC %md ## 4. Lose a broker mid-stream
# MAGIC Every partition has three replicas: when a broker is lost, the controller fences it and
# MAGIC moves leadership to an in-sync replica; the streams retry and carry on, and the broker
# MAGIC rejoins when it is back.  (Locally we kill -9 one of the three brokers ourselves.)

# COMMAND ----------

if local is not None:
    victim = admin.describe_topic(topic).partitions[0].leader
    node = next(n for n in local.nodes if n.node_id == victim)
    print(f"killing broker {victim}")
    local.stop_node(node, kill=True)
    time.sleep(5)             # the outage: leadership moves off the victim, the streams keep flowing
    local.up(timeout_s=90)    # restarts it with the same data and id
    wait_topic_known(local, topic)  # ... and lets it catch up with the metadata log
    print(f"broker {victim} is back")
wait_for_batches(writer, 3)

# COMMAND ----------

# MAGIC %md ## 5. Nothing lost, nothing doubled

# COMMAND ----------

stop_between_batches(writer)
# ids 0..committed-1 come from the committed micro-batches; a stop can also interrupt a batch
# that already wrote its rows (a restart from the checkpoint would replay it, appending nothing twice)
committed = sum({p["batchId"]: p["numInputRows"] for p in writer.recentProgress}.values())
reader.processAllAvailable()
stored = (spark.read.format("spark-log").option("bootstrap", bootstrap).option("subscribe", topic).load()
          .where("event_id >= 0")
          .selectExpr("count(*) AS n", "count(DISTINCT event_id) AS ids",
                      f"count(DISTINCT CASE WHEN event_id < {committed} THEN event_id END) AS committed_ids")
          .collect()[0])
counted = spark.sql("SELECT coalesce(sum(clicks), 0) AS n FROM tour_counts").collect()[0]["n"]
print(f"committed {committed}, stored {stored['n']} ({stored['ids']} distinct, {stored['committed_ids']} committed), "
      f"counted {counted}")
assert stored["committed_ids"] == committed > 0, "a committed event is missing"
assert stored["n"] == stored["ids"] == counted, "an event was doubled or not counted"
written = stored["n"]
print(f"TOUR OK: {counted} clicks counted == {written} events written")

# COMMAND ----------

# MAGIC %md ## Clean up

# COMMAND ----------

# SPARK_LOG_TOUR_KEEP_TOPIC=1 keeps the topic and the local cluster, for whoever wants to read
# the stored events themselves (the project's test does: it takes no notebook's word for it).
keep = os.environ.get("SPARK_LOG_TOUR_KEEP_TOPIC") == "1"
reader.stop()
if keep:
    print(f"kept topic {topic} on {bootstrap}")
else:
    admin.delete_topic(topic)
admin.close()
if "__file__" in globals():
    spark.stop()
if started_here and local is not None and not keep:
    local.down(timeout_s=30)
