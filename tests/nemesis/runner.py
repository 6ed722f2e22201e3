"""``python -m tests.nemesis.runner --runs N``: N nemesis runs, a table, and the ledger.

Each run (``run.one_run``) takes tens of seconds; its row is appended to
``tests/nemesis/ledger.csv`` as soon as it ends (``--no-ledger``: not), so runs add up across
sessions and an interrupted sweep keeps what it did.  Seeds start at ``--seed`` (default:
the time, so sweeps do not repeat each other).  Runs with anomalies keep their directory
under ``--keep`` (default ``.nemesis-failures``).  Exit code 1 if any run found an anomaly.
``make nemesis RUNS=N`` runs this.  Needs root, iproute2, nftables and tmpfs mounts.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from tests.support.netns import available

from .ledger import LEDGER, Row, append, read, table, totals
from .run import one_run

REPO = Path(__file__).resolve().parents[2]


def commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.nemesis.runner")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--fault-seconds", type=float, default=20.0)
    parser.add_argument("--brokers", type=int, default=None, help="3 to 5 (default: seeded choice per run)")
    parser.add_argument("--keep", type=Path, default=REPO / ".nemesis-failures")
    parser.add_argument("--no-ledger", action="store_true")
    parser.add_argument("--ledger", type=Path, default=LEDGER, help="the ledger to append to")
    parser.add_argument("--commit", default=None, help="the commit to record (default: git rev-parse HEAD)")
    args = parser.parse_args(argv)
    why = available()
    if why is not None:
        print(f"nemesis: {why}", file=sys.stderr)
        return 2
    first = args.seed if args.seed is not None else int(time.time()) % 10_000_000
    tree = args.commit or commit()
    rows: list[Row] = []
    for seed in range(first, first + args.runs):
        row = one_run(seed, fault_s=args.fault_seconds, brokers=args.brokers, keep=args.keep)
        row.commit = tree
        rows.append(row)
        if not args.no_ledger:
            append(row, args.ledger)
        print(table([row]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    runs, bad, acked, faults = totals(read(args.ledger) if not args.no_ledger else rows)
    where = f"ledger {args.ledger}" if not args.no_ledger else "this sweep"
    print(f"\n{where}: {runs} runs, {bad} with anomalies, {acked} acknowledged writes checked; faults "
          + ", ".join(f"{k} {v}" for k, v in sorted(faults.items())))
    return 1 if any(r.anomalies for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
