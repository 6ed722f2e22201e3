"""One consumer-group member as its own process (tests/fault/test_group_failover.py).

    python -m tests.fault.group_member --bootstrap B --group G --topic T --out FILE
        [--instance ID] [--session-ms 3000]

It subscribes to ``T`` in group ``G`` and loops: poll, *process* (append one JSON line per
poll to ``FILE`` and flush it to the kernel, so a kill -9 keeps it), then commit what it
processed (commit-after-processing: at-least-once).  It also writes a line whenever what it
owns changes.  Lines:

    {"owned": [[topic, p], ...], "epoch": E, "t": monotonic}   after every ownership change
    {"poll": [[p, offset, value_hex], ...], "fresh": [p, ...]}  records of one poll; ``fresh``:
                                                               partitions (re)assigned since
                                                               the last poll (a new start)
    {"member_id": ID}                                          first
    {"fenced": message}                                        a commit was refused (it rejoins)
    {"closed": true}                                           after a clean close (SIGTERM)
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from typing import Any

from brokers.net.stop_signal import on_stop_signals
from spark_log import Consumer
from spark_log.errors import FencedMemberEpochError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--instance", default=None)
    parser.add_argument("--session-ms", type=int, default=3000)
    args = parser.parse_args(argv)
    stop = threading.Event()
    on_stop_signals(stop.set, (signal.SIGTERM,))
    out = open(args.out, "a", buffering=1)
    fresh: set[int] = set()

    def write(entry: dict[str, object]) -> None:
        out.write(json.dumps(entry) + "\n")
        out.flush()

    consumer = Consumer(args.bootstrap, group_id=args.group, group_instance_id=args.instance,
                        session_timeout_ms=args.session_ms, auto_offset_reset="earliest", enable_auto_commit=False,
                        max_poll_records=200)

    def report() -> None:
        write({"owned": sorted(consumer.assignment()), "epoch": consumer._group.membership.epoch,  # type: ignore[union-attr]
               "t": time.monotonic()})

    def on_assigned(partitions: list[tuple[str, int]]) -> None:
        fresh.update(p for _, p in partitions)

    consumer.subscribe([args.topic], on_assigned=on_assigned, on_revoked=lambda _: None)
    write({"member_id": consumer._group.membership.member_id})  # type: ignore[union-attr]
    owned = None
    try:
        while not stop.is_set():
            batches = consumer.poll_arrow(0.2)
            if sorted(consumer.assignment()) != owned:
                owned = sorted(consumer.assignment())
                report()
            rows: list[list[Any]] = []
            done: dict[tuple[str, int], int] = {}
            for batch in batches:
                partitions = batch.column("partition").to_pylist()
                offsets = batch.column("offset").to_pylist()
                values = batch.column("value").to_pylist()
                for p, o, v in zip(partitions, offsets, values):
                    assert p is not None and o is not None and v is not None  # non-null columns
                    rows.append([p, o, v.hex()])
                    done[(args.topic, p)] = o + 1
            if rows:
                write({"poll": rows, "fresh": sorted(fresh & {r[0] for r in rows})})
                fresh.difference_update(r[0] for r in rows)
                try:
                    consumer.commit(done)  # after processing: at-least-once
                except FencedMemberEpochError as exc:  # the next poll drops everything and rejoins
                    write({"fenced": str(exc)})
    finally:
        if stop.is_set():
            consumer.close()
            write({"closed": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
