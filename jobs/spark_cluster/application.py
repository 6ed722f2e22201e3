"""The long-running Spark application that hosts a spark-log cluster: ``run_application``.

Shape (the driver of this application is the cluster's anchor):

- the controllers run on the driver host as child processes of the driver
  (``DriverControllers``), unless ``controller_quorum`` names an existing voter set;
- one Spark job per broker id ``1..brokers``, each a single task running
  ``broker_host.host_broker`` (the broker process is that task's child), submitted from a
  driver thread in job group ``spark-log-broker-<id>``.  When the job ends for any reason
  but a stop (executor lost and Spark's task retries used up, broker kept crashing), the
  thread submits it again after a back-off: Spark places it on a live executor and the
  broker comes back with the same id and directory;
- the main thread watches the cluster through the controllers every
  ``health_interval_s``: ``cluster.json`` goes to ``ready`` once every broker is
  registered and unfenced, and ``bootstrap`` lists the live brokers;
- on ``stop`` (SIGTERM to the driver, or the event passed in) it cancels the job groups
  (Spark kills the tasks, whose brokers get SIGTERM), stops the controllers and the
  SparkSession, and marks ``cluster.json`` ``stopped``, within ``stop_timeout_s`` in all
  (every join and wait gets what is left of it; a ``SparkSession.stop`` that hangs is
  left behind).

One job per broker rather than one barrier stage: a barrier stage restarts *all* its
tasks when one fails, so losing one executor would bounce every broker; here a lost
executor costs only the brokers it hosted.  The price is that Spark does not promise one
task per host; a dedicated hosting application gets that by running with
``spark.task.cpus`` equal to ``spark.executor.cores`` (one task slot per executor) and
one executor per worker host, which is Databricks' layout.
"""
from __future__ import annotations

import fcntl
import logging
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brokers.controller.client import ControllerClient
from spark_log.errors import SparkLogError

from .broker_host import BrokerSpec, host_broker
from .controllers import DriverControllers
from .layout import BOOTSTRAP_FILE, ClusterState, broker_dir

