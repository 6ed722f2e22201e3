"""A standalone Raft node process for tests and demos: ``python -m brokers.raft.demo_node``.

It runs one ``RaftNode`` over a ``ListStateMachine`` (the applied payloads, in order) and
adds two raw-bytes gRPC methods beside ``RaftService`` on the same port:

- ``/spark_log.raft.Demo/Propose``: request = payload bytes; reply = JSON
  ``{"offset": int}`` or ``{"error": code, "message": str, "leader_address": str|null}``.
- ``/spark_log.raft.Demo/Status``: reply = JSON ``{"node_id", "leader_id", "epoch",
  "is_leader", "high_watermark", "applied": [hex payloads]}``.
- ``/spark_log.raft.Demo/Block``: request = JSON list of node ids; this process drops every
  Raft message to or from them (its ``transport_filter``) until the next ``Block``; ``[]``
  heals.  One process's filter cuts a link both ways (fault injection: partitions).

``--voters 1@127.0.0.1:7001,2@127.0.0.1:7002`` names the quorum; the node's own address
is its entry there (observers pass ``--port``).  SIGTERM stops it cleanly; the test
suite also kill -9s it.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from spark_log.config import RaftConfig
from spark_log.errors import SparkLogError

from .driver import RaftNode
from brokers.net.channels import SERVER_OPTIONS
from brokers.net.stop_signal import on_stop_signals, wait_for_signal

__all__ = ["ListStateMachine", "main", "parse_voters"]


class ListStateMachine:
    """The applied payloads in order; the snapshot is their JSON (hex) list.  Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.applied: list[bytes] = []
        self.offsets: list[int] = []
        self.leader: tuple[int | None, int] = (None, 0)

    def apply(self, offset: int, epoch: int, payload: bytes) -> None:
        with self._lock:
            if self.offsets and offset <= self.offsets[-1]:
                raise AssertionError(f"apply out of order: {offset} after {self.offsets[-1]}")
            self.applied.append(payload)
            self.offsets.append(offset)

    def snapshot(self) -> bytes:
        with self._lock:
            return json.dumps({"applied": [p.hex() for p in self.applied], "offsets": self.offsets}).encode()

    def restore(self, offset: int, data: bytes) -> None:
        body = json.loads(data)
        with self._lock:
            self.applied = [bytes.fromhex(p) for p in body["applied"]]
            self.offsets = list(body["offsets"])

    def on_leader_change(self, leader_id: int | None, epoch: int) -> None:
        self.leader = (leader_id, epoch)

    def values(self) -> list[bytes]:
        with self._lock:
            return list(self.applied)


def parse_voters(text: str) -> dict[int, str]:
    voters: dict[int, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        node, _, address = item.partition("@")
        voters[int(node)] = address
    return voters


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--voters", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--port", type=int, default=0, help="listen port (default: own voter entry)")
    parser.add_argument("--tick-ms", type=int, default=20)
    parser.add_argument("--election-ticks", type=int, default=10)
    parser.add_argument("--snapshot-every", type=int, default=10_000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("SPARK_LOG_RAFT_LOG_LEVEL", "WARNING"),
                        format=f"%(asctime)s node{args.id} %(name)s %(levelname)s %(message)s")
    voters = parse_voters(args.voters)
    observer = args.id not in voters
    port = args.port or int(voters[args.id].rpartition(":")[2])
    config = RaftConfig(tick_ms=args.tick_ms, election_ticks=args.election_ticks, heartbeat_ticks=2, fetch_wait_ticks=2,
                        snapshot_every_entries=args.snapshot_every)
    machine = ListStateMachine()
    blocked: set[int] = set()
    node = RaftNode(node_id=args.id, voters=voters, data_dir=Path(args.data_dir), config=config,
                    state_machine=machine, observer=observer,
                    transport_filter=lambda src, dst: src not in blocked and dst not in blocked)

    def block(request: bytes, context: Any) -> bytes:
        ids = {int(i) for i in json.loads(request)}
        blocked.clear()
        blocked.update(ids)
        return json.dumps(sorted(blocked)).encode()

    def propose(request: bytes, context: Any) -> bytes:
        try:
            return json.dumps({"offset": node.propose([request], timeout_s=8.0)}).encode()
        except SparkLogError as exc:
            return json.dumps({"error": exc.code.name, "message": exc.message,
                               "leader_address": exc.details.get("leader_address")}).encode()

    def status(request: bytes, context: Any) -> bytes:
        return json.dumps({"node_id": args.id, "leader_id": node.leader_id, "epoch": node.epoch,
                           "is_leader": node.is_leader, "high_watermark": node.high_watermark,
                           "applied": [p.hex() for p in machine.values()]}).encode()

    demo = grpc.method_handlers_generic_handler("spark_log.raft.Demo", {
        "Propose": grpc.unary_unary_rpc_method_handler(propose),
        "Status": grpc.unary_unary_rpc_method_handler(status),
        "Block": grpc.unary_unary_rpc_method_handler(block),
    })
    server = grpc.server(ThreadPoolExecutor(max_workers=32), options=SERVER_OPTIONS)
    node.add_to_server(server)
    server.add_generic_rpc_handlers((demo,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    node.start()
    done = threading.Event()
    on_stop_signals(done.set)
    (Path(args.data_dir) / "node.ready").write_text(str(port))
    wait_for_signal(done)
    node.stop()
    server.stop(grace=1).wait()


if __name__ == "__main__":
    main()
