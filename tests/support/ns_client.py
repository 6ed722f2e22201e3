"""A writer client process for tests whose clients live in their own network namespace.

``python -m tests.support.ns_client BOOTSTRAP TOPIC PREFIX OUT [--partition P] [--keys K]``:
one acks=all producer (``AckedWriter``'s loop: rounds of ``--batch`` sends) writing
``PREFIX<n>`` until SIGTERM, appending one JSON line per outcome to ``OUT`` as it happens
(``{"value", "ok", "partition", "offset", "definite", "index", "t"}``, ``t`` in monotonic
seconds of this host), so the test reads the history even if the process is killed.
``read_history(OUT, producer)`` turns the file back into ``log_history.Send`` ops.
"""
from __future__ import annotations

import argparse
import itertools
import json
import signal
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from brokers.net.stop_signal import on_stop_signals
from tests.checkers.log_history import Send

__all__ = ["read_history", "main"]


def read_history(path: Path, producer: str) -> list[Send]:
    ops: list[Send] = []
    if not path.exists():
        return ops
    for line in path.read_text().splitlines():
        if not line.endswith("}"):
            continue  # a line cut by a kill
        row = json.loads(line)
        ops.append(Send(row["partition"], row["value"].encode(), row["ok"], row["offset"], row["definite"],
                        producer=producer, index=row["index"]))
    return ops


def read_times(path: Path) -> list[tuple[float, bool]]:
    """``(t, ok)`` of every outcome, in the order they happened."""
    return [(row["t"], row["ok"]) for row in (json.loads(line) for line in path.read_text().splitlines()
                                              if line.endswith("}"))]


def main(argv: list[str] | None = None) -> int:
    from spark_log import Producer
    from spark_log.errors import SparkLogError

    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("prefix")
    parser.add_argument("out")
    parser.add_argument("--partition", type=int, default=None)
    parser.add_argument("--keys", type=int, default=7)
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--pause", type=float, default=0.05)
    parser.add_argument("--delivery-timeout-ms", type=int, default=8000)
    args = parser.parse_args(argv)
    stop = threading.Event()
    on_stop_signals(stop.set, (signal.SIGTERM,))
    counter = itertools.count()
    with open(args.out, "a") as out, Producer(args.bootstrap, acks="all", linger_ms=2, request_timeout_ms=3000,
                                              delivery_timeout_ms=args.delivery_timeout_ms) as producer:
        while not stop.wait(args.pause):
            sent: list[tuple[int, str, Future[Any], bool]] = []
            for _ in range(args.batch):
                n = next(counter)
                value = f"{args.prefix}{n}"
                key = None if args.partition is not None else f"key-{n % args.keys}".encode()
                refused = False
                try:
                    future = producer.send(args.topic, value.encode(), key=key, partition=args.partition)
                except SparkLogError as exc:   # e.g. metadata unreachable right now: never sent
                    future, refused = Future(), True
                    future.set_exception(exc)
                sent.append((n, value, future, refused))
            for n, value, future, refused in sent:
                row: dict[str, Any] = {"value": value, "index": n}
                try:
                    partition, offset = future.result(timeout=60)
                    row.update(ok=True, partition=partition, offset=offset, definite=True)
                except SparkLogError as exc:
                    definite = refused or not exc.maybe_written
                    row.update(ok=False, partition=args.partition, offset=None, definite=definite)
                except TimeoutError:
                    row.update(ok=False, partition=args.partition, offset=None, definite=False)
                row["t"] = time.monotonic()
                out.write(json.dumps(row) + "\n")
                out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