__all__ = ["HostingConfig", "live_brokers", "run_application", "wait_brokers_gone"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class HostingConfig:
    """What to host where.  ``data_dir`` must be absolute: it is used on every host."""

    master: str
    brokers: int
    data_dir: str
    controllers: int = 3                        # controller processes on the driver host
    controller_quorum: tuple[str, ...] = ()     # or an existing voter set ("id@host:port"); then none run here
    driver_host: str = "127.0.0.1"
    app_name: str = "spark-log-brokers"
    broker_config: dict[str, Any] = field(default_factory=dict)      # extra BrokerConfig keys for brokers
    controller_config: dict[str, Any] = field(default_factory=dict)  # ... and for controllers
    spark_conf: dict[str, str] = field(default_factory=dict)
    health_interval_s: float = 1.0
    resubmit_backoff_s: float = 2.0
    stop_timeout_s: float = 60.0                # the whole stop: brokers, controllers, Spark

    def __post_init__(self) -> None:
        if self.brokers < 1:
            raise ValueError("brokers: must be >= 1")
        if not os.path.isabs(self.data_dir):
            raise ValueError(f"data_dir: must be absolute (used on every executor host), got {self.data_dir!r}")
        if not self.controller_quorum and self.controllers < 1:
            raise ValueError("controllers: must be >= 1 unless controller_quorum is given")


def _bounded_call(call: Any, timeout_s: float, what: str) -> None:
    """Run ``call`` on a daemon thread and wait at most ``timeout_s`` for it (a stop that
    hangs must not hold the application's stop past its bound)."""
    thread = threading.Thread(target=call, name=what, daemon=True)
    thread.start()
    thread.join(timeout=timeout_s)
    if thread.is_alive():
        log.warning("%s did not return within %.1fs; going on", what, timeout_s)


def wait_brokers_gone(root: Path, brokers: int, timeout_s: float = 30.0) -> bool:
    """Wait until no process holds a ``broker-<id>/host.lock`` on this host (a broker's
    clean stop after its task was killed).  Directories not on this host count as gone."""
    deadline = time.monotonic() + timeout_s
    for broker_id in range(1, brokers + 1):
        path = broker_dir(root, broker_id) / "host.lock"
        if not path.exists():
            continue
        fd = os.open(path, os.O_RDWR)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        return False
                    time.sleep(0.1)  # polling another process's lock
        finally:
            os.close(fd)
    return True


def live_brokers(client: ControllerClient) -> dict[int, tuple[str, bool]]:
    """``{broker_id: (address, fenced)}`` as the controllers see it."""
    image = client.describe_image()
    return {b.broker_id: (b.address, b.fenced) for b in image.brokers.values()}


def _reason(exc: BaseException) -> str:
    """The most telling line of a Spark job failure (the Python error, if there is one)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[\w.]+(Error|Exception|Exit)\b", line)]
    return (errors or lines or [type(exc).__name__])[-1][:300]


class _Hosting:
    def __init__(self, config: HostingConfig, stop: threading.Event) -> None:
        self.config = config
        self.root = Path(config.data_dir)
        self.stop = stop
        self.state = ClusterState.load(self.root) or ClusterState(cluster_id=uuid.uuid4().hex, brokers=config.brokers)
        self.state.brokers = config.brokers
        self.state.master = config.master
        self.controllers: DriverControllers | None = None
        self.voters: tuple[str, ...] = tuple(config.controller_quorum)
        if not self.voters:
            self.controllers = DriverControllers(self.root, count=config.controllers, host=config.driver_host,
                                                 cluster_id=self.state.cluster_id, config=config.controller_config)
            self.voters = self.controllers.voters
        self.threads: list[threading.Thread] = []
        self.submissions: dict[int, int] = {}
        self.known: dict[int, str] = {}  # broker id -> address, as the controllers last saw it

    def spec(self, broker_id: int) -> BrokerSpec:
        known = self.known.get(broker_id)
        return BrokerSpec(cluster_id=self.state.cluster_id, broker_id=broker_id, data_root=str(self.root),
                          voters=self.voters, driver_host=self.config.driver_host,
                          config=dict(self.config.broker_config),
                          home_host=known.rpartition(":")[0] if known else None)

    def host_loop(self, spark: Any, broker_id: int) -> None:
        sc = spark.sparkContext
        group = f"spark-log-broker-{broker_id}"
        backoff = self.config.resubmit_backoff_s
        while not self.stop.is_set():
            self.submissions[broker_id] = self.submissions.get(broker_id, 0) + 1
            sc.setJobGroup(group, f"spark-log broker {broker_id}", interruptOnCancel=True)
            started = time.monotonic()
            try:
                sc.parallelize([self.spec(broker_id)], 1).mapPartitions(host_broker).collect()
            except Exception as exc:  # noqa: BLE001 - any job failure: resubmit unless stopping
                if self.stop.is_set():
                    break
                log.warning("broker %d's hosting job ended (%s); resubmitting in %.1fs", broker_id, _reason(exc), backoff)
            if time.monotonic() - started > 60:  # it ran a while: a fresh failure, not a crash loop
                backoff = self.config.resubmit_backoff_s
            self.stop.wait(backoff)  # back-off, not synchronisation
            backoff = min(backoff * 2, 30.0)

    def watch(self, client: ControllerClient) -> None:
        wanted = set(range(1, self.config.brokers + 1))
        last_bootstrap = ""
        while not self.stop.wait(self.config.health_interval_s):
            try:
                brokers = live_brokers(client)
            except (SparkLogError, OSError) as exc:
                log.info("controllers not answering yet: %s", exc)
                continue
            self.known.update({b: address for b, (address, _) in brokers.items()})
            live = sorted(b for b, (_, fenced) in brokers.items() if not fenced and b in wanted)
            bootstrap = ",".join(brokers[b][0] for b in live)
            if bootstrap and bootstrap != last_bootstrap:
                tmp = self.root / (BOOTSTRAP_FILE + ".tmp")
                tmp.write_text(bootstrap + "\n")
                os.replace(tmp, self.root / BOOTSTRAP_FILE)
                last_bootstrap = bootstrap
            state = "ready" if set(live) == wanted else "starting"
            if state != self.state.state:
                log.info("cluster %s: live brokers %s", state, live)
                self.state.state = state
                self.state.save(self.root)


def run_application(config: HostingConfig, *, stop: threading.Event | None = None, spark: Any = None) -> int:
    """Host the cluster until ``stop`` is set (or SIGTERM when run by ``__main__``); exit code.

    ``spark``: an existing SparkSession to host in (e.g. a Databricks job's); by default a
    new one is built for ``config.master`` and stopped at the end.
    """
    stop = stop or threading.Event()
    hosting = _Hosting(config, stop)
    root = hosting.root
    root.mkdir(parents=True, exist_ok=True)
    hosting.state.voters = list(hosting.voters)
    hosting.state.app_pid = os.getpid()
    hosting.state.state = "starting"
    hosting.state.error = ""
    hosting.state.save(root)
    (root / BOOTSTRAP_FILE).unlink(missing_ok=True)
    owns_spark = spark is None
    client = ControllerClient([v.partition("@")[2] for v in hosting.voters], timeout_s=5.0, rpc_timeout_s=2.0)
    try:
        if hosting.controllers is not None:
            hosting.controllers.start()
        if spark is None:
            from pyspark.sql import SparkSession

            from connectors.class_archive import java_options_conf
            from connectors.worker_python import adopt

            builder = SparkSession.builder.master(config.master).appName(config.app_name)
            settings = {"spark.ui.showConsoleProgress": "false", **config.spark_conf}
            settings.update(java_options_conf(config.master, settings))
            for key, value in settings.items():
                builder = builder.config(key, value)
            spark = builder.getOrCreate()
            adopt(spark)
        hosting.state.spark_app_id = spark.sparkContext.applicationId
        hosting.state.save(root)
        for broker_id in range(1, config.brokers + 1):
            thread = threading.Thread(target=hosting.host_loop, args=(spark, broker_id),
                                      name=f"host-broker-{broker_id}", daemon=True)
            thread.start()
            hosting.threads.append(thread)
        hosting.watch(client)
        return 0
    except Exception as exc:
        hosting.state.error = f"{type(exc).__name__}: {exc}"
        log.exception("hosting application failed")
        return 1
    finally:
        stop.set()
        deadline = time.monotonic() + config.stop_timeout_s

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        hosting.state.state = "stopping"
        hosting.state.save(root)
        if spark is not None:
            for broker_id in range(1, config.brokers + 1):
                spark.sparkContext.cancelJobGroup(f"spark-log-broker-{broker_id}")
        for thread in hosting.threads:
            thread.join(timeout=left())
        wait_brokers_gone(root, config.brokers, timeout_s=left())
        if hosting.controllers is not None:
            hosting.controllers.stop(timeout_s=left())
        client.close()
        if owns_spark and spark is not None:
            _bounded_call(spark.stop, left(), "SparkSession.stop")
        hosting.state.state = "stopped"
        hosting.state.app_pid = 0
        hosting.state.save(root)
        (root / BOOTSTRAP_FILE).unlink(missing_ok=True)
