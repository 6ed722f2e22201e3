"""``spark-log cluster quorum``: the metadata quorum's Raft state, in the style of Kafka's
``kafka-metadata-quorum.sh describe --status`` / ``--replication``.

    spark-log cluster quorum [--json]                 leader, epoch, high watermark, max lag,
                                                      voters and observers (--status)
    spark-log cluster quorum --replication [--json]   one row per voter and observer: log end
                                                      offset, lag, last fetch and caught-up
                                                      times (ms ago, as the leader saw them), role

The answer comes from the Raft leader (any broker forwards the request): ``Admin.describe_quorum``.
Needs DESCRIBE on the cluster.  Unknown values print as ``-`` (JSON: null).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._quorum import QuorumDescription

__all__ = ["add_parser", "run", "status_lines", "replication_lines", "to_json"]


def add_parser(commands: Any) -> None:
    cluster = commands.add_parser("cluster", help="the cluster: the metadata quorum's Raft state")
    actions = cluster.add_subparsers(dest="action", required=True)
    quorum = actions.add_parser("quorum", help="the Raft leader, epoch, high watermark, and each voter's and "
                                "observer's progress (kafka-metadata-quorum describe)")
    view = quorum.add_mutually_exclusive_group()
    view.add_argument("--replication", action="store_true",
                      help="one row per voter and observer (log end offset, lag, last fetch, last caught up)")
    view.add_argument("--status", action="store_true", help="the summary (the default)")
    quorum.add_argument("--json", action="store_true", help="print JSON instead of text")


def _leader_now_ms(d: QuorumDescription) -> int | None:
    """The leader's wall clock when it answered (its own row's fetch time)."""
    return next((v.last_fetch_timestamp_ms for v in d.voters if v.role == "leader"), None)


def _ago(d: QuorumDescription, timestamp_ms: int | None) -> str:
    now = _leader_now_ms(d)
    return "-" if timestamp_ms is None or now is None else f"{max(0, now - timestamp_ms)} ms ago"


def _max_lag_time_ms(d: QuorumDescription) -> int | None:
    """Kafka's MaxFollowerLagTimeMs: how long since the least recently caught-up voter was."""
    now = _leader_now_ms(d)
    times = [v.last_caught_up_timestamp_ms for v in d.voters]
    if now is None or any(t is None for t in times):
        return None
    return max(0, now - min(t for t in times if t is not None))


def status_lines(d: QuorumDescription) -> list[str]:
    def text(value: object) -> str:
        return "-" if value is None else str(value)

    rows = [("LeaderId", text(d.leader_id)), ("LeaderAddress", d.leader_address or "-"),
            ("LeaderEpoch", text(d.leader_epoch)), ("HighWatermark", text(d.high_watermark)),
            ("MaxFollowerLag", text(d.max_lag)), ("MaxFollowerLagTimeMs", text(_max_lag_time_ms(d))),
            ("CurrentVoters", "[" + ",".join(str(v) for v in sorted(v.node_id for v in d.voters)) + "]"),
            ("CurrentObservers", "[" + ",".join(str(o.node_id) for o in d.observers) + "]")]
    width = max(len(k) for k, _ in rows) + 2
    return [f"{key + ':':<{width}}{value}" for key, value in rows]


def replication_lines(d: QuorumDescription) -> list[str]:
    header = ("NodeId", "LogEndOffset", "Lag", "LastFetch", "LastCaughtUp", "Status")
    rows = [header] + [(str(r.node_id), "-" if r.log_end_offset is None else str(r.log_end_offset),
                        "-" if r.lag is None else str(r.lag), _ago(d, r.last_fetch_timestamp_ms),
                        _ago(d, r.last_caught_up_timestamp_ms), r.role.capitalize()) for r in d.replicas]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def to_json(d: QuorumDescription) -> dict[str, Any]:
    out = dataclasses.asdict(d)
    out["max_follower_lag"] = d.max_lag
    out["max_follower_lag_time_ms"] = _max_lag_time_ms(d)
    return out


def run(args: argparse.Namespace) -> int:
    from ._admin import Admin

    with Admin(args.bootstrap) as admin:
        described = admin.describe_quorum()
    if args.json:
        print(json.dumps(to_json(described), indent=1))
    else:
        lines = replication_lines(described) if args.replication else status_lines(described)
        print("\n".join(lines))
    return 0
