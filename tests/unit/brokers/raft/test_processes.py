"""Three RaftNode processes on 127.0.0.1 (``python -m brokers.raft.demo_node``): kill -9 of
the leader, a new leader within a few election timeouts, no acknowledged entry lost.

KIP-595 "Leader election" / "Fetch"; Raft paper section 5.4 (safety: a committed entry
survives any leader change) and 5.1 (persistent state survives restarts).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import grpc
import pytest

from tests.support.ports import free_ports
from tests.support.wait import wait_until

pytestmark = [pytest.mark.fault, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[4]


class Proc:
    def __init__(self, node_id: int, voters: str, address: str, data_dir: Path) -> None:
        self.node_id, self.voters, self.address, self.data_dir = node_id, voters, address, data_dir
        self.popen: subprocess.Popen[bytes] | None = None
        self.channel: grpc.Channel | None = None

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "node.ready").unlink(missing_ok=True)
        self.log = open(self.data_dir / "stderr.txt", "ab")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "brokers.raft.demo_node", "--id", str(self.node_id), "--voters", self.voters,
             "--data-dir", str(self.data_dir), "--tick-ms", "50", "--election-ticks", "10", "--snapshot-every", "40"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=self.log, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.channel = grpc.insecure_channel(self.address)

    def call(self, method: str, payload: bytes = b"") -> Any:
        assert self.channel is not None
        return json.loads(self.channel.unary_unary(f"/spark_log.raft.Demo/{method}")(payload, timeout=10))

    def status(self) -> dict[str, Any] | None:
        try:
            return self.call("Status")
        except grpc.RpcError:
            return None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(sig)
            self.popen.wait(timeout=20)
        if self.channel is not None:
            self.channel.close()
        self.popen = self.channel = None
        self.log.close()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[dict[int, Proc]]:
    ports = free_ports(3)
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in zip((1, 2, 3), ports))
    nodes = {i: Proc(i, voters, f"127.0.0.1:{p}", tmp_path / f"n{i}") for i, p in zip((1, 2, 3), ports)}
    try:
        for proc in nodes.values():
            proc.start()
        yield nodes
    finally:
        for proc in nodes.values():
            proc.kill()


def _leader(nodes: dict[int, Proc]) -> Proc | None:
    leaders = [p for p in nodes.values() if p.popen is not None and (p.status() or {}).get("is_leader")]
    return leaders[0] if len(leaders) == 1 else None


def _propose(nodes: dict[int, Proc], payload: bytes, errors: list[str]) -> bytes:
    """Commit ``payload`` (each attempt tagged ``/aN`` so that an ambiguous failure that
    did commit shows up as an unacknowledged extra, never as a duplicate); returns the
    acknowledged attempt."""
    attempts = iter(range(1000))

    def attempt() -> bytes | None:
        leader = _leader(nodes)
        if leader is None:
            return None
        tagged = payload + b"/a%d" % next(attempts)
        try:
            reply = leader.call("Propose", tagged)
        except grpc.RpcError as exc:
            errors.append(f"{tagged!r}: {exc.code()}")
            return None
        if "offset" not in reply:
            errors.append(f"{tagged!r}: {reply}")
            return None
        return tagged
    return wait_until(attempt, timeout=30, message=f"could not commit {payload!r}")


def test_kill_9_leader_loses_no_acknowledged_entry(procs: dict[int, Proc]) -> None:
    acknowledged: list[bytes] = []
    errors: list[str] = []
    failovers: list[float] = []
    for round_ in range(3):
        wait_until(lambda: _leader(procs), timeout=30, message="no leader")
        for i in range(25):
            acknowledged.append(_propose(procs, b"r%d-%d" % (round_, i), errors))
        leader = _leader(procs)
        assert leader is not None
        leader.kill()
        killed_at = time.monotonic()
        wait_until(lambda: _leader(procs), timeout=30, message="no new leader after kill -9")
        failovers.append(time.monotonic() - killed_at)
        leader.start()
    def check(status: dict[str, Any] | None) -> bool:
        applied = [bytes.fromhex(h) for h in (status or {}).get("applied", [])]
        in_order = [p for p in applied if p in set(acknowledged)]
        return in_order == acknowledged and len(set(applied)) == len(applied)

    def report() -> str:
        lines = [f"acknowledged {len(acknowledged)}; failed attempts: {errors}"]
        for proc in procs.values():
            status = proc.status() or {}
            applied = [bytes.fromhex(h) for h in status.get("applied", [])]
            lines.append(f"node {proc.node_id}: leader={status.get('leader_id')} epoch={status.get('epoch')} "
                         f"missing={[p for p in acknowledged if p not in applied]} "
                         f"unacknowledged={[p for p in applied if p not in acknowledged]} count={len(applied)} "
                         f"duplicates={len(applied) - len(set(applied))}")
        return "\n".join(lines)

    wait_until(lambda: all(check(p.status()) for p in procs.values()) and len(
        {tuple((p.status() or {}).get("applied", [])) for p in procs.values()}) == 1,
               timeout=30, message=lambda: "nodes did not converge on every acknowledged entry\n" + report())
    print(f"failover seconds: {[round(f, 2) for f in failovers]}; failed attempts: {errors}")
    assert max(failovers) < 30, failovers  # generous: the CI box is shared (election timeout 0.5-1 s)


def test_partitioned_leader_process_is_replaced_and_converges(procs: dict[int, Proc]) -> None:
    """Check-quorum (KIP-595) across processes: the leader's transport filter cuts it off;
    it resigns, the other two elect a leader and commit; after healing all three hold the
    same log with every acknowledged entry (paper 5.4)."""
    errors: list[str] = []
    wait_until(lambda: _leader(procs), timeout=30, message="no leader")
    acknowledged = [_propose(procs, b"before-%d" % i, errors) for i in range(5)]
    old = _leader(procs)
    assert old is not None
    others = {i: p for i, p in procs.items() if p is not old}
    old.call("Block", json.dumps(sorted(others)).encode())
    wait_until(lambda: _leader(others) is not None and not (old.status() or {}).get("is_leader"),
               timeout=30, message="the majority did not replace the isolated leader")
    acknowledged += [_propose(others, b"during-%d" % i, errors) for i in range(5)]
    old.call("Block", b"[]")

    def converged() -> bool:
        logs = {tuple((p.status() or {}).get("applied", [])) for p in procs.values()}
        if len(logs) != 1:
            return False
        applied = [bytes.fromhex(h) for h in next(iter(logs))]
        return [p for p in applied if p in set(acknowledged)] == acknowledged and len(set(applied)) == len(applied)

    wait_until(converged, timeout=30, message=lambda: f"no convergence after healing; failed attempts: {errors}")
