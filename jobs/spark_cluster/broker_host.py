"""The Spark task that hosts one broker: ``host_broker(spec)``, run on an executor.

The driver submits one single-task job per broker id (``application.py``); the task:

1. takes ``<root>/broker-<id>/host.lock`` (flock, waiting up to ``lock_timeout_s`` for a
   previous host of the same broker, e.g. one whose executor was just lost, to let go).
   The lock's descriptor is inherited by the broker process, so the directory stays
   locked until both the task and its broker are gone;
2. loads ``meta.json`` (the broker's identity: cluster id, broker id, host, port) or, on
   first start, writes it with a port chosen free on this host.  A directory of another
   cluster or another id is refused (``ValueError``), never reused.  A broker the
   controllers already know on another host (``spec.home_host``) is not started empty
   here: the task fails and Spark places it again (a broker does not move hosts);
3. writes ``node.toml`` (``process_roles = ["broker"]``, the controllers as
   ``controller_quorum_voters``) and runs ``python -m brokers.node`` under a
   ``Supervisor``: restarted if it dies, ``SIGTERM``-ed when the task's Python worker
   dies (Spark cancels the job on stop, or the executor is lost);
4. never returns while the application runs: the task *is* the broker's lease on the
   executor.  Spark shows it as a running task of job group ``spark-log-broker-<id>``.

A restarted task (same or other executor on the same host, or the same host after an
executor restart) finds the same directory, so the broker comes back with its id, port
and data and re-registers with the controllers (a new incarnation).

``spec`` is a ``BrokerSpec``: frozen and picklable, built on the driver.
"""
from __future__ import annotations

import fcntl
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from .layout import BrokerMeta, broker_dir, free_port, toml_lines
from .supervisor import Supervisor

__all__ = ["BrokerSpec", "advertised_host", "host_broker"]

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerSpec:
    """What a hosting task needs: identity, where its data lives, where the controllers are."""

    cluster_id: str
    broker_id: int
    data_root: str                       # absolute; a local disk of every executor host
    voters: tuple[str, ...]              # "id@host:port" of the controllers
    driver_host: str = "127.0.0.1"       # used to find this host's outward address
    host: str | None = None              # advertised/bind address; None: see advertised_host()
    port: int = 0                        # 0: chosen free on first start, then kept in meta.json
    config: dict[str, Any] = field(default_factory=dict)  # extra BrokerConfig keys (e.g. timeouts)
    lock_timeout_s: float = 60.0
    home_host: str | None = None         # the host the controllers last saw this broker on


def advertised_host(driver_host: str) -> str:
    """This executor's address as the driver and the other hosts reach it.

    ``SPARK_LOG_BROKER_HOST`` if set, else ``SPARK_LOCAL_IP`` (what Spark itself binds),
    else the local address of a route towards the driver.
    """
    for name in ("SPARK_LOG_BROKER_HOST", "SPARK_LOCAL_IP"):
        if os.environ.get(name):
            return os.environ[name]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((driver_host, 9))  # UDP: no packet is sent
        return str(probe.getsockname()[0])


def _lock(directory: Path, timeout_s: float) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / "host.lock", os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise TimeoutError(f"{directory} is still locked by another host of this broker "
                                   f"after {timeout_s:.0f}s") from None
            time.sleep(0.2)  # polling another process's lock; flock has no timed wait


def _identity(spec: BrokerSpec, directory: Path, host: str) -> BrokerMeta:
    meta = BrokerMeta.load(directory)
    if meta is None and spec.home_host and spec.home_host != host:
        raise RuntimeError(f"broker {spec.broker_id}'s data lives on {spec.home_host}, not on {host}; "
                           f"not starting it empty here (Spark will place the task again)")
    if meta is None:
        meta = BrokerMeta(cluster_id=spec.cluster_id, broker_id=spec.broker_id, host=host,
                          port=spec.port or free_port(host))
        meta.save(directory)
        return meta
    if meta.cluster_id != spec.cluster_id or meta.broker_id != spec.broker_id:
        raise ValueError(f"{directory} belongs to broker {meta.broker_id} of cluster {meta.cluster_id}, "
                         f"not broker {spec.broker_id} of cluster {spec.cluster_id}; refusing to reuse it")
    if meta.host != host:  # same data, new address (e.g. a host that changed IP): keep the port
        meta = BrokerMeta(cluster_id=meta.cluster_id, broker_id=meta.broker_id, host=host, port=meta.port)
        meta.save(directory)
    return meta


def write_node_config(spec: BrokerSpec, directory: Path, meta: BrokerMeta) -> Path:
    values: dict[str, Any] = {
        "broker_id": spec.broker_id,
        "host": meta.host,
        "port": meta.port,
        "data_dir": str(directory),
        "controller_quorum_voters": list(spec.voters),
        "process_roles": ["broker"],
        **spec.config,
    }
    path = directory / "node.toml"
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(toml_lines(values)) + "\n")
    os.replace(tmp, path)
    return path


def host_broker(specs: Iterable[BrokerSpec]) -> Iterator[str]:
    """``mapPartitions`` body: host the broker of each spec (one per task) until killed."""
    for spec in specs:
        directory = broker_dir(Path(spec.data_root), spec.broker_id)
        fd = _lock(directory, spec.lock_timeout_s)
        try:
            meta = _identity(spec, directory, spec.host or advertised_host(spec.driver_host))
            config = write_node_config(spec, directory, meta)
            env = dict(os.environ)
            env.pop("SPARK_LOG_BOOTSTRAP", None)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
            supervisor = Supervisor([sys.executable, "-m", "brokers.node", "--config", str(config)],
                                    log_path=directory / "node.log", env=env, pass_fds=(fd,))
            supervisor.run(threading.Event())  # returns only by raising; Spark kills the task on stop
            yield f"broker {spec.broker_id} stopped"
        finally:
            os.close(fd)
