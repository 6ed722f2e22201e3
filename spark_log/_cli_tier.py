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
import tempfile
import time
from typing import TYPE_CHECKING, Any

from .errors import InvalidConfigError, TieringNotEnabledError
from .progress import progress_steps

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
    tier.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                      help="with --wait: a progress bar of the offsets tiered (default: when stderr is a terminal)")


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
    if args.progress and not args.wait:
        raise InvalidConfigError("--progress needs --wait", key="progress")
    stdout, stderr, code = _run_with_progress(admin, args, command)
    if code != 0:
        print(stderr.strip().splitlines()[-1] if stderr.strip() else "the tiering job failed", file=sys.stderr)
        return code or 1
    sys.stdout.write(stdout)
    described = admin.describe_tier(args.name)   # the job returns once every leader's in-sync replicas recorded it
    for line in tier_table(described, args.name):
        print(line)
    return 0


def _offsets_tiered(admin: Admin, name: str, floor: dict[int, int]) -> tuple[int, int]:
    """``(offsets tiered since the start, offsets to tier)`` of ``name``'s partitions."""
    done = total = 0
    for (topic, partition), info in admin.describe_tier(name).partitions.items():
        if topic != name:
            continue
        start = floor.setdefault(partition, info.tiered_end if info.tiered else info.log_start_offset)
        total += max(0, info.tierable_end - start)
        done += max(0, (info.tiered_end if info.tiered else start) - start)
    return done, total


def _run_with_progress(admin: Admin, args: argparse.Namespace, command: list[str]) -> tuple[str, str, int]:
    """Run the job (``--wait``), showing the offsets the brokers record as tiered as a bar."""
    floor: dict[int, int] = {}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        deadline = time.monotonic() + args.timeout_ms / 1000
        with progress_steps(f"tiering {args.name}", enabled=args.progress) as update:
            done, total = _offsets_tiered(admin, args.name, floor)
            update(done, max(total, 1))
            while True:
                try:
                    process.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() > deadline:
                        process.kill()
                        process.wait()
                        raise
                done, total = _offsets_tiered(admin, args.name, floor)
                update(done, max(total, 1))
            done, total = _offsets_tiered(admin, args.name, floor)
            update(done, max(total, done, 1))
        out.seek(0)
        err.seek(0)
        return out.read(), err.read(), process.returncode


def describe_lines(admin: Admin, name: str, config: dict[str, str]) -> list[str]:
    if not is_tiered(config):
        return []
    described = admin.describe_tier(name)
    return [f"tier: {os.path.join(described.location, name)}"] + ["  " + line for line in tier_table(described, name)]


def describe_json(admin: Admin, name: str, config: dict[str, str]) -> dict[str, Any] | None:
    return tier_json(admin.describe_tier(name), name) if is_tiered(config) else None


