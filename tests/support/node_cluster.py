"""Real ``python -m brokers.node`` processes on 127.0.0.1, for integration/fault tests and bench.

    with NodeCluster(tmp_path, size=3) as cluster:
        cluster.start_all()
        leader = cluster.wait_for_active_controller()
        cluster.kill(leader)                      # kill -9
        cluster.start(leader)                     # same data dir and port

Every node is a controller voter (``roles``, default broker+controller) with a fast Raft
(``tick_ms`` x ``election_ticks``).  Logs go to ``<root>/node<i>.log``.  ``close()`` (and
the context manager) kill -9 every process still running; nothing outlives the test.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, Sequence

from brokers.controller.client import ControllerClient
from brokers.metadata.image import MetadataImage
from spark_log.errors import SparkLogError
from tests.support.ports import free_ports
from tests.support.wait import wait_until

__all__ = ["NodeCluster"]

REPO = Path(__file__).resolve().parents[2]
# a liveness deadline for a node to bind its port: ~3 s on a quiet machine, past 30 s at a
# load average of 26 on 2 cores (three interpreters importing grpc and pyarrow at once)
START_TIMEOUT_S = 120


class NodeCluster:
    def __init__(
        self,
        root: Path,
        *,
        size: int = 3,
        roles: Sequence[str] = ("broker", "controller"),
        tick_ms: int = 20,
        election_ticks: int = 10,
        heartbeat_interval_ms: int = 100,
        session_timeout_ms: int = 1500,
        snapshot_every_entries: int = 10_000,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.ids = list(range(1, size + 1))
        self.ports = dict(zip(self.ids, free_ports(size)))
        self.addresses = {i: f"127.0.0.1:{p}" for i, p in self.ports.items()}
        self.election_timeout_ms = tick_ms * election_ticks
        self.session_timeout_ms = session_timeout_ms
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self._timing = (tick_ms, election_ticks, heartbeat_interval_ms, session_timeout_ms, snapshot_every_entries)
        self.client = ControllerClient(list(self.addresses.values()), timeout_s=15.0, rpc_timeout_s=2.0)
        for i in self.ids:
            self._write_config(i, roles, port=self.ports[i])

    def _write_config(self, i: int, roles: Sequence[str], *, port: int) -> None:
        tick_ms, election_ticks, heartbeat_interval_ms, session_timeout_ms, snapshot_every = self._timing
        voters = ", ".join(f'"{v}@{a}"' for v, a in sorted(self.addresses.items()) if v in self.ids)
        role_list = ", ".join(f'"{r}"' for r in roles)
        self.config_path(i).write_text(
            f"broker_id = {i}\n"
            f"port = {port}\n"
            f'data_dir = "{self.data_dir(i)}"\n'
            f"controller_quorum_voters = [{voters}]\n"
            f"process_roles = [{role_list}]\n"
            f"heartbeat_interval_ms = {heartbeat_interval_ms}\n"
            f"session_timeout_ms = {session_timeout_ms}\n"
            "num_io_threads = 4\n"
            "[raft]\n"
            f"tick_ms = {tick_ms}\n"
            f"election_ticks = {election_ticks}\n"
            "fetch_wait_ticks = 2\n"  # the leader answers an idle fetch after 2 ticks, as followers fetch
            f"snapshot_every_entries = {snapshot_every}\n"
        )

    def add_observer(self, i: int) -> None:
        """Configure node ``i`` (not a voter) as a broker-only observer; ``start(i)`` runs it."""
        assert i not in self.ids, "observers need ids outside the voters"
        (port,) = free_ports(1)
        self.ports[i] = port
        self.addresses[i] = f"127.0.0.1:{port}"
        self._write_config(i, ("broker",), port=port)

    def config_path(self, i: int) -> Path:
        return self.root / f"node{i}.toml"

    def data_dir(self, i: int) -> Path:
        return self.root / f"node{i}"

    # --- processes ---------------------------------------------------------------------

    def start(self, i: int, *, wait: bool = True) -> None:
        port_file = self.data_dir(i) / "broker.port"
        port_file.unlink(missing_ok=True)
        env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOG_LEVEL=os.environ.get("SPARK_LOG_LEVEL", "INFO"))
        with open(self.root / f"node{i}.log", "ab") as log:
            self.procs[i] = subprocess.Popen(
                [sys.executable, "-m", "brokers.node", "--config", str(self.config_path(i))],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if wait:
            wait_until(
                lambda: port_file.exists() or self._died(i),
                timeout=START_TIMEOUT_S,
                message=lambda: f"node {i} did not start; log:\n{self.log_tail(i)}",
            )
            assert not self._died(i), f"node {i} exited at start; log:\n{self.log_tail(i)}"

    def start_all(self) -> None:
        for i in self.ids:
            self.start(i, wait=False)
        for i in self.ids:
            port_file = self.data_dir(i) / "broker.port"
            wait_until(
                lambda: port_file.exists() or self._died(i),
                timeout=START_TIMEOUT_S,
                message=lambda: f"node {i} did not start; log:\n{self.log_tail(i)}",
            )
            assert not self._died(i), f"node {i} exited at start; log:\n{self.log_tail(i)}"

    def _died(self, i: int) -> bool:
        proc = self.procs.get(i)
        return proc is not None and proc.poll() is not None

    def wipe(self, i: int) -> None:
        """Delete node ``i``'s data directory (it must not be running)."""
        assert i not in self.alive(), f"node {i} is running"
        shutil.rmtree(self.data_dir(i), ignore_errors=True)

    def kill(self, i: int) -> None:
        """kill -9 node ``i`` and reap it."""
        proc = self.procs.pop(i)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def terminate(self, i: int, *, timeout_s: float = 15.0) -> int:
        """SIGTERM node ``i``; returns its exit code."""
        proc = self.procs.pop(i)
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            raise

    def alive(self) -> list[int]:
        return sorted(i for i, p in self.procs.items() if p.poll() is None)

    def close(self) -> None:
        for i in list(self.procs):
            proc = self.procs.pop(i)
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        self.client.close()

    def __enter__(self) -> "NodeCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def log_tail(self, i: int, lines: int = 30) -> str:
        path = self.root / f"node{i}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    # --- views -------------------------------------------------------------------------

    def active_controller(self, among: Sequence[int] | None = None) -> int | None:
        """The node that reports itself the active controller (None if none does)."""
        for i in among if among is not None else self.alive():
            try:
                if self.client.describe_cluster(self.addresses[i]).is_active:
                    return i
            except SparkLogError:
                continue
        return None

    def wait_for_active_controller(self, *, timeout: float = 30.0, exclude: int | None = None) -> int:
        among = [i for i in self.alive() if i != exclude]
        leader = wait_until(
            lambda: self.active_controller(among),
            timeout=timeout,
            message=lambda: "no active controller; logs:\n" + "\n".join(self.log_tail(i, 8) for i in among),
        )
        assert leader is not None   # wait_until returns only a truthy value
        return leader

    def image(self, i: int) -> MetadataImage:
        return self.client.describe_image(self.addresses[i])

    def images(self) -> dict[int, MetadataImage]:
        return {i: self.image(i) for i in self.alive()}

    def wait_for_images(self, predicate: Callable[[MetadataImage], bool], *, timeout: float = 30.0) -> None:
        """Until every live node's image satisfies ``predicate``."""
        wait_until(
            lambda: all(predicate(image) for image in self.images().values()),
            timeout=timeout,
            message="not every node's image reached the wanted state",
        )
