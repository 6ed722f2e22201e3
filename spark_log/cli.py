"""The ``spark-log`` command line.

    spark-log broker --config FILE            run one node in the foreground (SIGTERM stops it)
    spark-log dev up [--brokers 3] [--data-dir .spark-log] [--tls [--mtls] [--sasl] [--authorizer]] [--[no-]progress]
                                              start the local cluster (optionally secured)
    spark-log dev status | dev down           inspect / stop it (data survives down/up)
    spark-log topics create NAME [--partitions N] [--replication-factor R] [--config k=v ...]
                            [--typed [--key-columns a,b]]   typed: schema set by the first write
    spark-log topics list | describe NAME [--json] | delete NAME
    spark-log topics describe --under-replicated [NAME] [--json]   under-replicated/offline partitions
    spark-log produce TOPIC [--key-separator SEP]         one record per stdin line (its bytes as they are)
    spark-log produce TOPIC --file data.parquet|.csv|.jsonl [--key-column C] [--[no-]progress]
    spark-log consume TOPIC [--from-beginning] [--partition P --offset O] [--max-records N]
                            [--timeout-ms T] [--group G] [--format text|table|json|csv]
                                              --group: a member of G (commits as it goes)
    spark-log groups list | describe G [--json] | delete G | delete-offsets G --topic T
    spark-log groups reset-offsets G --topic T (--to-earliest|--to-latest|--to-datetime D|--shift-by N|
                            --to-offset N) [--execute]    consumer groups (kafka-consumer-groups.sh style)
    spark-log topics reassign --topic T --partition P (--replicas 2,3,4 [--wait] | --cancel) | --list
    spark-log topics elect-leaders [--topic T [--partition P ...]]   preferred leaders back
    spark-log topics compact NAME [--partition P ...] [--wait [--timeout-ms MS]] [--json]
    spark-log topics tier NAME [--wait [--timeout-ms MS]] [--engine local|spark]
    spark-log console [--port 8080] [--host 127.0.0.1]   the web console (spark_log/console.py)
    spark-log cluster quorum [--replication] [--json]     the metadata quorum's Raft state (_cli_quorum.py)
    spark-log users add|list|delete, acls add|list|remove, quotas alter|describe, whoami
                                              security (see _cli_security.py)

Clients find the cluster through ``--bootstrap``, else ``SPARK_LOG_BOOTSTRAP``, else the
local cluster's ``bootstrap`` file; their TLS and credentials through ``--command-config
FILE`` (Kafka's client.properties names), else ``SPARK_LOG_CLIENT_CONFIG``, else the
secured dev cluster's ``client.properties``.  Typed topics take and print rows as JSON objects.
Errors print one line (``spark-log: ...``) and exit with code 1; no tracebacks.

The node and the launcher live in ``brokers``, which ``spark_log`` must not import, so
``broker`` and ``dev`` run them as ``python -m`` modules of the same interpreter.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Sequence

from .errors import InvalidConfigError, SparkLogError

if TYPE_CHECKING:  # the commands import the clients lazily (a fast `spark-log --help`)
    from concurrent.futures import Future

    from ._admin import Admin

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spark-log", description="A Spark-native streaming log.")
    parser.add_argument("--bootstrap", help="host:port[,host:port...] of brokers")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client security settings (Kafka client.properties: security.protocol, ssl.*, sasl.*)")
    commands = parser.add_subparsers(dest="command", required=True)

    broker = commands.add_parser("broker", help="run one broker node in the foreground")
    broker.add_argument("--config", required=True, help="BrokerConfig TOML file")

    dev = commands.add_parser("dev", help="the embedded local cluster")
    dev.add_argument("action", choices=["up", "status", "down"])
    dev.add_argument("--brokers", type=int, default=3)
    dev.add_argument("--data-dir", default=None, help="default: $SPARK_LOG_DATA_DIR or .spark-log")
    dev.add_argument("--tls", action="store_true", help="TLS on every listener and link (a local CA is made)")
    dev.add_argument("--mtls", action="store_true", help="with --tls: require client certificates")
    dev.add_argument("--sasl", action="store_true", help="with --tls: SCRAM-SHA-256 authentication (SASL_SSL)")
    dev.add_argument("--authorizer", action="store_true", help="with --tls: ACLs on, deny by default")
    dev.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="up: a progress bar on stderr (default: on a terminal)")

    hosted = commands.add_parser(
        "spark-cluster", help="brokers hosted on a Spark cluster (start|stop|status; see python -m jobs.spark_cluster -h)",
        add_help=False)
    hosted.add_argument("args", nargs=argparse.REMAINDER)

    topics = commands.add_parser("topics", help="create, list, describe, delete topics")
    actions = topics.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, default=None,
                        help="default: the broker's default_partitions (1 unless configured)")
    create.add_argument("--replication-factor", type=int, default=None,
                        help="default: the broker's default_replication_factor (1 unless configured)")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    create.add_argument("--typed", action="store_true",
                        help="a typed topic without a schema yet: the first Spark write (or register_schema) sets it")
    create.add_argument("--key-columns", default=None, metavar="A,B", help="typed topics: columns hashed to partition")
    actions.add_parser("list")
    describe = actions.add_parser("describe", help="a topic's partitions: leader, ISR, HW, log end offsets")
    describe.add_argument("name", nargs="?", help="the topic (with --under-replicated: optional, default all)")
    describe.add_argument("--under-replicated", action="store_true",
                          help="only partitions that are under-replicated or offline, across all topics")
    describe.add_argument("--json", action="store_true", help="print JSON instead of a table")
    delete = actions.add_parser("delete")
    delete.add_argument("name")
    from . import _cli_reassign

    _cli_reassign.add_parsers(actions)  # topics reassign, topics elect-leaders
    from . import _cli_compact

    _cli_compact.add_parsers(actions)  # topics compact
    from . import _cli_tier

    _cli_tier.add_parsers(actions)  # topics tier

    produce = commands.add_parser("produce", help="send stdin lines (bytes as they are, less the \\n or \\r\\n) or "
                                  "the rows of a parquet/csv/jsonl file as records")
    produce.add_argument("topic")
    produce.add_argument("--key-separator", default=None, help="stdin to a bytes topic: split each line into key and "
                         "value at the first SEP (a line without it is refused)")
    produce.add_argument("--file", default=None, help="send the rows of a .parquet, .csv or .jsonl file")
    produce.add_argument("--format", choices=["parquet", "csv", "jsonl"], default=None, help="with --file (default: "
                         "from its suffix)")
    produce.add_argument("--key-column", default=None, help="with --file, bytes topics: the column keying each row")
    produce.add_argument("--chunk-rows", type=int, default=None, help="with --file: rows per send (default 10000)")
    produce.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                         help="a progress bar on stderr (default: when stderr is a terminal)")

    consume = commands.add_parser("consume", help="print records")
    consume.add_argument("topic")
    consume.add_argument("--from-beginning", action="store_true", help="start at the earliest offset (not with --offset)")
    consume.add_argument("--partition", type=int, default=None)
    consume.add_argument("--offset", type=int, default=None, help="with --partition: start at this offset")
    consume.add_argument("--max-records", type=int, default=None)
    consume.add_argument("--timeout-ms", type=int, default=None, help="stop after this long without records")
    consume.add_argument("--print-key", action="store_true")
    consume.add_argument("--group", default=None, help="consume as a member of this consumer group (offsets committed)")
    consume.add_argument("--format", choices=["text", "table", "json", "csv"], default="text",
                         help="text: one value a line, its bytes as they are (default); json: one object a record; "
                         "csv; table (printed at the end). json, csv, table: a key or value that is not UTF-8 is "
                         "base64, marked by key_encoding/value_encoding \"base64\"; typed binary columns: base64")
    from . import _cli_groups

    console = commands.add_parser("console", help="a web console (cluster, topics, records, groups, throughput)")
    console.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080; 0: a free one)")
    console.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    _cli_groups.add_parser(commands)  # groups list|describe|reset-offsets|delete|delete-offsets
    from . import _cli_quorum

    _cli_quorum.add_parser(commands)  # cluster quorum

    from . import _cli_security

    _cli_security.add_parsers(commands)  # users, acls, quotas, whoami
    return parser


def _run_module(module: str, args: list[str], *, replace: bool) -> int:
    argv = [sys.executable, "-m", module, *args]
    if replace:
        os.execv(sys.executable, argv)
    return subprocess.call(argv)


def _topics(args: argparse.Namespace) -> int:
    from ._admin import Admin
    from ._cli_describe import partition_table

    with Admin(args.bootstrap) as admin:
        if args.action == "create":
            config: dict[str, str] = {}
            for item in args.config:
                key, sep, value = item.partition("=")
                if not sep or not key:
                    raise InvalidConfigError(f"--config takes KEY=VALUE, got {item!r}")
                config[key.strip()] = value.strip()
            if args.key_columns is not None and not args.typed:
                raise InvalidConfigError("--key-columns applies to typed topics: add --typed")
            keys = [k.strip() for k in args.key_columns.split(",")] if args.key_columns else None
            created = admin.create_topic(args.name, partitions=args.partitions,
                                         replication_factor=args.replication_factor, config=config,
                                         key_columns=keys, kind="typed" if args.typed else None)
            count = created.num_partitions
            print(f"created {'typed ' if args.typed else ''}topic {created.name} ({count} partition"
                  f"{'' if count == 1 else 's'}, replication factor {created.replication_factor})")
        elif args.action == "list":
            for name in admin.list_topics():
                print(name)
        elif args.action == "describe" and (args.under_replicated or args.json or args.name is None):
            _describe_partitions(admin, args)
        elif args.action == "describe":
            d = admin.describe_topic(args.name)
            print(f"topic {d.name}  id {d.topic_id}  kind {d.kind}  partitions {d.num_partitions}  "
                  f"replication factor {d.replication_factor}")
            if d.kind == "typed":
                key_note = f"  (keys: {', '.join(d.key_columns)})" if d.key_columns else ""
                if d.schema is None:
                    print("schema: none yet (set by the first write or register_schema)" + key_note)
                else:
                    print("schema: " + ", ".join(f"{f.name}: {f.type}" for f in d.schema) + key_note)
            for line in partition_table([(d.name, p) for _, p in sorted(d.partitions.items())], with_topic=False):
                print("  " + line)
            defaults = _default_topic_config()
            overrides = {k: v for k, v in sorted(d.config.items()) if defaults.get(k) != v}
            print("configs: " + (", ".join(f"{k}={v}" for k, v in overrides.items()) or "(defaults)"))
            if "compact" in d.config.get("cleanup.policy", ""):
                from ._cli_compact import compaction_table

                print("compaction:")
                for line in compaction_table(admin.describe_compaction(d.name), replicas=False):
                    print("  " + line)
            from ._cli_tier import describe_lines

            for line in describe_lines(admin, d.name, d.config):
                print(line)
        else:
            admin.delete_topic(args.name)
            print(f"deleted topic {args.name}")
    return 0


def _describe_partitions(admin: Admin, args: argparse.Namespace) -> None:
    """``describe --under-replicated`` (table or JSON list) and ``describe NAME --json``.
    Exit code 0 whether or not any partition is under-replicated."""
    from ._cli_describe import partition_json, partition_table, topic_json

    if not args.under_replicated:
        if args.name is None:
            raise InvalidConfigError("topics describe needs a topic NAME (or --under-replicated)")
        described = topic_json(admin.describe_topic(args.name))
        if "compact" in str(described["config"].get("cleanup.policy", "")):
            from ._cli_compact import compaction_json

            described["compaction"] = compaction_json(admin.describe_compaction(args.name))
        from ._cli_tier import describe_json

        tier = describe_json(admin, args.name, described["config"])
        if tier is not None:
            described["tier"] = tier
        print(json.dumps(described, indent=1))
        return
    rows = admin.under_replicated_partitions([args.name] if args.name else None)
    if args.json:
        print(json.dumps([partition_json(p, topic) for topic, p in rows], indent=1))
    elif rows:
        print("\n".join(partition_table(rows, with_topic=True)))
    else:
        print("no under-replicated or offline partitions", file=sys.stderr)


def _default_topic_config() -> dict[str, str]:
    from .config import TopicConfig

    return TopicConfig().to_kafka_names()


def _produce_file(args: argparse.Namespace) -> int:
    from . import _cli_io
    from ._producer import Producer

    chunk_rows = _FILE_CHUNK_ROWS if args.chunk_rows is None else args.chunk_rows
    if chunk_rows < 1:
        raise InvalidConfigError("--chunk-rows must be >= 1", key="chunk-rows")
    if args.key_separator is not None:
        raise InvalidConfigError("--key-separator splits stdin lines: a --file's rows name their key (a key column, "
                                 "or --key-column)", key="key-separator")
    table = _cli_io.read_table(args.file, args.format)
    with Producer(args.bootstrap) as producer:
        info = producer._cluster.topic(args.topic)
        if info.kind == "typed" and args.key_column is not None:
            raise InvalidConfigError(f"--key-column applies to bytes topics: typed topic {args.topic!r} is "
                                     "partitioned by its own key columns", key="key-column")
        if info.kind == "typed" and info.schema_id < 0:  # a typed topic's first write sets its schema: the file's
            from ._admin import Admin

            with Admin(args.bootstrap) as admin:
                admin.register_schema(args.topic, table.schema)
            producer._cluster.topic(args.topic, refresh=True)
        rows = table if info.kind == "typed" else _cli_io.bytes_rows(table, args.key_column)
        with _cli_io.progress(f"producing {args.topic}", rows.num_rows, enabled=args.progress) as advance:
            for start in range(0, rows.num_rows, chunk_rows):
                chunk = rows.slice(start, chunk_rows)
                for future in producer.send_batch(args.topic, chunk):
                    future.result()
                advance(chunk.num_rows)
    print(f"sent {rows.num_rows} records to {args.topic}", file=sys.stderr)
    return 0


_FILE_CHUNK_ROWS = 10_000  # produce --file's default --chunk-rows
_STDIN_LINGER_MS = 1000  # as Kafka's console producer
# A chunk of stdin lines that ships at once (bytes): over 1,000
# partitions each batch gets about 4 KiB of it
_STDIN_CHUNK_BYTES = 4 << 20
_STDIN_CHUNK_LINES = 100_000


def _produce(args: argparse.Namespace) -> int:
    from ._producer import Producer

    if args.file is not None:
        return _produce_file(args)
    if args.key_separator == "":
        raise InvalidConfigError("--key-separator must not be empty", key="key-separator")
    for flag, value in (("--format", args.format), ("--key-column", args.key_column), ("--chunk-rows", args.chunk_rows),
                        ("--progress", args.progress)):
        if value is not None:  # refused, not ignored: stdin lines are records as they are (no size known)
            raise InvalidConfigError(f"{flag} applies to --file: stdin lines are sent as they are", key=flag[2:])
    count = 0
    # lines arrive in bulk: a longer linger than the default 5 ms lets each partition's batch
    # fill (keyed lines over 1,000 partitions were one record per frame).  A chunk of lines
    # (_STDIN_CHUNK_LINES or _STDIN_CHUNK_BYTES, whichever comes first) ships at once, not a
    # linger later, and the acknowledgements of the chunk before are awaited while the brokers
    # take this one: one chunk in flight, so the futures kept stay bounded.  EOF flushes.
    with Producer(args.bootstrap, linger_ms=_STDIN_LINGER_MS) as producer:
        info = producer._cluster.topic(args.topic)
        if info.kind == "typed" and args.key_separator is not None:
            raise InvalidConfigError(f"--key-separator applies to bytes topics: typed topic {args.topic!r} takes JSON "
                                     "objects a line, partitioned by its key columns", key="key-separator")
        futures: list["Future[tuple[int, int]]"] = []
        shipped: list["Future[tuple[int, int]]"] = []
        chunk_bytes = 0
        separator = os.fsencode(args.key_separator) if args.key_separator is not None else None
        for line in sys.stdin.buffer:  # bytes: a line that is not UTF-8 is sent as it is
            chunk_bytes += len(line)
            line = _strip_newline(line)
            if info.kind == "typed":
                try:
                    row = json.loads(line)
                except ValueError:
                    raise InvalidConfigError(f"line {count + 1}: a typed topic takes JSON objects, got "
                                             f"{line[:60].decode(errors='replace')!r}") from None
                futures.append(producer.send(args.topic, row))
            else:
                key: bytes | None = None
                value = line
                if separator is not None:
                    key, sep, value = line.partition(separator)
                    if not sep:  # as Kafka's console producer: never sent without the key it was meant to have
                        raise InvalidConfigError(
                            f"line {count + 1} has no key separator {args.key_separator!r}: "
                            f"{line[:60].decode(errors='replace')!r} (the lines before it were sent)",
                            key="key-separator")
                futures.append(producer.send(args.topic, value, key=key))
            count += 1
            if len(futures) >= _STDIN_CHUNK_LINES or chunk_bytes >= _STDIN_CHUNK_BYTES:
                producer._ship_open()
                for future in shipped:
                    future.result()
                shipped, futures, chunk_bytes = futures, [], 0
        producer.flush()
        for future in shipped + futures:
            future.result()
    print(f"sent {count} records to {args.topic}", file=sys.stderr)
    return 0


def _strip_newline(line: bytes) -> bytes:
    """``line`` without its terminator: ``\\n`` or ``\\r\\n`` (a text file's lines)."""
    if line.endswith(b"\n"):
        line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
    return line


def _consume(args: argparse.Namespace) -> int:
    from ._cli_io import RecordWriter
    from ._consumer import Consumer

    if (args.partition is None) != (args.offset is None) and args.offset is not None:
        raise InvalidConfigError("--offset needs --partition")
    if args.group is not None and args.partition is not None:
        raise InvalidConfigError("--group takes the partitions the group assigns: drop --partition/--offset")
    if args.max_records is not None and args.max_records < 1:
        raise InvalidConfigError(f"--max-records must be >= 1, got {args.max_records}", key="max-records")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise InvalidConfigError(f"--timeout-ms must be >= 0, got {args.timeout_ms}", key="timeout-ms")
    if args.from_beginning and args.offset is not None:  # as Kafka's console consumer
        raise InvalidConfigError("--from-beginning and --offset cannot be given together: each says where to start",
                                 key="offset")
    # --group commits what it printed, after printing it (at-least-once), not what poll returned
    with Consumer(args.bootstrap, auto_offset_reset="earliest" if args.from_beginning else "latest",
                  group_id=args.group, enable_auto_commit=False if args.group is not None else None) as consumer:
        info = consumer._cluster.topic(args.topic)
        if args.group is not None:  # the group's committed offsets, else --from-beginning / latest
            consumer.subscribe([args.topic])
        else:
            partitions = [args.partition] if args.partition is not None else sorted(info.partitions)
            consumer.assign([(args.topic, p) for p in partitions])
        if args.offset is not None:
            consumer.seek(args.topic, args.partition, args.offset)
        elif args.from_beginning and args.group is None:
            consumer.seek_to_beginning()
        seen = 0
        last_data = time.monotonic()
        sys.stdout.flush()
        out = RecordWriter(args.format, sys.stdout.buffer, print_key=args.print_key)  # bytes as they are
        while args.max_records is None or seen < args.max_records:
            records = consumer.poll(0.5)
            if records:
                last_data = time.monotonic()
            elif args.timeout_ms is not None and (time.monotonic() - last_data) * 1000 >= args.timeout_ms:
                break
            printed: dict[tuple[str, int], int] = {}
            for record in records:
                if args.max_records is not None and seen >= args.max_records:
                    break
                out.write(record)
                printed[(record.topic, record.partition)] = record.offset + 1
                seen += 1
            out.flush()
            if args.group is not None and printed:
                consumer.commit(printed)
        out.close()
    print(f"consumed {seen} records", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["spark-cluster"]:  # every flag belongs to the hosting application's own CLI
        return _run_module("jobs.spark_cluster", argv[1:], replace=False)
    args = _parser().parse_args(argv)
    if not args.command_config:
        return _dispatch(args)
    # The clients find --command-config through the environment; it is set for this command
    # only, so that main() called in-process (tests, notebooks) leaves no client behind that
    # would speak TLS to a plain cluster later.
    previous = os.environ.get("SPARK_LOG_CLIENT_CONFIG")
    try:
        from .security import ClientSecurity

        ClientSecurity.from_file(args.command_config)  # refused here, by name, if wrong
        os.environ["SPARK_LOG_CLIENT_CONFIG"] = os.path.abspath(args.command_config)
        return _dispatch(args)
    except SparkLogError as exc:
        print(f"spark-log: {exc}", file=sys.stderr)
        return 1
    finally:
        if previous is None:
            os.environ.pop("SPARK_LOG_CLIENT_CONFIG", None)
        else:
            os.environ["SPARK_LOG_CLIENT_CONFIG"] = previous


def _dispatch(args: argparse.Namespace) -> int:
    try:
        if args.command == "broker":
            return _run_module("brokers.node", ["--config", args.config], replace=True)
        if args.command == "dev":
            extra = ["--brokers", str(args.brokers)]
            if args.data_dir:
                extra += ["--data-dir", args.data_dir]
            extra += [f"--{flag}" for flag in ("tls", "mtls", "sasl", "authorizer") if getattr(args, flag)]
            if args.progress is not None:
                extra.append("--progress" if args.progress else "--no-progress")
            return _run_module("brokers.launcher.local", [args.action, *extra], replace=False)
        if args.command == "topics":
            from . import _cli_compact, _cli_reassign, _cli_tier

            if args.action in _cli_compact.ACTIONS:
                return _cli_compact.run(args)
            if args.action in _cli_tier.ACTIONS:
                return _cli_tier.run(args)
            return _cli_reassign.run(args) if args.action in _cli_reassign.ACTIONS else _topics(args)
        if args.command == "produce":
            return _produce(args)
        if args.command == "console":
            from .console import serve

            return serve(args.bootstrap, host=args.host, port=args.port)
        if args.command in ("users", "acls", "quotas", "whoami"):
            from . import _cli_security

            return _cli_security.run(args)
        if args.command == "groups":
            from . import _cli_groups

            return _cli_groups.run(args)
        if args.command == "cluster":
            from . import _cli_quorum

            return _cli_quorum.run(args)
        return _consume(args)
    except SparkLogError as exc:
        print(f"spark-log: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
