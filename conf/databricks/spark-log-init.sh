#!/bin/bash
# Databricks cluster-scoped init script: host spark-log brokers on the cluster's workers.
#
# An example to adapt (it has not been run on Databricks from this repository's CI).
# Cluster configuration:
#   - Init scripts: this file (workspace file or volume), cluster-scoped.
#   - Environment variables:
#       SPARK_LOG_WHEEL=/Volumes/<catalog>/<schema>/<volume>/spark_log-0.1.0-py3-none-any.whl
#       SPARK_LOG_BROKERS=<number of workers>          (one broker per worker host)
#       SPARK_LOG_DATA_DIR=/local_disk0/spark-log      (local NVMe; identity and data live here)
#   - Fixed size (no autoscaling): a broker belongs to its host.
#
# What it does, on every node: installs spark-log into the Python Spark's executors use
# and creates the data directory.  On the driver only: starts, in the background, a
# watcher that waits for the cluster's Spark master (spark://$DB_DRIVER_IP:7077), then runs
#   python -m jobs.spark_cluster start --master spark://$DB_DRIVER_IP:7077 --brokers N ...
# which starts the hosting application (3 controllers on the driver, one broker task per
# executor with spark.task.cpus = the executor's cores) and writes the bootstrap to
# $SPARK_LOG_DATA_DIR/bootstrap on the driver.  Notebooks then connect with
#   os.environ["SPARK_LOG_BOOTSTRAP"] = open("/local_disk0/spark-log/bootstrap").read().strip()
#
# Without init scripts (or where a second application on the cluster's master is not
# allowed), run the hosting loop inside the cluster's own application from a job pinned
# to the cluster instead:
#   from jobs.spark_cluster.application import HostingConfig, run_application
#   run_application(HostingConfig(master=spark.sparkContext.master, brokers=N,
#                                 data_dir="/local_disk0/spark-log",
#                                 driver_host=spark.conf.get("spark.driver.host")), spark=spark)
set -euo pipefail

PY=/databricks/python3/bin/python
DATA_DIR="${SPARK_LOG_DATA_DIR:-/local_disk0/spark-log}"
BROKERS="${SPARK_LOG_BROKERS:-3}"

"$PY" -m pip install --quiet "${SPARK_LOG_WHEEL:?set SPARK_LOG_WHEEL to the spark-log wheel}"
mkdir -p "$DATA_DIR"

if [[ "${DB_IS_DRIVER:-}" != "TRUE" ]]; then
  exit 0
fi

CORES=$(nproc)   # workers have the driver's instance type unless configured otherwise
cat > /tmp/spark-log-host.sh <<SCRIPT
#!/bin/bash
# Wait for the cluster's Spark master, then start the hosting application.
for _ in \$(seq 1 600); do
  (exec 3<>/dev/tcp/${DB_DRIVER_IP}/7077) 2>/dev/null && break
  sleep 2
done
export PYSPARK_PYTHON=$PY
exec $PY -m jobs.spark_cluster start --master "spark://${DB_DRIVER_IP}:7077" --brokers $BROKERS \
  --data-dir "$DATA_DIR" --driver-host "${DB_DRIVER_IP}" --controllers 3 \
  --conf spark.task.cpus=$CORES --conf spark.executor.cores=$CORES \
  --conf spark.cores.max=$((CORES * BROKERS)) --timeout 900
SCRIPT
chmod +x /tmp/spark-log-host.sh
nohup /tmp/spark-log-host.sh > "$DATA_DIR/init-start.log" 2>&1 &
