"""The JVM reader's preferred locations are honoured: on ``local-cluster[2,1,1024]`` every
task of a read runs PROCESS_LOCAL on the executor its partition named first (the executor
paired with the partition leader's broker, ``Scans.Locality``), as Spark's own task list
(a SparkListener in the JVM, ``io.sparklog.spark.TaskLocality``) reports it.

On local-cluster every executor is 127.0.0.1, so the brokers of the embedded cluster are
paired with executors by broker id (``executor_<host>_<id>``; several brokers on one host
each get their own executor).  Adds about 25-40 s (a Spark application with two executor
JVMs, in its own process).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


def test_tasks_run_process_local_on_the_executor_of_their_partitions_leader(
        log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Path) -> None:
    from connectors.session import unregistered_jvm_jar
    from spark_log import Producer

    jar = unregistered_jvm_jar(str(tmp_path))
    if jar is None:
        pytest.skip("the JVM connector jar was not built (make install needs a JDK)")
    topic = topic_name()
    admin.create_topic(topic, partitions=4, replication_factor=1)
    with Producer(log_cluster.bootstrap) as producer:
        for i in range(40):
            producer.send(topic, f"v{i}".encode(), partition=i % 4)
        producer.flush(60)
    leaders = {p: info.leader for p, info in admin.describe_topic(topic, live=False).partitions.items()}
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "tests.spark.locality_job", log_cluster.bootstrap, topic, jar],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=540)
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    print(json.dumps(report, indent=1))  # the task list, shown with -s
    assert report["rows"] == 40
    preferred: dict[str, list[str]] = report["preferred"]
    assert sorted(preferred) == sorted(f"{topic}-{p}" for p in range(4))
    executors = {loc for locations in preferred.values() for loc in locations}
    assert all(loc.startswith("executor_127.0.0.1_") for loc in executors), preferred
    if len({leader % 2 for leader in leaders.values()}) == 2:
        assert len(executors) == 2, f"leaders {leaders} pair with both executors: {preferred}"
    reads = [t for t in report["tasks"] if int(t["stage"]) == min(int(t["stage"]) for t in report["tasks"])]
    assert len(reads) == 4 and all(t["successful"] == "true" for t in reads), report["tasks"]
    for task in reads:  # scan partition i is topic partition i (one range each, in partition order)
        want = preferred[f"{topic}-{task['index']}"][0]
        assert task["locality"] == "PROCESS_LOCAL", task
        assert f"executor_{task['host']}_{task['executor']}" == want, (task, want)
    for p, leader in leaders.items():  # paired by leader broker id: broker b -> executor (b mod 2) of the two
        assert preferred[f"{topic}-{p}"][0].endswith(f"_{leader % 2}"), (p, leader, preferred)
