"""spark-log's figures next to the peers' on the same record sizes, with the ratio (issue 19).

``client(figures)`` and ``replication(figures)`` measure the peers (bench.peers.nats,
bench.peers.redis) after spark-log's own run, print a table, and return the peers' figures and
the table rows as data (for bench/report.py).  Ratios are spark-log / peer: above 1 spark-log
is faster; for latency (lower is better) the ratio is peer / spark-log, so above 1 still means
spark-log is better.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.peers import PeerUnavailable
from bench.peers import nats as nats_peer
from bench.peers import redis as redis_peer

__all__ = ["client", "replication", "rows_client", "rows_replication", "print_rows", "pick"]


def pick(rows: list[dict], mode: str, size: int, *, replicas: int | None = None,
         window: int | None = None) -> float | None:
    """The rate of the first peer result of ``mode`` at ``size`` (and replicas/window if given)."""
    for row in rows:
        if row["mode"].endswith(mode) and row["size"] == size and \
                (replicas is None or row.get("replicas", 1) == replicas) and \
                (window is None or row.get("window") == window):
            return row["rate"]
    return None


def _measure(root: Path, which: str, **kwargs: Any) -> dict | None:
    try:
        if which == "nats":
            return nats_peer.measure(root / "nats", **kwargs)
        kwargs.pop("r3", None)
        return redis_peer.measure(root / "redis", **kwargs)
    except PeerUnavailable as exc:
        print(f"peer {which} skipped: {exc}")
        return None


def _peer_value(peer: dict | None, kind: str, size: int, replicas: int = 1) -> float | None:
    if peer is None:
        return None
    if kind == "publish":
        return pick(peer["publish"], "-pub", size, replicas=replicas,
                    window=nats_peer.HEADLINE_WINDOW if "NATS" in peer["peer"] else redis_peer.HEADLINE_WINDOW)
    if kind == "consume":
        return pick(peer["consume"], "-sub", size)
    lat = peer.get("latency")
    return None if not lat else lat[kind]


def _row(figure: str, spark: float | None, nats: float | None, redis: float | None, lower_better: bool = False) -> dict:
    def ratio(peer: float | None) -> float | None:
        if spark is None or peer is None or not spark or not peer:
            return None
        return peer / spark if lower_better else spark / peer
    return {"figure": figure, "spark": spark, "nats": nats, "nats_ratio": ratio(nats), "redis": redis,
            "redis_ratio": ratio(redis), "lower_better": lower_better}


def rows_client(spark: dict, peers: dict) -> list[dict]:
    """Rows for the client bench: one producer / consumer, one partition vs one stream."""
    nats, redis = peers.get("nats"), peers.get("redis")
    rows = []
    for size in (100, 1024):
        label = "100 B" if size == 100 else "1 KiB"
        sb = spark.get("send_batch", {}).get(size)
        rows.append(_row(f"publish {label}: send_batch vs async publish / pipelined XADD", sb,
                         _peer_value(nats, "publish", size), _peer_value(redis, "publish", size)))
        if size == 100 and spark.get("send") is not None:
            rows.append(_row("publish 100 B per record: send() vs the same", spark["send"],
                             _peer_value(nats, "publish", size), _peer_value(redis, "publish", size)))
        rows.append(_row(f"consume {label}: poll_arrow vs ordered consumer / XREAD", spark.get("poll_arrow", {}).get(size),
                         _peer_value(nats, "consume", size), _peer_value(redis, "consume", size)))
    for q in ("p50_ms", "p99_ms"):
        rows.append(_row(f"produce->consume latency {q[:3]} (ms) at ~2,000 rec/s", spark.get(q),
                         _peer_value(nats, q, 100), _peer_value(redis, q, 100), lower_better=True))
    return rows


def rows_replication(spark: dict, peers: dict) -> list[dict]:
    """Rows for the replication bench: 3 partitions vs 3 streams (one publisher each)."""
    nats, redis = peers.get("nats"), peers.get("redis")
    return [
        _row("publish 100 B, RF=1 acks=1 vs R1 / Redis", spark.get("rf1"), _peer_value(nats, "publish", 100, 1),
             _peer_value(redis, "publish", 100)),
        _row("publish 100 B, RF=3 acks=all vs JetStream R3", spark.get("rf3"), _peer_value(nats, "publish", 100, 3),
             None),
    ]


def _fmt(value: float | None, ratio: bool = False) -> str:
    if value is None:
        return "n/a"
    if ratio:
        return f"{value:.2f}x"
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def print_rows(title: str, rows: list[dict]) -> None:
    print(title)
    print(f"  {'figure':<62} {'spark-log':>11} {'NATS JS':>11} {'ratio':>7} {'Redis':>11} {'ratio':>7}")
    for r in rows:
        print(f"  {r['figure']:<62} {_fmt(r['spark']):>11} {_fmt(r['nats']):>11} {_fmt(r['nats_ratio'], True):>7} "
              f"{_fmt(r['redis']):>11} {_fmt(r['redis_ratio'], True):>7}")
    print("  (ratio: spark-log / peer for rates, peer / spark-log for latency: above 1, spark-log is better)")


def client(spark: dict, *, seconds: float = 3.0, windows: tuple[int, ...] = ()) -> dict:
    """Measure both peers as the client bench measured spark-log (one stream, 100 B and 1 KiB,
    latency at ~2,000 rec/s), print the table, return {"nats", "redis", "rows"}."""
    with tempfile.TemporaryDirectory(prefix="peers-client-") as tmp:
        common = {"sizes": (100, 1024), "seconds": seconds, "streams": 1, "windows": windows,
                  "latency_seconds": min(seconds, 3.0)}
        peers = {"nats": _measure(Path(tmp), "nats", r3=False, **common),
                 "redis": _measure(Path(tmp), "redis", **common)}
    peers["rows"] = rows_client(spark, peers)
    print_rows("spark-log next to its peers (same machine, same run, 100-byte and 1 KiB random values; "
               "one producer/consumer, one partition or stream):", peers["rows"])
    return peers


def replication(spark: dict, *, seconds: float = 3.0) -> dict:
    """Measure both peers as the replication bench measured spark-log (3 streams, one publisher
    each, 100-byte values; NATS R1 and a 3-node R3 cluster), print the table, return the data."""
    with tempfile.TemporaryDirectory(prefix="peers-replication-") as tmp:
        common = {"sizes": (100,), "seconds": seconds, "streams": 3, "latency_seconds": 0}
        peers = {"nats": _measure(Path(tmp), "nats", r3=True, **common),
                 "redis": _measure(Path(tmp), "redis", **common)}
    peers["rows"] = rows_replication(spark, peers)
    print_rows("spark-log next to its peers (same machine, same run, 100-byte random values, 3 partitions "
               "or streams, one publisher each):", peers["rows"])
    return peers
