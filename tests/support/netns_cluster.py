"""``NetnsCluster``: broker+controller node processes, each in its own network namespace.

The nodes of a ``NetworkLab`` (``netns.py``) listen on ``<host ip>:9092`` (each namespace
has its own ports), are voters of one Raft quorum, and are started, SIGTERMed, killed
(-9), paused (SIGSTOP) and resumed (SIGCONT) as real processes.  The test process reaches
them through the lab's gateway; ``bootstrap`` names them all.  ``disk_faults``: a JSON file
every node reads through ``SPARK_LOG_DISK_FAULTS`` (``brokers.log.files.SlowFiles``).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import grpc

from spark_log.proto import broker_pb2 as pb
from spark_log.proto import broker_pb2_grpc as rpc

from .netns import Host, NetworkLab

__all__ = ["NetnsCluster", "PORT", "lagging_image", "netns_world"]

PORT = 9092
REPO = Path(__file__).resolve().parents[2]


def lagging_image(offsets: dict[int, int], again: Callable[[int], int]) -> str | None:
    """Which node's metadata image is behind: ``offsets`` are the nodes' image offsets from
    one pass; a node below the highest of them is asked ``again`` (images only move
    forward, so churn between the two asks cannot hide a lagging node, nor keep a healthy
    one failing); None when every node reached it."""
    newest = max(offsets.values(), default=0)
    for i, offset in sorted(offsets.items()):
        if offset < newest:
            now = again(i)
            if now < newest:
                return f"node {i}'s metadata image is at offset {now}, behind {newest}"
    return None


class NetnsCluster:
    def __init__(self, lab: NetworkLab, root: Path, *, brokers: int = 3, config: dict[str, Any] | None = None,
                 disk_faults: Path | None = None, data_roots: dict[int, Path] | None = None) -> None:
        self.lab = lab
        self.root = Path(root)
        self.ids = list(range(1, brokers + 1))
        self.hosts: dict[int, Host] = {i: lab.add(f"n{i}") for i in self.ids}
        self.config = dict(config or {})
        self.disk_faults = disk_faults
        self.data_roots = data_roots or {}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.paused: set[int] = set()

    @property
    def bootstrap(self) -> str:
        return ",".join(self.address(i) for i in self.ids)

    def address(self, i: int) -> str:
        return f"{self.hosts[i].ip}:{PORT}"

    def data_dir(self, i: int) -> Path:
        return self.data_roots.get(i, self.root) / f"node-{i}"

    def log_path(self, i: int) -> Path:
        return self.root / f"node-{i}.log"

    def _config_file(self, i: int) -> Path:
        voters = ", ".join(f'"{n}@{self.address(n)}"' for n in self.ids)
        lines = [f"broker_id = {i}", f'host = "{self.hosts[i].ip}"', f"port = {PORT}",
                 f'data_dir = "{self.data_dir(i)}"', f"controller_quorum_voters = [{voters}]",
                 'process_roles = ["broker", "controller"]']
        lines += [f"{key} = {json.dumps(value)}" for key, value in self.config.items()]
        path = self.root / f"node-{i}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        return path

    # -- processes --------------------------------------------------------------------------------

    def start(self, i: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOCAL_IP=self.hosts[i].ip)
        env.pop("SPARK_LOG_BOOTSTRAP", None)
        if self.disk_faults is not None:
            env["SPARK_LOG_DISK_FAULTS"] = str(self.disk_faults)
        with open(self.log_path(i), "ab") as log:
            self.procs[i] = self.lab.popen(self.hosts[i], [sys.executable, "-m", "brokers.node", "--config",
                                                          str(self._config_file(i))],
                                           stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                           cwd=str(REPO))
        self.paused.discard(i)

    def start_all(self) -> None:
        for i in self.ids:
            self.start(i)

    def alive(self, i: int) -> bool:
        proc = self.procs.get(i)
        return proc is not None and proc.poll() is None

    def signal(self, i: int, sig: int) -> None:
        proc = self.procs.get(i)
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)

    def kill(self, i: int) -> None:
        """kill -9 and reap."""
        self.signal(i, signal.SIGCONT)
        self.signal(i, signal.SIGKILL)
        proc = self.procs.get(i)
        if proc is not None:
            proc.wait(timeout=30)
        self.paused.discard(i)

    def pause(self, i: int) -> None:
        self.signal(i, signal.SIGSTOP)
        self.paused.add(i)

    def resume(self, i: int) -> None:
        self.signal(i, signal.SIGCONT)
        self.paused.discard(i)

    def terminate(self, i: int, timeout_s: float = 20.0) -> int | None:
        """SIGTERM (after SIGCONT), then SIGKILL after ``timeout_s``; the exit code."""
        proc = self.procs.get(i)
        if proc is None:
            return None
        self.resume(i)
        self.signal(i, signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(timeout=30)

    def down(self) -> None:
        for i in self.ids:
            self.resume(i)
            self.signal(i, signal.SIGTERM)
        for i in self.ids:
            proc = self.procs.get(i)
            if proc is None:
                continue
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)

    # -- health -----------------------------------------------------------------------------------

    def _metadata(self, i: int) -> pb.MetadataResponse:
        channel = grpc.insecure_channel(self.address(i), options=(("grpc.enable_retries", 0),))
        try:
            return rpc.BrokerStub(channel).Metadata(pb.MetadataRequest(all_topics=True), timeout=2.0)
        finally:
            channel.close()

    def unhealthy(self) -> str | None:
        """None once every node's own image shows every broker unfenced and a controller,
        and every image has reached the newest metadata any node reported.

        The second condition matters after a partition heals: a deposed leader's first
        heartbeat unfences it within milliseconds, while its image (which still shows it
        leading, with every broker unfenced) catches up with the metadata log only later.
        A client bootstrapped at it in that window is sent to a zombie leader whose high
        watermark is stale (Kafka's model allows that read; a final read must not start
        there)."""
        offsets: dict[int, int] = {}
        for i in self.ids:
            try:
                response = self._metadata(i)
            except grpc.RpcError as exc:
                return f"node {i}: {exc.code()}"
            live = sorted(b.broker_id for b in response.brokers if not b.fenced)
            if live != self.ids or response.controller_id < 0:
                return f"node {i} sees live brokers {live}, controller {response.controller_id}"
            offsets[i] = response.metadata_offset

        def again(i: int) -> int:
            return self._metadata(i).metadata_offset
        try:
            return lagging_image(offsets, again)
        except grpc.RpcError as exc:
            return f"metadata offsets: {exc.code()}"

    def wait_healthy(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        reason = self.unhealthy()
        while reason is not None:
            for i in self.ids:
                if i in self.procs and not self.alive(i):
                    raise RuntimeError(f"node {i} exited ({self.procs[i].returncode}); see {self.log_path(i)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"netns cluster not healthy after {timeout_s:.0f}s: {reason}")
            time.sleep(0.2)  # polling other processes' readiness
            reason = self.unhealthy()


@contextmanager
def netns_world(root: Path, config: dict[str, Any], *, brokers: int = 3,
                timeout_s: float = 90.0) -> Iterator[tuple[NetworkLab, NetnsCluster]]:
    """A healthy ``NetnsCluster`` in a fresh ``NetworkLab`` (a fixture's body); both are torn
    down on exit, also when the test fails."""
    lab = NetworkLab()
    cluster = None
    try:
        cluster = NetnsCluster(lab, root, brokers=brokers, config=config)
        cluster.start_all()
        cluster.wait_healthy(timeout_s=timeout_s)
        yield lab, cluster
    finally:
        if cluster is not None:
            cluster.down()
        lab.close()
