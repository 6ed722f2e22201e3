"""Redis Streams as a peer: Debian's redis-server on a 127.0.0.1 port (append-only file,
``appendfsync everysec``, no RDB snapshots), driven by the Go client redigo
(bench/peers/go/peerbench.go): pipelined XADD, XREAD COUNT, and XREAD BLOCK for latency.
Redis has no synchronous stream replication to compare with RF=3 acks=all.

    python -m bench.peers.redis [--seconds 3] [--sizes 100,1024] [--streams 1]
"""
from __future__ import annotations

import argparse
import json
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from bench.peers import Server, free_port, peerbench, tool

HEADLINE_WINDOW = 1000  # pipelined XADDs in flight per publisher in the headline figures


@contextmanager
def server(root: Path) -> Iterator[tuple[str, Server]]:
    """One redis-server bound to 127.0.0.1 (protected mode on), data in ``root``; yields
    ("127.0.0.1:port", server) and stops it by its PID."""
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [str(tool("redis-server")), "--bind", "127.0.0.1", "--port", str(port), "--protected-mode", "yes",
            "--dir", str(root), "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
            "--daemonize", "no", "--logfile", ""]
    srv = Server("redis-server", argv, [port], root / "redis.log")
    try:
        srv.start()
        yield f"127.0.0.1:{port}", srv
    finally:
        srv.stop()


def measure(root: Path, *, sizes: tuple[int, ...] = (100, 1024), seconds: float = 3.0, streams: int = 1,
            windows: tuple[int, ...] = (), latency_seconds: float = 3.0, window: int = HEADLINE_WINDOW) -> dict:
    """Pipelined XADD and XREAD at each record size; XADD at 100 bytes for each pipeline depth
    in ``windows``; produce-to-consume latency at ~2,000 rec/s."""
    figures: dict = {"peer": "Redis Streams", "client": "Go redigo (Debian)", "publish": [], "consume": [],
                     "latency": None}
    with server(root) as (addr, _):
        for size in sizes:
            figures["publish"].append(peerbench("redis-pub", addr=addr, streams=streams, size=size, window=window,
                                                seconds=seconds))
            figures["consume"].append(peerbench("redis-sub", addr=addr, streams=streams, batch=10000))
        for w in windows:
            figures["publish"].append(peerbench("redis-pub", addr=addr, streams=streams, size=100, window=w,
                                                seconds=seconds / 2))
        if latency_seconds:
            figures["latency"] = peerbench("redis-lat", addr=addr, size=100, rate=2000, seconds=latency_seconds)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--streams", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="redis-peer-") as tmp:
        figures = measure(Path(tmp), sizes=tuple(int(s) for s in args.sizes.split(",")), seconds=args.seconds,
                          streams=args.streams)
    for row in figures["publish"] + figures["consume"]:
        print(json.dumps(row))
    if figures["latency"]:
        lat = figures["latency"]
        print(f"latency p50 {lat['p50_ms']:.2f} ms p99 {lat['p99_ms']:.2f} ms ({lat['records']} records)")


if __name__ == "__main__":
    main()
