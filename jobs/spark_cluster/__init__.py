"""spark-log brokers hosted on a Spark cluster by a long-running Spark application.

    python -m jobs.spark_cluster start --master spark://HOST:7077 --brokers 3 --data-dir /local_disk0/spark-log
    python -m jobs.spark_cluster status --data-dir /local_disk0/spark-log
    python -m jobs.spark_cluster stop   --data-dir /local_disk0/spark-log

How it works (one concept per module):

- ``application.py``: the hosting application.  One single-task Spark job per broker id
  ``1..N``; the task (``broker_host.py``) runs ``python -m brokers.node`` as its child
  and never returns, so the broker lives exactly as long as its task.  A job that ends
  (executor lost, broker crash-looping) is resubmitted and lands on a live executor.
- ``broker_host.py``: the task.  The broker's id, host and port are stored in
  ``<data-dir>/broker-<id>/meta.json`` on first start; every restart on that host reuses
  them, so the broker comes back with its data at the same address and re-registers
  with the controllers as a new incarnation (its old registration is replaced).
- ``controllers.py``: the controller quorum; ``supervisor.py``: keeping a child alive and
  tied to its parent (``PR_SET_PDEATHSIG``); ``layout.py``: files; ``control.py``:
  start/stop/status from the driver host.

Controllers: the driver hosts them.  The hosting application's driver runs ``K``
controller-only processes (``--controllers K``, default 3, ids 1001..1000+K) on its
own host; brokers are broker-only nodes.  Why not "the first brokers are also voters": a
voter's address must be fixed before the quorum forms, executors come and go, and losing
an executor would then also cost a voter.  The driver is already the application's single
point of failure (if it dies, Spark ends every task and so every broker), so putting the
quorum there adds no new one; ``K = 3`` still rides out one controller process crashing
(the driver restarts it with the same directory and port).  For a quorum that survives
the driver, run controllers elsewhere (``python -m brokers.node`` with
``process_roles = ["controller"]`` on three stable hosts) and pass them as
``--controller-quorum 1001@h1:9093,1002@h2:9093,1003@h3:9093``: then no controller runs
on the driver.

Running it on a real multi-node cluster (operator's guide):

1. Install the project on every node (driver and workers) in the Python that Spark's
   executors use (``PYSPARK_PYTHON``): ``pip install spark-log`` or the repo's wheel.
2. Pick a data directory on each worker's local disk, the same path everywhere
   (``/local_disk0/spark-log`` on Databricks, ``/mnt/spark-log`` elsewhere), writable by
   the executor user.  Identity lives there: keep it across cluster restarts.
3. Give the hosting application one task slot per executor and one executor per
   worker host: ``--conf spark.task.cpus=<executor cores>`` (a dedicated application;
   Spark does not otherwise promise one broker per host), and enough executors:
   ``--brokers N`` with ``N`` = number of workers.
4. ``python -m jobs.spark_cluster start --master spark://<master>:7077 --brokers N
   --data-dir /local_disk0/spark-log`` on the driver host; it prints the bootstrap and
   writes it to ``<data-dir>/bootstrap``.  Clients use it via ``SPARK_LOG_BOOTSTRAP``
   (or the connector's ``bootstrap`` option).
5. Databricks: ``conf/databricks/spark-log-init.sh`` (a cluster-scoped init script) does
   1-4 when the cluster starts.  Without init scripts, run ``run_application`` from a
   notebook job pinned to the cluster (see the script's header).

Limits: a broker does not move hosts.  Once the controllers have seen broker ``b`` on host
``H``, a task for ``b`` placed on another host without ``b``'s directory fails (Spark
places it again) instead of starting an empty broker under the same id; with
replication factor 1 its partitions are unavailable until ``H`` hosts it again.  On
``local-cluster`` masters every executor shares 127.0.0.1 and one disk, so a lost
executor's broker restarts at once on any live executor, with its data.
"""

__all__: list[str] = []
