"""``spark-log topics reassign`` and ``spark-log topics elect-leaders`` (part of ``cli.py``).

    spark-log topics reassign --topic T --partition P --replicas 2,3,4 [--wait [--timeout-ms MS] [--[no-]progress]]
    spark-log topics reassign --topic T --partition P --cancel
    spark-log topics reassign --list [--topic T]
    spark-log topics elect-leaders [--topic T] [--partition P]

``reassign`` prints the partition's replica set after the request (``adding``/``removing``
while it is pending); with ``--wait`` it returns once the move completed and prints the
final replicas, and shows a progress bar on stderr (on a terminal, or with ``--progress``):
the offsets the new replicas copied up to the leader's high watermark, plus one a replica
once it joined the ISR (``Admin.wait_for_reassignments``).  ``elect-leaders`` prints one line per partition: its leader, or why the
preferred replica could not take over; it exits 0 either way (as Kafka's tool), 1 only
for a refused request.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from .errors import InvalidConfigError

__all__ = ["ACTIONS", "add_parsers", "run"]

ACTIONS = ("reassign", "elect-leaders")


def add_parsers(actions: Any) -> None:
    reassign = actions.add_parser("reassign", help="move a partition to a new replica set online (KIP-455)")
    reassign.add_argument("--topic", default=None)
    reassign.add_argument("--partition", type=int, default=None)
    reassign.add_argument("--replicas", default=None, metavar="B1,B2,...", help="the target broker ids, in order")
    reassign.add_argument("--cancel", action="store_true", help="cancel the pending reassignment")
    reassign.add_argument("--list", action="store_true", help="list pending reassignments")
    reassign.add_argument("--wait", action="store_true", help="return once the reassignment completed")
    reassign.add_argument("--timeout-ms", type=int, default=120_000, help="with --wait (default 120000)")
    reassign.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                          help="with --wait: a progress bar of the offsets the new replicas copied on stderr "
                               "(default: on a terminal)")
    elect = actions.add_parser("elect-leaders", help="move leadership back to the preferred (first) replicas")
    elect.add_argument("--topic", default=None)
    elect.add_argument("--partition", type=int, action="append", default=None,
                       help="repeatable; needs --topic (default: every partition)")


def _replicas(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InvalidConfigError(f"--replicas takes comma-separated broker ids, got {text!r}") from None
    if not ids:
        raise InvalidConfigError("--replicas names no broker")
    return ids


def _line(r: Any) -> str:
    pending = f"  adding {list(r.adding)}  removing {list(r.removing)}" if r.pending else "  (no reassignment pending)"
    return f"{r.topic}-{r.partition}  replicas {list(r.replicas)}{pending}"


def run(args: argparse.Namespace) -> int:
    from ._admin import Admin

    with Admin(args.bootstrap) as admin:
        if args.action == "elect-leaders":
            if args.partition is not None and args.topic is None:
                raise InvalidConfigError("--partition needs --topic")
            results = admin.elect_leaders(args.topic, args.partition)
            for (topic, partition), result in sorted(results.items()):
                leader = result.leader if result.leader is not None else "none"
                why = "" if result.ok else f"  (not moved: {result.reason})"
                print(f"{topic}-{partition}  leader {leader}  preferred {result.preferred}{why}")
            return 0
        if args.list:
            pending = admin.list_partition_reassignments(args.topic)
            for _, r in sorted(pending.items()):
                print(_line(r))
            if not pending:
                print("no reassignment pending")
            return 0
        if args.topic is None or args.partition is None:
            raise InvalidConfigError("topics reassign needs --topic and --partition (or --list)")
        if args.cancel == (args.replicas is not None):
            raise InvalidConfigError("topics reassign takes either --replicas B1,B2,... or --cancel")
        key = (args.topic, args.partition)
        target = None if args.cancel else _replicas(args.replicas)
        if args.progress and not args.wait:
            raise InvalidConfigError("--progress shows the wait: add --wait")
        from ._cli_io import progress_steps

        show = args.wait and (sys.stderr.isatty() if args.progress is None else args.progress)
        with progress_steps(f"reassigning {args.topic}-{args.partition}", enabled=show) as update:
            seen = [0]

            def on_progress(done: int, total: int) -> None:
                if total:  # 0: not measured yet (no leader answered, or it completed before the first look)
                    seen[0] = total
                    update(done, total)

            (state,) = admin.alter_partition_reassignments({key: target}, wait=args.wait,
                                                           timeout_s=args.timeout_ms / 1000,
                                                           on_progress=on_progress if show else None).values()
            if show:
                update(max(seen[0], 1), max(seen[0], 1))  # complete
        if args.wait:  # completed: the replica set is now the target
            print(f"{args.topic}-{args.partition}  replicas {list(state.target)}  (reassignment complete)")
            return 0
        print(("cancelled: " if args.cancel else "") + _line(state))
    return 0
