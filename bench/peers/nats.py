"""NATS JetStream as a peer: one server (R1) or a 3-node JetStream cluster (R3) on 127.0.0.1
ports, file storage, driven by the Go client (bench/peers/go/peerbench.go).

    python -m bench.peers.nats [--seconds 3] [--sizes 100,1024] [--streams 1]
"""
from __future__ import annotations

import argparse
import json
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from bench.peers import Server, free_port, peerbench, tool

HEADLINE_WINDOW = 10_000  # publishes in flight per publisher: the best of 10..10,000 in one sweep here, within noise of 1,000 in another


def _config(root: Path, name: str, port: int, cluster_port: int | None, routes: list[int]) -> Path:
    store = root / name
    store.mkdir(parents=True, exist_ok=True)
    lines = [f"server_name: {name}", f"listen: 127.0.0.1:{port}",
             f'jetstream {{ store_dir: "{store}" }}']
    if cluster_port is not None:
        route_list = ", ".join(f"nats-route://127.0.0.1:{p}" for p in routes)
        lines.append(f"cluster {{ name: bench, listen: 127.0.0.1:{cluster_port}, routes: [{route_list}] }}")
    path = root / f"{name}.conf"
    path.write_text("\n".join(lines) + "\n")
    return path


@contextmanager
def cluster(root: Path, nodes: int = 1) -> Iterator[tuple[str, list[Server]]]:
    """``nodes`` nats-server processes with JetStream (a cluster when nodes > 1), every listener
    on 127.0.0.1; yields (client URL list, servers); stops each by its PID."""
    binary = str(tool("nats-server"))
    ports = [free_port() for _ in range(nodes)]
    cluster_ports = [free_port() for _ in range(nodes)] if nodes > 1 else [None] * nodes
    servers: list[Server] = []
    try:
        for i in range(nodes):
            routes = [p for j, p in enumerate(cluster_ports) if j != i and p is not None]
            conf = _config(root, f"n{i}", ports[i], cluster_ports[i], routes)
            listen = [ports[i]] + ([cluster_ports[i]] if cluster_ports[i] is not None else [])
            servers.append(Server(f"nats-server n{i}", [binary, "-c", str(conf)], listen, root / f"n{i}.log"))
        for server in servers:
            server.start()
        yield ",".join(f"nats://127.0.0.1:{p}" for p in ports), servers
    finally:
        for server in servers:
            server.stop()


def measure(root: Path, *, sizes: tuple[int, ...] = (100, 1024), seconds: float = 3.0, streams: int = 1,
            windows: tuple[int, ...] = (), r3: bool = True, latency_seconds: float = 3.0,
            window: int = HEADLINE_WINDOW) -> dict:
    """Publish (R1 and, with ``r3``, R3) and consume at each record size; publish at 100 bytes
    for each window in ``windows`` (the batch-size curve); produce-to-consume latency at
    ~2,000 rec/s.  Returns {"publish": [...], "consume": [...], "latency": {...}}."""
    figures: dict = {"peer": "NATS JetStream", "client": "Go nats.go (Debian)", "publish": [], "consume": [],
                     "latency": None}
    with cluster(root / "r1", 1) as (url, _):
        for size in sizes:
            figures["publish"].append(peerbench("nats-pub", url=url, streams=streams, replicas=1, size=size,
                                                window=window, seconds=seconds))
            figures["consume"].append(peerbench("nats-sub", url=url, streams=streams))
        for w in windows:
            figures["publish"].append(peerbench("nats-pub", url=url, streams=streams, replicas=1, size=100,
                                                window=w, seconds=seconds / 2))
        if latency_seconds:
            figures["latency"] = peerbench("nats-lat", url=url, size=100, rate=2000, seconds=latency_seconds)
    if r3:
        with cluster(root / "r3", 3) as (url, _):
            for size in sizes:
                figures["publish"].append(peerbench("nats-pub", url=url, streams=streams, replicas=3, size=size,
                                                    window=window, seconds=seconds))
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--no-r3", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nats-peer-") as tmp:
        figures = measure(Path(tmp), sizes=tuple(int(s) for s in args.sizes.split(",")), seconds=args.seconds,
                          streams=args.streams, r3=not args.no_r3)
    for row in figures["publish"] + figures["consume"]:
        print(json.dumps(row))
    if figures["latency"]:
        lat = figures["latency"]
        print(f"latency p50 {lat['p50_ms']:.2f} ms p99 {lat['p99_ms']:.2f} ms ({lat['records']} records)")


if __name__ == "__main__":
    main()
