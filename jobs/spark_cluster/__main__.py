"""``python -m jobs.spark_cluster start|stop|status|run``: brokers hosted on a Spark cluster.

    python -m jobs.spark_cluster start --master URL --brokers N [--data-dir PATH]
                                       [--controllers K | --controller-quorum ID@HOST:PORT,...]
                                       [--driver-host H] [--conf k=v ...] [--broker-config k=v ...]
                                       [--timeout S]
    python -m jobs.spark_cluster status [--data-dir PATH]
    python -m jobs.spark_cluster stop   [--data-dir PATH] [--timeout S]
    python -m jobs.spark_cluster run    ...start's flags...   (the application, in the foreground)

``start`` prints the bootstrap ("host:port,...") on stdout and exits 0 once every broker
is registered and unfenced.  ``status`` prints one line per broker and exits 0 when the
cluster is ready, 1 otherwise.  ``stop`` exits 0 (also when nothing was running).  Errors
print one line (``spark-log: ...``) on stderr and exit 1.  ``--data-dir`` defaults to
``$SPARK_LOG_DATA_DIR`` or ``.spark-log-spark`` and is made absolute: the same path is used
on every executor host.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _pairs(items: list[str], flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} expects key=value, got {item!r}")
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out


def _driver_host(master: str) -> str:
    if os.environ.get("SPARK_LOCAL_IP"):
        return os.environ["SPARK_LOCAL_IP"]
    if master.startswith("local"):
        return "127.0.0.1"
    from .broker_host import advertised_host

    host = master.split("://", 1)[-1].split(",")[0].rpartition(":")[0] or "127.0.0.1"
    return advertised_host(host)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.spark_cluster",
                                     description="spark-log brokers hosted by a long-running Spark application.")
    commands = parser.add_subparsers(dest="command", required=True)
    default_dir = os.environ.get("SPARK_LOG_DATA_DIR") or ".spark-log-spark"
    for name in ("start", "run"):
        sub = commands.add_parser(name)
        sub.add_argument("--master", required=True, help="Spark master URL, e.g. spark://host:7077")
        sub.add_argument("--brokers", type=int, required=True, help="number of brokers (one Spark task each)")
        sub.add_argument("--data-dir", default=default_dir)
        sub.add_argument("--controllers", type=int, default=3, help="controller processes on the driver host")
        sub.add_argument("--controller-quorum", default="", help="use these voters (id@host:port,...) instead")
        sub.add_argument("--driver-host", default=None, help="address of this host as executors reach it")
        sub.add_argument("--conf", action="append", default=[], help="Spark conf key=value (repeatable)")
        sub.add_argument("--broker-config", action="append", default=[], help="BrokerConfig key=value for brokers")
        sub.add_argument("--controller-config", action="append", default=[], help="BrokerConfig key=value for controllers")
        sub.add_argument("--timeout", type=float, default=180.0, help="start: seconds to wait for ready")
    for name in ("stop", "status"):
        sub = commands.add_parser(name)
        sub.add_argument("--data-dir", default=default_dir)
        sub.add_argument("--timeout", type=float, default=60.0)
    return parser


def _run(args: argparse.Namespace, root: Path) -> int:
    from brokers.net.stop_signal import on_stop_signals

    from .application import HostingConfig, run_application

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = HostingConfig(
        master=args.master, brokers=args.brokers, data_dir=str(root), controllers=args.controllers,
        controller_quorum=tuple(v for v in args.controller_quorum.split(",") if v),
        driver_host=args.driver_host or _driver_host(args.master),
        broker_config=_pairs(args.broker_config, "--broker-config"),
        controller_config=_pairs(args.controller_config, "--controller-config"),
        spark_conf={k: str(v) for k, v in _pairs(args.conf, "--conf").items()},
    )
    stop = threading.Event()
    on_stop_signals(stop.set)
    code = run_application(config, stop=stop)
    # the stop is bounded (HostingConfig.stop_timeout_s); the interpreter's teardown (the
    # JVM gateway, non-daemon threads) is not: exit now, as brokers.node does
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    root = Path(args.data_dir).expanduser().resolve()
    from . import control

    try:
        if args.command == "run":
            return _run(args, root)
        if args.command == "start":
            passthrough = [a for a in (argv if argv is not None else sys.argv[1:])[1:]]
            run_args = _strip_option(passthrough, "--data-dir")
            run_args = _strip_option(run_args, "--timeout")
            print(f"starting the hosting application ({args.master}, {args.brokers} brokers) in {root} ...",
                  file=sys.stderr)
            print(control.start(root, run_args, timeout_s=args.timeout))
            return 0
        if args.command == "stop":
            was = control.stop(root, timeout_s=args.timeout)
            print("stopped" if was else "not running", file=sys.stderr)
            return 0
        current = control.status(root)
        print(f"state {current.state}  app pid {current.app_pid or '-'}  voters {','.join(current.voters) or '-'}")
        for broker_id in range(1, current.expected + 1):
            address, fenced = current.brokers.get(broker_id, ("-", True))
            state = "absent" if broker_id not in current.brokers else ("fenced" if fenced else "live")
            print(f"broker {broker_id}  {address}  {state}")
        if current.error:
            print(f"error {current.error}")
        return 0 if current.healthy else 1
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"spark-log: {exc}", file=sys.stderr)
        return 1


def _strip_option(args: list[str], name: str) -> list[str]:
    """``args`` without ``name VALUE`` / ``name=VALUE``."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(name + "="):
            out.append(arg)
    return out


if __name__ == "__main__":
    sys.exit(main())
