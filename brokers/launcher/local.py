"""The embedded local cluster: N node processes (brokers + controller voters) on 127.0.0.1.

Layout under ``data_dir`` (default ``.spark-log``)::

    cluster.json          node ids, ports and pids of the cluster
    bootstrap             "127.0.0.1:p1,127.0.0.1:p2,..." (clients find it without flags)
    node-<id>/broker.toml the node's BrokerConfig
    node-<id>/node.log    its stdout/stderr
    node-<id>/metrics.port  the port of its Prometheus /metrics (``metrics_url``; metrics.scheme: http or https)
    node-<id>/...         its data (metadata log, partitions)
    tls/, client.properties   a secured cluster's CA, certificates and admin client settings
                          (``secure.py``: ``up --tls [--mtls] [--sasl] [--authorizer]``)

``up`` starts the nodes in the background (their own sessions, so they outlive the
caller) and returns once every broker is registered and unfenced and a metadata request
answers; the ports chosen at first start are kept, so data and the quorum survive
``down``/``up``.  ``down`` sends SIGTERM (clean stop) and waits; after ``timeout_s`` it
kills.  ``status`` reports each node's pid liveness and the cluster's brokers.

The security mode chosen at first start is kept in ``cluster.json`` too.

Run as ``python -m brokers.launcher.local up|down|status [--brokers N] [--data-dir D] [--tls ...]``
(this is what ``spark-log dev`` runs).  Errors print one line and exit 1.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import grpc

from spark_log import errors
from spark_log.errors import InvalidConfigError, SparkLogError
from spark_log.proto import broker_pb2 as pb
from spark_log.proto import broker_pb2_grpc as rpc

from . import secure
from .ports import unused_ports
from .secure import DevSecurity

__all__ = ["LocalCluster", "main"]

HOST = "127.0.0.1"
STATE_FILE = "cluster.json"
BOOTSTRAP_FILE = "bootstrap"
# as the clients' channels: no message size limit (a metadata answer names every topic and
# its schemas), no gRPC-level retries (a health probe that fails is asked again next round)
_PROBE_CHANNEL_OPTIONS = (
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.enable_retries", 0),
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as dead
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


@dataclass
class NodeState:
    node_id: int
    port: int
    pid: int = 0


class LocalCluster:
    """N local nodes under ``data_dir`` (see the module docstring)."""

    def __init__(self, data_dir: str | Path = ".spark-log", *, brokers: int = 3, python: str | None = None,
                 extra_config: dict[str, object] | None = None, raft_config: dict[str, object] | None = None,
                 security: DevSecurity | None = None) -> None:
        """``extra_config``: more top-level BrokerConfig keys; ``raft_config``: its [raft] table;
        ``security``: TLS and friends (``secure.py``; a cluster keeps the mode it started with)."""
        self.data_dir = Path(data_dir).resolve()
        self.python = python or sys.executable
        self.extra_config = dict(extra_config or {})
        self.raft_config = dict(raft_config or {})
        self.security = security or DevSecurity()
        self.nodes = self._load() or [NodeState(i, p) for i, p in enumerate(unused_ports(brokers, HOST), start=1)]
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self._channels = secure.PLAINTEXT

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{HOST}:{n.port}" for n in self.nodes)

    def _load(self) -> list[NodeState] | None:
        path = self.data_dir / STATE_FILE
        if not path.is_file():
            return None
        state = json.loads(path.read_text())
        if "security" in state:
            self.security = DevSecurity.from_json(state["security"])
        return [NodeState(int(n["node_id"]), int(n["port"]), int(n.get("pid", 0))) for n in state["nodes"]]

    def _save(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        state = {"nodes": [{"node_id": n.node_id, "port": n.port, "pid": n.pid} for n in self.nodes],
                 "security": self.security.to_json()}
        tmp = self.data_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, self.data_dir / STATE_FILE)

    def node_dir(self, node_id: int) -> Path:
        return self.data_dir / f"node-{node_id}"

    def _write_config(self, node: NodeState) -> Path:
        voters = ", ".join(f'"{n.node_id}@{HOST}:{n.port}"' for n in self.nodes)
        directory = self.node_dir(node.node_id)
        directory.mkdir(parents=True, exist_ok=True)
        lines = [
            f"broker_id = {node.node_id}",
            f'host = "{HOST}"',
            f"port = {node.port}",
            f'data_dir = "{directory}"',
            f"controller_quorum_voters = [{voters}]",
            'process_roles = ["broker", "controller"]',
        ]
        for key, value in self.extra_config.items():
            if isinstance(value, dict):   # a TOML inline table (e.g. tier_storage_options)
                lines.append(f"{key} = {{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items())
                             + " }")
            else:
                lines.append(f"{key} = {json.dumps(value)}")
        if self.raft_config:
            lines.append("[raft]")
            lines.extend(f"{key} = {json.dumps(value)}" for key, value in self.raft_config.items())
        lines += secure.config_lines(self.data_dir, self.security, node.node_id, [n.node_id for n in self.nodes])
        path = directory / "broker.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    # -- lifecycle --------------------------------------------------------------------------

    def start_node(self, node: NodeState) -> None:
        config = self._write_config(node)
        log = open(self.node_dir(node.node_id) / "node.log", "ab")
        env = dict(os.environ, SPARK_LOCAL_IP=HOST)
        env.pop("SPARK_LOG_BOOTSTRAP", None)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        proc = subprocess.Popen([self.python, "-m", "brokers.node", "--config", str(config)], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        log.close()
        node.pid = proc.pid
        self.procs[node.node_id] = proc

    def up(self, *, timeout_s: float = 60.0, on_progress: Callable[[int, int, str], None] | None = None) -> str:
        """Start every node that is not running, wait until healthy, write ``bootstrap``.
        ``on_progress``: as ``wait_healthy``."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        secure.prepare(self.data_dir, self.security, [n.node_id for n in self.nodes])
        self._channels = secure.channels(self.data_dir, self.security)
        for node in self.nodes:
            if not (node.pid and _alive(node.pid)):
                self.start_node(node)
        self._save()
        self.wait_healthy(timeout_s=timeout_s, on_progress=on_progress)
        secure.prepare_admin(self.data_dir, self.security, f"{HOST}:{self.nodes[0].port}")
        (self.data_dir / BOOTSTRAP_FILE).write_text(self.bootstrap + "\n")
        return self.bootstrap

    def open_channel(self, address: str) -> grpc.Channel:
        """A channel to a node as the launcher reaches it (a node's credentials when secured)."""
        return self._channels.open(address, _PROBE_CHANNEL_OPTIONS)

    @property
    def client_properties(self) -> Path:
        """The admin client's settings of a secured cluster (``secure.py``)."""
        return self.data_dir / secure.CLIENT_PROPERTIES

    def wait_healthy(self, *, timeout_s: float = 60.0,
                     on_progress: Callable[[int, int, str], None] | None = None) -> None:
        """Until every broker is registered and unfenced; raises ``TimeoutError`` naming why.
        ``on_progress(done, total, step)`` after each look: out of ``2 * nodes``, the nodes that
        answer, then the brokers every node sees live (registered and unfenced, with a
        controller)."""
        deadline = time.monotonic() + timeout_s
        reason: str | None = "no answer yet"
        while time.monotonic() < deadline:
            for node in self.nodes:
                proc = self.procs.get(node.node_id)
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"node {node.node_id} exited with code {proc.returncode}; see "
                                       f"{self.node_dir(node.node_id) / 'node.log'}")
            reason, answering, live = self._health()
            if on_progress is not None:
                n = len(self.nodes)
                step = "nodes answering" if answering < n else ("brokers live" if reason is not None else "healthy")
                on_progress(answering + (live if answering == n else 0), 2 * n, step)
            if reason is None:
                return
            time.sleep(0.1)  # polling other processes' readiness
        raise TimeoutError(f"local cluster not healthy after {timeout_s:.0f}s: {reason}")

    def _unhealthy_reason(self) -> str | None:
        """None when every node's own metadata shows every broker unfenced and a controller
        (each node is asked, so none is left behind on an old image)."""
        return self._health()[0]

    def _health(self) -> tuple[str | None, int, int]:
        """``(why not healthy or None, nodes that answer, brokers every answering node sees live
        with a controller)``."""
        wanted = sorted(n.node_id for n in self.nodes)
        reason: str | None = None
        answering = 0
        live_everywhere = set(wanted)
        for node in self.nodes:
            address = f"{HOST}:{node.port}"
            channel = self.open_channel(address)
            try:
                response = rpc.BrokerStub(channel).Metadata(pb.MetadataRequest(all_topics=True), timeout=2.0)
            except grpc.RpcError as exc:
                reason = reason or f"node {node.node_id}: {errors.from_rpc_error(exc, address=address)}"
                live_everywhere = set()
                continue
            finally:
                channel.close()
            answering += 1
            live = sorted(b.broker_id for b in response.brokers if not b.fenced)
            live_everywhere &= set(live) if response.controller_id >= 0 else set()
            if (live != wanted or response.controller_id < 0) and reason is None:
                reason = (f"node {node.node_id} sees live brokers {live}, controller {response.controller_id}, "
                          f"metadata offset {response.metadata_offset}")
        return reason, answering, len(live_everywhere)

    def metrics_url(self, node_id: int) -> str | None:
        """``http[s]://127.0.0.1:<port>/metrics`` of a running node (its ``metrics.port`` and
        ``metrics.scheme`` files, written once it serves: https on a TLS cluster); None when it
        serves no metrics or is not running."""
        try:
            port = int((self.node_dir(node_id) / "metrics.port").read_text())
            scheme = (self.node_dir(node_id) / "metrics.scheme").read_text().strip()
        except (OSError, ValueError):
            return None
        return f"{scheme}://{HOST}:{port}/metrics"

    def status(self) -> list[tuple[int, int, int, bool]]:
        """``(node_id, port, pid, alive)`` per node."""
        return [(n.node_id, n.port, n.pid, bool(n.pid) and _alive(n.pid)) for n in self.nodes]

    def stop_node(self, node: NodeState, *, timeout_s: float = 20.0, kill: bool = False) -> None:
        if not node.pid or not _alive(node.pid):
            node.pid = 0
            return
        try:
            os.kill(node.pid, signal.SIGKILL if kill else signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout_s
        while _alive(node.pid) and time.monotonic() < deadline:
            proc = self.procs.get(node.node_id)
            if proc is not None:
                try:
                    proc.wait(timeout=0.1)
                except subprocess.TimeoutExpired:
                    pass
            else:
                time.sleep(0.05)  # waiting for another session's process to exit
        if _alive(node.pid):
            os.kill(node.pid, signal.SIGKILL)
            proc = self.procs.get(node.node_id)
            if proc is not None:
                proc.wait(timeout=10)
        self.procs.pop(node.node_id, None)
        node.pid = 0

    def down(self, *, timeout_s: float = 20.0) -> None:
        """Stop every node cleanly (SIGTERM; SIGKILL after ``timeout_s``).  Data stays."""
        for node in self.nodes:
            if node.pid and _alive(node.pid):
                try:
                    os.kill(node.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for node in self.nodes:
            self.stop_node(node, timeout_s=timeout_s)
        self._save()
        try:
            (self.data_dir / BOOTSTRAP_FILE).unlink()
        except FileNotFoundError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark-log dev", description="The embedded local cluster.")
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--data-dir", default=os.environ.get("SPARK_LOG_DATA_DIR") or ".spark-log")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--tls", action="store_true", help="TLS on every listener and link (a local CA is made)")
    parser.add_argument("--mtls", action="store_true", help="with --tls: require client certificates")
    parser.add_argument("--sasl", action="store_true", help="with --tls: SCRAM-SHA-256 authentication (SASL_SSL)")
    parser.add_argument("--authorizer", action="store_true", help="with --tls: ACLs on, deny by default")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="up: a progress bar on stderr (default: on a terminal)")
    args = parser.parse_args(argv)
    if args.brokers < 1:
        print("spark-log: --brokers must be >= 1", file=sys.stderr)
        return 1
    try:
        wanted = DevSecurity(tls=args.tls or args.mtls or args.sasl or args.authorizer, mtls=args.mtls,
                             sasl=args.sasl, authorizer=args.authorizer)
        cluster = LocalCluster(args.data_dir, brokers=args.brokers, security=wanted)
        if args.command == "up" and wanted != DevSecurity() and cluster.security != wanted:
            raise InvalidConfigError(f"the cluster in {cluster.data_dir} was started as {cluster.security}; "
                                     f"it keeps that mode (start a new one in another --data-dir)")
        if args.command == "up":
            from spark_log.progress import progress_steps

            print(f"starting {len(cluster.nodes)} nodes in {cluster.data_dir} ...", file=sys.stderr)
            with progress_steps("starting the local cluster", enabled=args.progress) as update:
                bootstrap = cluster.up(timeout_s=args.timeout, on_progress=lambda done, total, step: update(
                    done, total, f"starting the local cluster: {step}"))
            print(bootstrap)
            if cluster.security.tls:
                print(f"secured ({cluster.security.protocol}); client settings in {cluster.client_properties}",
                      file=sys.stderr)
        elif args.command == "down":
            cluster.down(timeout_s=args.timeout)
            print(f"stopped; data kept in {cluster.data_dir}", file=sys.stderr)
        else:
            rows = cluster.status()
            running = sum(1 for r in rows if r[3])
            for node_id, port, pid, alive in rows:
                url = cluster.metrics_url(node_id) if alive else None
                print(f"node {node_id}  {HOST}:{port}  pid {pid or '-'}  {'running' if alive else 'stopped'}"
                      + (f"  metrics {url}" if url else ""))
            if running:
                print(f"bootstrap {cluster.bootstrap}")
            return 0 if running == len(rows) else 1
    except (SparkLogError, OSError, RuntimeError, TimeoutError, ValueError) as exc:
        print(f"spark-log: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
