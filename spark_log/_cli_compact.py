"""``spark-log topics compact`` and the compaction lines of ``topics describe`` (part of ``cli.py``).

    spark-log topics compact NAME [--partition P ...] [--wait [--timeout-ms MS]] [--json]

``compact`` asks each partition's leader to clean now (below its cleanable end, honouring
``min.compaction.lag.ms``) and prints each partition's cleaned offset and dirty ratio;
with ``--wait`` it returns once every replica applied the leader's latest plan and prints
the final state, replica by replica.  A topic whose ``cleanup.policy`` lacks ``compact`` is
refused (``TOPIC_NOT_COMPACTED``, exit code 1).

``describe`` of a compacted topic adds, per partition, the leader's cleaned offset (every
record below it is compacted), dirty ratio (dirty share of the cleanable bytes), the end
of the cleanable range and the latest plan (``offset:end``; ``-`` none).
"""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._admin import Admin
    from ._compaction import ReplicaCompaction

__all__ = ["ACTIONS", "add_parsers", "run", "compaction_table", "compaction_json"]

ACTIONS = ("compact",)


def add_parsers(actions: Any) -> None:
    compact = actions.add_parser("compact", help="compact a cleanup.policy=compact topic now")
    compact.add_argument("name")
    compact.add_argument("--partition", type=int, action="append", default=None, help="repeatable (default: all)")
    compact.add_argument("--wait", action="store_true", help="return once every replica applied the clean")
    compact.add_argument("--timeout-ms", type=int, default=120_000, help="with --wait (default 120000)")
    compact.add_argument("--json", action="store_true", help="print JSON instead of a table")
    compact.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                         help="with --wait: a progress bar of partitions settled on stderr (default: on a terminal)")


def _plan(state: ReplicaCompaction) -> str:
    return "-" if state.plan is None else f"{state.plan.offset}:{state.plan.end_offset}"


def compaction_table(states: dict[int, list[ReplicaCompaction]], *, replicas: bool) -> list[str]:
    """Aligned lines (header first): one row per partition (its leader), or per replica."""
    header = ["PARTITION", "BROKER", "CLEANED OFFSET", "DIRTY RATIO", "CLEANABLE END", "PLAN", "STATUS"]
    cells = []
    for partition, found in sorted(states.items()):
        for state in found if replicas else found[:1]:
            status = "requested" if state.requested else ("applied" if state.settled else "pending")
            cells.append([str(partition), f"{state.broker_id}{'*' if state.leader else ''}", str(state.cleaned_offset),
                          f"{state.dirty_ratio:.2f}", str(state.cleanable_end), _plan(state), status])
        if not found:
            cells.append([str(partition), "-", "-", "-", "-", "-", "leader not reachable"])
    widths = [max(len(r[i]) for r in [header, *cells]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *cells]]


def compaction_json(states: dict[int, list[ReplicaCompaction]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for partition, found in sorted(states.items()):
        out[str(partition)] = [{
            "broker": s.broker_id, "leader": s.leader, "cleaned_offset": s.cleaned_offset,
            "dirty_ratio": round(s.dirty_ratio, 4), "cleanable_end": s.cleanable_end, "clean_bytes": s.clean_bytes,
            "dirty_bytes": s.dirty_bytes, "plan": None if s.plan is None else {
                "offset": s.plan.offset, "end_offset": s.plan.end_offset,
                "tombstone_horizon_ms": s.plan.tombstone_horizon_ms}, "applied_plan_offset": s.applied_plan_offset,
            "requested": s.requested} for s in found]
    return out


def run(args: argparse.Namespace) -> int:
    from ._admin import Admin

    with Admin(args.bootstrap) as admin:
        return _compact(admin, args)


def _compact(admin: Admin, args: argparse.Namespace) -> int:
    from ._cli_io import progress

    partitions = args.partition
    total = len(partitions) if partitions else len(admin.describe_topic(args.name, live=False).partitions)
    with progress(f"compacting {args.name}", total if args.wait else 0, enabled=args.progress and args.wait) as advance:
        settled = [0]

        def on_progress(done: int, _total: int) -> None:
            if done > settled[0]:
                advance(done - settled[0])
                settled[0] = done

        states = admin.compact(args.name, partitions, wait=args.wait, timeout_s=args.timeout_ms / 1000,
                               on_progress=on_progress)
    if args.json:
        print(json.dumps(compaction_json(states), indent=1))
    else:
        verb = "compacted" if args.wait else "asked the leaders to compact"
        print(f"{verb} {args.name}:")
        for line in compaction_table(states, replicas=args.wait):
            print("  " + line)
    return 0
