"""The JVM read path alone against Spark's parquet source, with switches of the JVM reader
flipped per query in one session (A/B on the same data, the same JVM, the same load).

    python -m bench.jvm_read_ab [--rows N] [--rounds R] [--bootstrap HOST:PORT,...]
                                [--modes jvm,jvm-kv,parquet,parquet-all,floor,...] [--variant NAME:PROP=VALUE,...]

The read shapes of ``bench.connector_bench`` (``setup_read``/``read_sides``: a 2-partition
bytes topic against 4 parquet files, 2 AvailableNow triggers of N/2 rows), without its
Python-connector, ceiling and write sides, so a run takes about a minute.  Modes:
``jvm``, ``jvm-noprefetch`` (the reader's ``spark-log.noPrefetch`` system property, set in
the driver's JVM, which runs the tasks in local mode), ``jvm-kv`` (the topic's key and value
columns only, as the parquet files hold), ``parquet-all`` (parquet files of all 7 columns a
reader of the topic gets), ``parquet`` and ``floor``: Spark's own
``rate-micro-batch`` source into ``noop`` with the same trigger shape (N/2 rows in 2 tasks a
trigger; processing-time triggers, its first 2 timed), a micro-batch source with next to no
read work, so what any DSv2 source pays per trigger in this session (planning, the offset and
commit log writes, the job) -- the most a faster JVM reader could approach.  Round 0 is a warm-up;
the order of the modes rotates each round.  ``--variant NAME:PROP=VALUE[,PROP=VALUE]``
(repeatable) adds a JVM mode that runs with those system properties set in the driver's JVM
(e.g. ``--variant big:spark-log.fetchMaxBytes=16777216`` against the default).  Prints rows/s per mode, the ratio to parquet
and the median milliseconds of each trigger phase.  ``SPARK_LOG_JVM_PROFILE=1`` makes every
JVM task print where its time went (stderr).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import connector_bench as cb

# modes that are sides of their own (any other mode: the JVM side with its system properties)
_SIDES = {"jvm": "spark-log-jvm", "jvm-kv": "spark-log-jvm key,value", "parquet": "parquet",
          "parquet-all": "parquet all columns", "floor": "floor"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bootstrap", default=os.environ.get("SPARK_LOG_BOOTSTRAP"))
    parser.add_argument("--modes", default="jvm,jvm-noprefetch,parquet")
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME:PROP=VALUE[,PROP=VALUE]: a JVM mode with these system properties (repeatable)")
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    if "parquet" not in modes or not set(modes) <= set(_SIDES) | {"jvm-noprefetch"}:
        parser.error(f"--modes: some of {', '.join(sorted(set(_SIDES) | {'jvm-noprefetch'}))}, with parquet")
    props: dict[str, dict[str, str]] = {"jvm-noprefetch": {"spark-log.noPrefetch": "true"}}
    for spec in args.variant:
        name, _, pairs = spec.partition(":")
        if not name or name in modes or not pairs or any("=" not in p for p in pairs.split(",")):
            parser.error(f"--variant {spec!r}: NAME:PROP=VALUE[,PROP=VALUE] with a new NAME")
        props[name] = dict(p.split("=", 1) for p in pairs.split(","))
        modes.append(name)
    every_prop = {k for p in props.values() for k in p}
    if cb.jvm_jar() is None:
        raise SystemExit("the JVM connector jar was not built (make install needs a JDK)")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from connectors.session import local_session, unregistered_jvm_jar

    with tempfile.TemporaryDirectory(prefix="jvm-read-ab-") as tmp:
        root = Path(tmp)
        clusters = cb._cluster(args.bootstrap, root)
        bootstrap = next(clusters)
        try:
            spark = local_session(bootstrap, app_name="jvm-read-ab", connector="python",
                                  conf={"spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false",
                                        "spark.jars": unregistered_jvm_jar(str(root))})
            spark.sparkContext.setLogLevel("ERROR")
            system = spark._jvm.java.lang.System  # type: ignore[attr-defined]
            try:
                topic, files, all_files = cb.setup_read(spark, bootstrap, root, args.rows)
                sides = cb.read_sides(spark, bootstrap, topic, files, all_files, args.rows)
                sides["floor"] = lambda ck: cb._until_batches(
                    spark.readStream.format("rate-micro-batch").option("rowsPerBatch", str(args.rows // 2))
                    .option("numPartitions", "2").load(), "noop", ck, 2)
                tallies: dict[str, cb.Tally] = {}
                phases: dict[str, list[dict[str, int]]] = {}
                started, load = time.monotonic(), os.getloadavg()[0]
                for round_ in range(args.rounds + 1):
                    for name in cb._rotated(modes, round_):
                        for key in every_prop:
                            value = props.get(name, {}).get(key)
                            if value is None:
                                system.clearProperty(key)
                            else:
                                system.setProperty(key, value)
                        query = sides[_SIDES.get(name, "spark-log-jvm")](root / f"ck-{name}-{round_}")
                        got, millis, each = cb._timed(query, 2)
                        if got != args.rows:
                            cb._fail(f"{name} delivered {got} rows, expected {args.rows}")
                        if round_:
                            tallies.setdefault(name, cb.Tally()).add(got, millis, each)
                            phases.setdefault(name, []).extend([p["durationMs"] for p in query.recentProgress
                                                                if p["numInputRows"]][:2])
            finally:
                for key in every_prop:
                    system.clearProperty(key)
                spark.stop()
        finally:
            clusters.close()
    print(f"JVM read A/B ({args.rows} rows, {args.rounds} rounds after 1 warm-up, {time.monotonic() - started:.0f} s; "
          f"load average {load:.1f} at start, {os.getloadavg()[0]:.1f} at end)")
    base = tallies["parquet"]
    for name, t in tallies.items():
        rounds = " ".join(f"{a / b:.2f}" for a, b in zip(t.rounds, base.rounds))
        print(f"  {name:15} {t.rate:10,.0f} rows/s  vs parquet {t.rate / base.rate:5.2f}x (rounds {rounds}; "
              f"median trigger {t.median_rate / base.median_rate:4.2f}x)")
    for name, each in phases.items():
        keys = sorted({k for d in each for k in d})
        print(f"  {name:15} median ms: " + " ".join(f"{k}={statistics.median(d.get(k, 0) for d in each):.0f}" for k in keys))


if __name__ == "__main__":
    main()
