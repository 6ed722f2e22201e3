"""``spark-log topics tier`` and the tier lines of ``topics describe`` (part of ``cli.py``).

    spark-log topics tier NAME [--wait [--timeout-ms MS]] [--engine local|spark]

``tier`` runs one round of the tiering job (``python -m jobs.tier --topic NAME --once``, a
subprocess: the client does not import ``jobs``) in the background and returns; with
``--wait`` it runs the round in the foreground (the job returns once every partition's
leader and its in-sync replicas recorded the tier's new end) and prints the tiered ranges.  A topic without
``remote.storage.enable=true`` is refused (``TIERING_NOT_ENABLED``, exit code 1).

``describe`` of a tiered topic adds, per partition, the Delta tier's range ``[start, end)``,
the brokers' local range and where the next round would tier up to.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from .errors import TieringNotEnabledError

if TYPE_CHECKING:
    from ._admin import Admin
    from ._tiering import TierDescription

__all__ = ["ACTIONS", "add_parsers", "run", "tier_table", "tier_json"]

ACTIONS = ("tier",)


def add_parsers(actions: Any) -> None:
    tier = actions.add_parser("tier", help="copy a tiered topic's closed segments to its Delta table now")
    tier.add_argument("name")
    tier.add_argument("--wait", action="store_true", help="run the round in the foreground and wait for the brokers")
    tier.add_argument("--timeout-ms", type=int, default=300_000, help="with --wait (default 300000)")
    tier.add_argument("--engine", choices=("local", "spark"), default="local", help="the job's reader (default local)")


def tier_table(description: TierDescription, topic: str) -> list[str]:
    header = ["PARTITION", "BROKER", "TIER [START, END)", "LOCAL [START, END)", "TIERABLE END"]
    cells = []
    for (name, partition), info in sorted(description.partitions.items()):
        if name != topic:
            continue
        tier = f"[{info.tier_start}, {info.tiered_end})" if info.tiered else "-"
        cells.append([str(partition), f"{info.broker_id}*", tier, f"[{info.log_start_offset}, {info.log_end_offset})",
                      str(info.tierable_end)])
    widths = [max(len(r[i]) for r in [header, *cells]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *cells]]


def tier_json(description: TierDescription, topic: str) -> dict[str, Any]:
    return {"location": os.path.join(description.location, topic), "partitions": [
        {"partition": p, "broker": info.broker_id, "tier_start": info.tier_start, "tiered_end": info.tiered_end,
         "log_start_offset": info.log_start_offset, "log_end_offset": info.log_end_offset,
         "tierable_end": info.tierable_end}
        for (name, p), info in sorted(description.partitions.items()) if name == topic]}


def is_tiered(config: dict[str, str]) -> bool:
    return str(config.get("remote.storage.enable", "false")).lower() == "true"


def run(args: argparse.Namespace) -> int:
    from ._admin import Admin

    with Admin(args.bootstrap) as admin:
        return _tier(admin, args)


def _tier(admin: Admin, args: argparse.Namespace) -> int:
    if not is_tiered(admin.describe_topic(args.name, live=False).config):
        raise TieringNotEnabledError(f"topic {args.name!r} is not tiered: set remote.storage.enable=true "
                                     f"(topics create --config remote.storage.enable=true, or Admin.alter_configs)")
    bootstrap = args.bootstrap or os.environ.get("SPARK_LOG_BOOTSTRAP")
    command = [sys.executable, "-m", "jobs.tier", "--topic", args.name, "--once", "--engine", args.engine]
    if bootstrap:
        command += ["--bootstrap", bootstrap]
    if not args.wait:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, start_new_session=True)
        print(f"tiering {args.name} in the background (pid {process.pid}); `spark-log topics describe "
              f"{args.name}` shows the tiered ranges")
        return 0
    done = subprocess.run(command, timeout=args.timeout_ms / 1000, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "the tiering job failed",
              file=sys.stderr)
        return done.returncode or 1
    sys.stdout.write(done.stdout)
    described = admin.describe_tier(args.name)   # the job returns once every leader's in-sync replicas recorded it
    for line in tier_table(described, args.name):
        print(line)
    return 0


def describe_lines(admin: Admin, name: str, config: dict[str, str]) -> list[str]:
    if not is_tiered(config):
        return []
    described = admin.describe_tier(name)
    return [f"tier: {os.path.join(described.location, name)}"] + ["  " + line for line in tier_table(described, name)]


def describe_json(admin: Admin, name: str, config: dict[str, str]) -> dict[str, Any] | None:
    return tier_json(admin.describe_tier(name), name) if is_tiered(config) else None


