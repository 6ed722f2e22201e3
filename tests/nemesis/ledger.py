"""The nemesis ledger: one CSV line per run, in the repository, so runs add up across sessions.

``tests/nemesis/ledger.csv`` columns: ``started`` (UTC, ISO), ``commit`` (the tree that
ran), ``seed``, ``brokers``, ``partitions``, ``seconds``, ``faults`` (``kind:count`` pairs),
``acked`` (acknowledged writes checked), ``anomalies`` (``kind:count`` pairs, empty when
none), ``kept`` (where a failed run's logs and data were kept).  ``totals()`` sums it.
"""
from __future__ import annotations

import csv
import datetime
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LEDGER", "Row", "append", "read", "totals", "table"]

LEDGER = Path(__file__).resolve().parent / "ledger.csv"
FIELDS = ["started", "commit", "seed", "brokers", "partitions", "seconds", "faults", "acked", "anomalies", "kept"]


@dataclass
class Row:
    seed: int
    brokers: int
    partitions: int
    seconds: float
    faults: dict[str, int]
    acked: int
    anomalies: dict[str, int]
    commit: str = ""
    kept: str = ""
    started: str = field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc)
                         .isoformat(timespec="seconds"))

    def as_csv(self) -> dict[str, str]:
        return {"started": self.started, "commit": self.commit, "seed": str(self.seed), "brokers": str(self.brokers),
                "partitions": str(self.partitions), "seconds": f"{self.seconds:.1f}",
                "faults": _pairs(self.faults), "acked": str(self.acked), "anomalies": _pairs(self.anomalies),
                "kept": self.kept}


def _pairs(counts: dict[str, int]) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(counts.items()) if v)


def _unpairs(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in (item.split(":") for item in text.split())} if text else {}


def append(row: Row, path: Path = LEDGER) -> None:
    new = not path.exists()
    with open(path, "a", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        writer.writerow(row.as_csv())


def read(path: Path = LEDGER) -> list[Row]:
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        return [Row(seed=int(r["seed"]), brokers=int(r["brokers"]), partitions=int(r["partitions"]),
                    seconds=float(r["seconds"]), faults=_unpairs(r["faults"]), acked=int(r["acked"]),
                    anomalies=_unpairs(r["anomalies"]), commit=r["commit"], kept=r["kept"], started=r["started"])
                for r in csv.DictReader(handle)]


def totals(rows: list[Row]) -> tuple[int, int, int, dict[str, int]]:
    """(runs, runs with anomalies, acknowledged writes checked, faults by kind)."""
    faults: dict[str, int] = {}
    for row in rows:
        for kind, count in row.faults.items():
            faults[kind] = faults.get(kind, 0) + count
    return len(rows), sum(1 for r in rows if r.anomalies), sum(r.acked for r in rows), faults


def table(rows: list[Row]) -> str:
    lines = [f"{'seed':>8} {'brokers':>7} {'secs':>6} {'acked':>6}  {'anomalies':<24} faults"]
    for r in rows:
        lines.append(f"{r.seed:>8} {r.brokers:>7} {r.seconds:>6.1f} {r.acked:>6}  {_pairs(r.anomalies) or '-':<24} "
                     f"{_pairs(r.faults)}")
    return "\n".join(lines)
