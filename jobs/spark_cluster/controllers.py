"""The controller quorum of a Spark-hosted cluster, run by the hosting application's driver.

``DriverControllers(root, count, host)`` keeps ``count`` controller-only nodes
(``process_roles = ["controller"]``, ids ``1001..1000+count``) alive on the driver host,
each under a ``Supervisor`` thread: a controller that dies is restarted with the same
directory and port, and every controller gets ``SIGTERM`` when the driver process exits.
Ports are chosen once and kept in ``controller-<id>/meta.json``, so the voter set
("id@host:port") is the same after an application restart and the metadata log carries
over.  ``voters`` is that set, handed to every broker.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .layout import BrokerMeta, controller_dir, free_port, toml_lines
from .supervisor import ChildFailedError, Supervisor

__all__ = ["CONTROLLER_ID_BASE", "DriverControllers"]

CONTROLLER_ID_BASE = 1000
REPO = Path(__file__).resolve().parents[2]


class DriverControllers:
    """``count`` controller processes on this host (see the module docstring)."""

    def __init__(self, root: Path, *, count: int, host: str, cluster_id: str,
                 config: dict[str, Any] | None = None) -> None:
        if count < 1:
            raise ValueError("the hosting application needs at least one controller")
        self.root = Path(root)
        self.host = host
        self.config = dict(config or {})
        self.ids = [CONTROLLER_ID_BASE + i for i in range(1, count + 1)]
        self.metas: dict[int, BrokerMeta] = {}
        for node_id in self.ids:
            directory = controller_dir(self.root, node_id)
            meta = BrokerMeta.load(directory)
            if meta is None or meta.host != host:
                port = meta.port if meta is not None else free_port(host)
                meta = BrokerMeta(cluster_id=cluster_id, broker_id=node_id, host=host, port=port)
                meta.save(directory)
            if meta.cluster_id != cluster_id:
                raise ValueError(f"{directory} belongs to cluster {meta.cluster_id}, not {cluster_id}")
            self.metas[node_id] = meta
        self.voters = tuple(f"{i}@{m.host}:{m.port}" for i, m in self.metas.items())
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.failures: dict[int, str] = {}

    def _config_file(self, node_id: int) -> Path:
        directory = controller_dir(self.root, node_id)
        meta = self.metas[node_id]
        values: dict[str, Any] = {
            "broker_id": node_id,
            "host": meta.host,
            "port": meta.port,
            "data_dir": str(directory),
            "controller_quorum_voters": list(self.voters),
            "process_roles": ["controller"],
            **self.config,
        }
        path = directory / "node.toml"
        path.write_text("\n".join(toml_lines(values)) + "\n")
        return path

    def start(self) -> None:
        env = dict(os.environ)
        env.pop("SPARK_LOG_BOOTSTRAP", None)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        for node_id in self.ids:
            supervisor = Supervisor([sys.executable, "-m", "brokers.node", "--config", str(self._config_file(node_id))],
                                    log_path=controller_dir(self.root, node_id) / "node.log", env=env)
            thread = threading.Thread(target=self._keep, args=(node_id, supervisor),
                                      name=f"controller-{node_id}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _keep(self, node_id: int, supervisor: Supervisor) -> None:
        try:
            supervisor.run(self._stop)
        except ChildFailedError as exc:
            self.failures[node_id] = str(exc)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM every controller and wait for them, ``timeout_s`` in all (each supervisor
        SIGKILLs its child after its own ``stop_timeout_s``)."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
