"""``spark-log console [--port P]``: a small web console over the admin client (issue 18).

A stdlib ``ThreadingHTTPServer`` serves one page (``console_static/index.html``: HTML and
plain JavaScript, no build step, no outside assets) and JSON endpoints, each answered with
the existing clients:

    GET  /api/cluster            brokers (id, address, rack, fenced), controller, metadata offset,
                                 and the Raft state of the metadata quorum (``Admin.describe_quorum``:
                                 leader, epoch, high watermark, each voter's and observer's role,
                                 log end offset and lag); ``quorum_error`` instead when it cannot
                                 be had (no DESCRIBE on the cluster, no leader): the rest still shows
    GET  /api/topics             topics, partitions (leader, replicas, ISR, HW, LEO, records),
                                 under-replicated and offline ones first
    GET  /api/records?topic=T&partition=P&offset=O&limit=N
    GET  /api/records?topic=T&partition=P&time=MS|ISO-8601&limit=N
                                 records from an offset, or from the first record whose
                                 timestamp is at or after a time (ms since the epoch, or an
                                 ISO-8601 time, UTC unless it names its offset; ListOffsets
                                 by time); typed topics: their columns
    GET  /api/groups             groups with state, members and lag per partition
    GET  /api/throughput         each topic's summed high watermark now (the page charts the rate)
    POST /api/topics             {"name", "partitions", "replication_factor", "config"}: create
    POST /api/config             {"topic", "set": {key: value}}: alter a topic's config
    POST /api/reset-offsets      {"group", "topic", "to": "earliest"|"latest"}: reset a group

The page asks for confirmation before each POST.  Errors come back as ``{"error": "..."}``
with status 400 (a ``SparkLogError``: an authorization refusal among them) and are shown on
the page.  POSTs must be JSON (``Content-Type: application/json``), which a cross-site form
cannot send.  Binds 127.0.0.1 by default.

Security.  Every client the console opens (its ``Admin``, a ``Consumer`` per records page)
uses ``security`` (a ``ClientSecurity``), else the usual resolution
(``spark_log._client.resolve_security``): ``spark-log --command-config FILE console`` reads
the Kafka-style client properties file as every other command does.  The console acts with
that principal's rights (its ACLs decide what it may see and change); the page itself has no
login, so a console holding a privileged principal's credentials must stay on a loopback
address (the default) or behind an authenticating proxy.
"""
from __future__ import annotations

import collections
import datetime as dt
import json
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import parse_qs, urlparse

from .errors import InvalidRequestError, RequestTimeoutError, SparkLogError, UnknownTopicOrPartitionError

if TYPE_CHECKING:
    from .security import ClientSecurity

__all__ = ["ConsoleServer", "serve"]

_PAGE = Path(__file__).with_name("console_static") / "index.html"
_MAX_RECORDS = 500
_READ_TIMEOUT_S = 15.0
_QUORUM_TIMEOUT_MS = 5_000


def parse_time_ms(text: str) -> int:
    """Milliseconds since the epoch from ``text``: an integer (ms) or an ISO-8601 time (UTC
    unless it names its offset); ``InvalidRequestError`` otherwise."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        value = int(text)
    else:
        try:
            when = dt.datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
        except ValueError:
            raise InvalidRequestError(f"time must be milliseconds since the epoch or an ISO-8601 time, got {text!r}") \
                from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        value = int(when.timestamp() * 1000)
    if value < 0:
        raise InvalidRequestError(f"time must not be before 1970, got {text!r}")
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


class ConsoleServer:
    """The console's HTTP server; ``start()`` serves on a thread, ``url`` says where."""

    def __init__(self, bootstrap: str | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 security: "ClientSecurity | None" = None) -> None:
        from ._admin import Admin

        self.bootstrap = bootstrap
        self.security = security
        self.admin = Admin(bootstrap, security=security)
        # the cluster page's Raft state: a short timeout, so that an election or a refusal
        # shows as a note on the page instead of holding it for the whole request timeout
        self.quorum_admin = Admin(bootstrap, security=security, request_timeout_ms=_QUORUM_TIMEOUT_MS)
        #: the last requests answered (monotonic time, method, path, status, milliseconds): what a
        #: failing browser test prints beside the page source and the browser's console log
        self.requests: collections.deque[tuple[float, str, str, int, float]] = collections.deque(maxlen=200)
        console = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                console._handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                console._handle(self, "POST")

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}/"
        self._thread: threading.Thread | None = None
        self._routes: dict[tuple[str, str], Callable[[dict[str, list[str]], Any], Any]] = {
            ("GET", "/api/cluster"): lambda q, b: self.cluster(),
            ("GET", "/api/topics"): lambda q, b: self.topics(),
            ("GET", "/api/records"): lambda q, b: self.records(q),
            ("GET", "/api/groups"): lambda q, b: self.groups(),
            ("GET", "/api/throughput"): lambda q, b: self.throughput(),
            ("POST", "/api/topics"): lambda q, b: self.create_topic(b),
            ("POST", "/api/config"): lambda q, b: self.alter_config(b),
            ("POST", "/api/reset-offsets"): lambda q, b: self.reset_offsets(b),
        }

    def start(self) -> "ConsoleServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="console-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.admin.close()
        self.quorum_admin.close()

    def __enter__(self) -> "ConsoleServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP ------------------------------------------------------------------------------

    def _handle(self, request: BaseHTTPRequestHandler, method: str) -> None:
        started = time.monotonic()
        status = self._answer(request, method)
        self.requests.append((started, method, request.path, int(status), (time.monotonic() - started) * 1000))

    def _answer(self, request: BaseHTTPRequestHandler, method: str) -> HTTPStatus:
        parsed = urlparse(request.path)
        if method == "GET" and parsed.path in ("/", "/index.html"):
            self._send(request, HTTPStatus.OK, _PAGE.read_bytes(), "text/html; charset=utf-8")
            return HTTPStatus.OK
        route = self._routes.get((method, parsed.path))
        if route is None:
            self._json(request, HTTPStatus.NOT_FOUND, {"error": f"no such endpoint: {method} {parsed.path}"})
            return HTTPStatus.NOT_FOUND
        try:
            body: Any = None
            if method == "POST":
                if request.headers.get_content_type() != "application/json":
                    raise InvalidRequestError("POST bodies must be JSON (Content-Type: application/json)")
                length = int(request.headers.get("Content-Length") or 0)
                body = json.loads(request.rfile.read(length) or b"{}")
                if not isinstance(body, dict):
                    raise InvalidRequestError("the body must be a JSON object")
            answer = route(parse_qs(parsed.query), body)
        except (SparkLogError, ValueError, KeyError) as exc:
            self._json(request, HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return HTTPStatus.BAD_REQUEST
        self._json(request, HTTPStatus.OK, answer)
        return HTTPStatus.OK

    def _json(self, request: BaseHTTPRequestHandler, status: HTTPStatus, value: Any) -> None:
        self._send(request, status, json.dumps(_jsonable(value)).encode(), "application/json")

    @staticmethod
    def _send(request: BaseHTTPRequestHandler, status: HTTPStatus, data: bytes, kind: str) -> None:
        request.send_response(status)
        request.send_header("Content-Type", kind)
        request.send_header("Content-Length", str(len(data)))
        request.send_header("Cache-Control", "no-store")
        request.end_headers()
        request.wfile.write(data)

    # -- endpoints -------------------------------------------------------------------------

    def cluster(self) -> dict[str, Any]:
        meta = self.admin._cluster.refresh()
        answer: dict[str, Any] = {
            "controller_id": meta.controller_id, "metadata_offset": meta.metadata_offset,
            "brokers": [{"id": b.broker_id, "address": b.address, "rack": b.rack, "fenced": b.fenced,
                         "controller": b.broker_id == meta.controller_id}
                        for b in sorted(meta.brokers, key=lambda b: b.broker_id)]}
        try:
            quorum = self.quorum_admin.describe_quorum()
        except SparkLogError as exc:
            answer["quorum"], answer["quorum_error"] = None, str(exc)
        else:
            answer["quorum"] = {
                "leader_id": quorum.leader_id, "leader_epoch": quorum.leader_epoch,
                "high_watermark": quorum.high_watermark,
                "replicas": [{"id": r.node_id, "role": r.role, "log_end_offset": r.log_end_offset, "lag": r.lag,
                              "last_fetch_timestamp_ms": r.last_fetch_timestamp_ms,
                              "last_caught_up_timestamp_ms": r.last_caught_up_timestamp_ms}
                             for r in quorum.replicas]}
        return answer

    def topics(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for name, description in sorted(self.admin.describe_topics().items()):
            partitions: list[dict[str, Any]] = []
            for index, p in sorted(description.partitions.items()):
                leo = p.log_end_offsets.get(p.leader) if p.log_end_offsets and p.leader is not None else None
                partitions.append({"partition": index, "leader": p.leader, "replicas": list(p.replicas),
                                   "isr": list(p.isr), "high_watermark": p.high_watermark,
                                   "log_start_offset": p.log_start_offset, "log_end_offset": leo,
                                   "log_size_bytes": p.log_size_bytes,
                                   "records": (p.high_watermark - p.log_start_offset)
                                   if p.high_watermark is not None and p.log_start_offset is not None else None,
                                   "under_replicated": p.under_replicated, "offline": p.offline})
            partitions.sort(key=lambda p: (not p["offline"], not p["under_replicated"], p["partition"]))
            out.append({"name": name, "kind": description.kind, "partitions": partitions,
                        "replication_factor": description.replication_factor, "config": description.config,
                        "columns": description.schema.names if description.schema is not None else [],
                        "unhealthy": sum(1 for p in partitions if p["under_replicated"] or p["offline"])})
        out.sort(key=lambda t: (-t["unhealthy"], t["name"]))
        return out

    def records(self, query: dict[str, list[str]]) -> dict[str, Any]:
        """Up to ``limit`` records of a partition from ``offset``: a bounded read up to the high
        watermark the read starts with, so it ends when it got there (or got ``limit``
        records), never on a guess that nothing more is coming; ``RequestTimeoutError`` if
        the records below the high watermark could not be read in the request timeout."""
        from ._consumer import Consumer

        topic = query["topic"][0]
        partition = int(query.get("partition", ["0"])[0])
        limit = min(_MAX_RECORDS, max(1, int(query.get("limit", ["50"])[0])))
        earliest = self._partition_offset(topic, partition, "earliest")
        end = self._partition_offset(topic, partition, "latest")
        at = query.get("time", [None])[0]
        time_ms = None if at is None else parse_time_ms(at)
        # by time: the first offset whose timestamp is >= it (the high watermark when none is)
        offset = self._partition_offset(topic, partition, time_ms) if time_ms is not None else \
            max(0, int(query.get("offset", ["0"])[0]))
        start = min(max(offset, earliest), end)
        rows: list[dict[str, Any]] = []
        if start < end:
            with Consumer(self.bootstrap, auto_offset_reset="earliest", security=self.security) as consumer:
                consumer.assign([(topic, partition)])
                consumer.seek(topic, partition, start, end=end)
                deadline = time.monotonic() + _READ_TIMEOUT_S
                while len(rows) < limit and consumer.position(topic, partition) < end:
                    if time.monotonic() >= deadline:
                        raise RequestTimeoutError(
                            f"read {len(rows)} records of {topic}-{partition} from offset {start} in "
                            f"{_READ_TIMEOUT_S:.0f} s; the high watermark is {end}")
                    for record in consumer.poll(0.5):
                        row: dict[str, Any] = {"offset": record.offset, "timestamp": record.timestamp}
                        if isinstance(record.value, dict):
                            row.update(record.value)
                        else:
                            row["key"], row["value"] = record.key, record.value
                        rows.append(row)
        rows = rows[:limit]
        columns = list(rows[0]) if rows else []
        return {"topic": topic, "partition": partition, "offset": start, "time": time_ms, "high_watermark": end,
                "log_start_offset": earliest, "columns": columns,
                "rows": [[row.get(c) for c in columns] for row in rows]}

    def _partition_offset(self, topic: str, partition: int, spec: str | int) -> int:
        offsets = self.admin.list_offsets(topic, spec)
        if partition not in offsets:
            raise UnknownTopicOrPartitionError(f"{topic} has no partition {partition}")
        return offsets[partition]

    def groups(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for listing in self.admin.list_groups():
            try:
                group = self.admin.describe_group(listing.group_id)
            except SparkLogError as exc:
                out.append({"group": listing.group_id, "state": listing.state, "error": str(exc), "partitions": []})
                continue
            out.append({"group": group.group_id, "state": group.state, "members": len(group.members),
                        "coordinator": group.coordinator_id, "lag": group.total_lag,
                        "partitions": [{"topic": t, "partition": p, "committed": gp.committed_offset,
                                        "log_end_offset": gp.log_end_offset, "lag": gp.lag}
                                       for (t, p), gp in sorted(group.partitions.items())]})
        return out

    def throughput(self) -> dict[str, Any]:
        topics = [t for t in self.admin.list_topics() if not t.startswith("__")]
        ends = self.admin.list_offsets_for_topics(topics, "latest") if topics else {}
        totals: dict[str, int] = {}
        for (topic, _), offset in ends.items():
            totals[topic] = totals.get(topic, 0) + offset
        return {"time": time.time(), "offsets": totals}

    def create_topic(self, body: dict[str, Any]) -> dict[str, Any]:
        description = self.admin.create_topic(str(body["name"]), partitions=_int(body, "partitions", 1),
                                              replication_factor=_int(body, "replication_factor", 1),
                                              config={str(k): str(v) for k, v in _object(body, "config").items()})
        return {"created": description.name, "partitions": description.num_partitions}

    def alter_config(self, body: dict[str, Any]) -> dict[str, Any]:
        topic = str(body["topic"])
        changes = {str(k): str(v) for k, v in _object(body, "set").items()}
        if not changes:
            raise InvalidRequestError("nothing to set")
        description = self.admin.alter_configs(topic, set=changes)
        return {"topic": topic, "config": {k: description.config.get(k.replace("_", ".")) for k in changes}}

    def reset_offsets(self, body: dict[str, Any]) -> dict[str, Any]:
        to = str(body.get("to", "earliest"))
        if to not in ("earliest", "latest"):
            raise InvalidRequestError("to must be 'earliest' or 'latest'")
        result = self.admin.reset_group_offsets(str(body["group"]), str(body["topic"]), to=to)
        return {"group": body["group"], "offsets": [[t, p, o] for (t, p), o in sorted(result.items())]}


def _object(body: dict[str, Any], key: str) -> dict[str, Any]:
    """``body[key]`` as a JSON object (absent or null: empty); ``InvalidRequestError`` otherwise."""
    value = body.get(key) or {}
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{key!r} must be a JSON object, got {type(value).__name__}")
    return value


def _int(body: dict[str, Any], key: str, default: int) -> int:
    """``body[key]`` as an integer (absent: ``default``); ``InvalidRequestError`` otherwise."""
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidRequestError(f"{key!r} must be an integer, got {type(value).__name__}")
    try:
        return int(value)
    except ValueError:
        raise InvalidRequestError(f"{key!r} must be an integer, got {value!r}") from None


def serve(bootstrap: str | None, *, host: str, port: int) -> int:
    """``spark-log console``: serve until interrupted."""
    server = ConsoleServer(bootstrap, host=host, port=port)
    print(f"spark-log console on {server.url}", file=sys.stderr, flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        server.admin.close()
    return 0
