"""The data listener: a small binary TCP protocol for the JVM Spark connector, the
followers and the Python clients' produce and fetch.

Why: the JVM connector (``connectors/jvm``) can speak neither Python gRPC stubs nor
protobuf without generated classes, and it wants the stored frames as they are.  So
each broker also listens on a plain TCP port, next to its gRPC server, answering four
requests through *the same handlers the gRPC servicer calls* (``FetchHandler.collect``,
``ProduceHandler.handle``, ``ListOffsetsHandler.handle``, the metadata image and
``MetadataBuilder``): nothing about fetch, produce or offsets is decided here.

Where it is: ``<data_dir>/data.port`` (written once it listens, as ``broker.port`` for
gRPC), and the ``DataListener.Describe`` gRPC method (``spark_log/proto/data_listener.proto``)
on the broker's gRPC port, which is how a client holding only the bootstrap (gRPC)
addresses finds it.  The METADATA answer names every live broker's data listener
(brokers ask each other with ``Describe``, cached per broker address).

Security: the listener serves the node's ``security_protocol`` with the node's own material
and rules (``attach_security``): TLS with the certificate, key and CA of ``TlsFiles`` (a
renewed certificate is used from the next handshake; client certificates required when
``ssl_client_auth = "required"``, the principal then being ``User:<subject>`` exactly as gRPC
names it: ``brokers.security.authn.certificate_principal``, RFC 2253 with the most specific RDN
first, e.g. ``User:CN=alice,O=acme,C=US``; a subject it cannot name as gRPC does is refused
with ``AuthenticationError`` rather than served as another principal); on ``SASL_SSL`` a connection authenticates first with SCRAM-SHA-256 (``SCRAM_START``/
``SCRAM_FINISH``, the ``SessionStore`` exchange of ``Security.ScramStart/ScramFinish``),
else every request is refused with ``AuthenticationError``; with the authorizer on, each
request passes the rule of the gRPC method it stands for (``RULES``: FETCH and FETCH_TIER are
``Broker.Fetch``, PRODUCE ``Broker.Produce``, LIST_OFFSETS ``Broker.ListOffsets``,
METADATA DESCRIBE on each named topic, all topics filtered by DESCRIBE), and fetches and
produces are charged to the byte-rate quotas of the connection's principal and client id
(``CLIENT_ID``) as on gRPC: the answer is delayed by the throttle time.  ``"off"`` never
starts it.

Wire format (every integer little-endian, as the frame header)::

    request   u32 length | u8 api | u32 correlation id | payload
    response  u32 length | u32 correlation id | i16 error code | str error message | payload

``str`` and ``bytes`` are an i32 length and the bytes (UTF-8 for ``str``).  A non-zero
error code (``spark_log.errors.ErrorCode``) is a whole-request failure with no payload;
per-partition errors sit inside the payloads as ``i16 code, str message``.

    METADATA (1)      req: i32 n (-1: all topics), n x str topic
                      resp: i32 brokers x (i32 id, str grpc address, str data host, i32 data port,
                            str rack, u8 fenced)
                            i32 topics x (str name, i16 code, str message, str kind, u8 timestamp type,
                            i32 n x str key column, i32 n x (i32 schema id, bytes IPC schema),
                            i32 n x (i32 partition, i32 leader, i32 leader epoch, i32 n x i32 replica,
                            i32 n x i32 isr))
    LIST_OFFSETS (2)  req: i64 spec (-2 earliest, -1 latest, else ms), u8 isolation (1: committed),
                           i32 n x (str topic, i32 partition)
                      resp: i32 n x (str topic, i32 partition, i16 code, str message, i64 offset)
    FETCH (3)         req: i32 max wait ms, i32 min bytes, i32 max bytes, u8 isolation,
                           i32 n x (str topic, i32 partition, i64 fetch offset, i64 max offset (0: none),
                           i32 partition max bytes)
                           [pushdown block: projection and predicates of the one topic named
                           (``data_pushdown.py``); then the answer ends with i32 n x u8 payload
                           kind per partition (0 stored frames, 1 Arrow IPC stream of the rows kept)]
                      resp: i32 n x (str topic, i32 partition, i16 code, str message, i64 high watermark,
                            i64 log start offset, i64 next fetch offset, bytes stored frames,
                            i32 n x (i64 producer id, i64 first offset, i64 abort marker offset): the
                            aborted transactions among the frames (read_committed; the reader drops
                            their transactional frames))
    PRODUCE (4)       req: i16 acks, i32 timeout ms, i32 n x (str topic, i32 partition,
                           i32 current leader epoch (-1: unchecked), bytes frames)
                      resp: i32 n x (str topic, i32 partition, i16 code, str message, i64 base offset,
                            i64 last offset, u8 duplicate)
    SCRAM_START (5)   req: str client-first;  resp: str exchange id, str server-first
    SCRAM_FINISH (6)  req: str exchange id, str client-final;  resp: str server-final, str principal
                      (the connection is then that principal, for as long as its session lives: every
                      later request first passes gRPC's session check, ``Authenticator.session_principal``;
                      once the session expires (``sasl_session_lifetime_ms``) or the user is deleted or
                      given a new password, the request is answered SESSION_EXPIRED and the connection
                      is closed)
    PRODUCE_TXN (7)   req: str transactional id, then PRODUCE's; resp: PRODUCE's.  Transactional frames
                      (attribute 0x10) of a participant the coordinator knows (KIP-890 verification
                      and WRITE on the transactional id, as ``Broker.Produce`` with ``transactional_id``)
    FETCH_TIER (8)    FETCH's request and answer layout, answered from the topic's Delta tier
                      (``tier_fetch.py``): the committed records of [fetch offset, min(max offset, the
                      tier's end)) as version-2 frames; high watermark = the tier's end, log start =
                      the tier's start; OFFSET_OUT_OF_RANGE when the tier does not hold the fetch
                      offset.  The JVM connector's union read below the brokers' log start.  Rule and
                      quota: ``Broker.Fetch``'s (READ each topic; the consumer byte rate).  It may
                      end with FETCH's pushdown block: the tier's rows are then filtered and
                      projected on the broker and answered as FETCH answers them
    METADATA_V2 (14)  METADATA, with ``str topic id`` after each topic's message (empty for a topic
                      that is absent or not described): a client keeping leader epochs per partition
                      tells a topic deleted and created again under the same name (a new id, its
                      epochs start over) from a stale answer about the same topic
    LIST_OFFSETS_V2 (11), FETCH_V2 (12), FETCH_TIER_V2 (13)
                      LIST_OFFSETS, FETCH and FETCH_TIER with the client's leader epoch of each
                      partition (KIP-320): an ``i32 current leader epoch`` right after each
                      request partition's ``i32 partition`` (where PRODUCE has it), -1 not checked;
                      the rest of each request (FETCH's pushdown block too) and of FETCH's answer
                      as before.  LIST_OFFSETS_V2's answer adds, after each offset, ``i32 leader
                      epoch``: the answering replica's (-1 when it has none), so a client can refuse
                      an answer from an older epoch than it has seen.  The broker sets
                      ``current_leader_epoch`` on the ``ListOffsetsRequest``/``FetchRequest`` it
                      builds, so ``check_client_leader_epoch`` (``list_offsets.py``, ``fetch.py``)
                      applies: an older epoch is ``FENCED_LEADER_EPOCH`` (145), a newer one
                      ``UNKNOWN_LEADER_EPOCH`` (146), both per partition and retriable.  FETCH_TIER_V2
                      reads the epochs and does not check them (the tier read is the committed Delta
                      table; only the leader answers it, as FETCH_TIER).  New api numbers rather than a
                      trailing block: a broker that predates them refuses the request ("unknown data
                      listener api") instead of silently ignoring trailing epochs, which would leave a
                      client believing it is fenced from a deposed leader when it is not; and FETCH's
                      trailing position is the pushdown block's already.  The old numbers are answered
                      as before (epoch -1)
    NODE_AUTH (9), REPLICA_FETCH (10), REPLICA_FETCH_SESSION (18)
                      followers fetching from their leader (``replica_listener.py``): an inter-node
                      token makes a TLS connection ``Node:<id>``; REPLICA_FETCH is ``Broker.Fetch``
                      with a replica id (rule: CLUSTER_ACTION), answered by the leader's
                      ``LeaderFetchHandler`` with the stored frames as they are;
                      REPLICA_FETCH_SESSION is the same within the connection's fetch session
                      (only what changed travels each way)
    REPLICA_FETCH_V2 (19), REPLICA_FETCH_SESSION_V2 (20)
                      the same with each partition's topic id (KIP-516): a leader whose replica has
                      another id (the topic was deleted and created again) answers
                      INCONSISTENT_TOPIC_ID; what followers send (``replica_listener.py``)

    PB_PRODUCE (15)   req: a serialised ``ProduceRequest``;  resp: the serialised ``ProduceResponse``
                      (``Broker.Produce``: the same message both ways, the same rule and quota, and
                      ``throttle_time_ms`` when the quota delayed the answer)
    PB_FETCH (16)     req: a serialised consumer ``FetchRequest`` (replica id -1);  resp: the serialised
                      ``FetchResponse`` of ``Broker.Fetch`` (``wire.encode_fetch_response``: the
                      stored frames copied once).  These two are how the Python clients produce and
                      fetch (``spark_log/_data_transport.py``): gRPC's messages without gRPC, whose
                      per-call cost (about 0.3 ms of CPU and two thread hand-offs in Python) was most
                      of a record's produce-to-consume latency
    CLIENT_ID (17)    req: str client id;  resp: nothing.  The connection's client id from then on
                      (quotas per client id).  The Python clients send it first on every connection:
                      a broker that predates these three refuses it ("unknown data listener api"),
                      and the client then uses gRPC for that broker

Threads: one daemon thread per connection (a client sends one request at a time on a
connection; the JVM connector pools its connections per executor JVM, at most 8 idle per
broker, not reused after 60 s idle); a fetch long-polls on its connection's thread.
"""
from __future__ import annotations

import logging
import os
import socket
import socketserver
import ssl
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import grpc
from google.protobuf.message import DecodeError

from brokers.net.channels import Channels
from brokers.net.tls import load_chain
from spark_log.errors import (
    AuthenticationError,
    InvalidConfigError,
    InvalidRequestError,
    SparkLogError,
    StorageError,
    ThrottledError,
    TopicAuthorizationError,
)
from spark_log.proto import broker_pb2 as pb
from spark_log.proto import data_listener_pb2 as dpb
from spark_log.fetch_wire import ProduceEntry, ProduceView, parse_produce_request
from spark_log.unfilled import unfilled_bytearray

from . import data_pushdown
from .fetch import FetchHandler
from .list_offsets import ListOffsetsHandler
from .metadata import MetadataBuilder
from .partition_manager import PartitionManager
from . import replica_listener
from .produce import ProduceHandler, ProduceRequestLike
from .replica_listener import (
    NODE_AUTH,
    REPLICA_APIS,
    REPLICA_FETCH,
    REPLICA_FETCH_SESSION,
    REPLICA_FETCH_SESSION_V2,
    REPLICA_FETCH_V2,
)
from .tier_fetch import TierFetchHandler
from .wire import encode_fetch_response

__all__ = ["DataListener", "DataPeers", "PORT_FILE", "METADATA", "LIST_OFFSETS", "FETCH", "PRODUCE", "SCRAM_START",
           "SCRAM_FINISH", "PRODUCE_TXN", "FETCH_TIER", "LIST_OFFSETS_V2", "FETCH_V2", "FETCH_TIER_V2", "METADATA_V2", "NODE_AUTH", "REPLICA_FETCH",
           "REPLICA_FETCH_SESSION", "REPLICA_FETCH_V2", "REPLICA_FETCH_SESSION_V2",
           "PB_PRODUCE", "PB_FETCH", "CLIENT_ID",
           "describe_handler", "security_refusal", "Caller"]

log = logging.getLogger(__name__)

PORT_FILE = "data.port"
METADATA, LIST_OFFSETS, FETCH, PRODUCE, SCRAM_START, SCRAM_FINISH, PRODUCE_TXN, FETCH_TIER = 1, 2, 3, 4, 5, 6, 7, 8
# 9, 10, 18, 19, 20: NODE_AUTH, REPLICA_FETCH, REPLICA_FETCH_SESSION and their _V2 (replica_listener.py)
LIST_OFFSETS_V2, FETCH_V2, FETCH_TIER_V2 = 11, 12, 13  # a client leader epoch per partition (module docstring)
METADATA_V2 = 14  # METADATA with each topic's id (module docstring)
PB_PRODUCE, PB_FETCH, CLIENT_ID = 15, 16, 17  # the Python clients' transport (module docstring)
_HANDSHAKE_TIMEOUT_S = 10.0
MAX_REQUEST_BYTES = 256 << 20
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_I16 = struct.Struct("<h")
_I64 = struct.Struct("<q")
_U8 = struct.Struct("<B")
_REQUEST_HEAD = struct.Struct("<BI")
_DESCRIBE_TIMEOUT_S = 2.0


def security_refusal(config: Any) -> str | None:
    """Why the data listener cannot run under ``config.security`` (None: it can).  Every
    protocol the node's gRPC listener serves (PLAINTEXT, SSL, SASL_SSL), with or without the
    authorizer, is served (module docstring)."""
    security = config.security
    if security.security_protocol not in ("PLAINTEXT", "SSL", "SASL_SSL"):
        return f"the data listener does not serve security_protocol={security.security_protocol}"
    return None


@dataclass
class Caller:
    """Who is on one connection: ``principal`` (``User:ANONYMOUS`` until SCRAM or a client
    certificate says otherwise), ``host``, and whether it may send requests yet."""

    principal: str
    host: str
    authenticated: bool = True
    client_id: str = ""
    refusal: str = ""  # why an unauthenticated connection is refused (empty: authenticate with SCRAM)
    session_token: str | None = None  # a SCRAM connection's session, checked before each request
    closing: bool = False  # close the connection once this answer is sent (its session ended)
    replica_session: Any = None  # a follower's fetch session on this connection (replica_session.py)


class _Reader:
    """Parses a request payload; ``InvalidRequestError`` on truncation and on a string that
    is not UTF-8."""

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.at = 0

    def _take(self, codec: struct.Struct) -> Any:
        if self.at + codec.size > len(self.data):
            raise InvalidRequestError("truncated data listener request")
        (value,) = codec.unpack_from(self.data, self.at)
        self.at += codec.size
        return value

    def i16(self) -> int:
        return int(self._take(_I16))

    def i32(self) -> int:
        return int(self._take(_I32))

    def i64(self) -> int:
        return int(self._take(_I64))

    def u8(self) -> int:
        return int(self._take(_U8))

    def raw(self) -> memoryview:
        size = self.i32()
        if size < 0 or self.at + size > len(self.data):
            raise InvalidRequestError("bad length in data listener request")
        out = self.data[self.at: self.at + size]
        self.at += size
        return out

    def str(self) -> str:
        try:
            return bytes(self.raw()).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequestError(f"a string in a data listener request is not UTF-8: {exc}") from None

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > 1_000_000:
            raise InvalidRequestError(f"bad count {n} in data listener request")
        return n


class _Writer:
    def __init__(self) -> None:
        self.chunks: list[bytes | memoryview] = []

    def i16(self, v: int) -> None:
        self.chunks.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.chunks.append(_I32.pack(v))

    def i64(self, v: int) -> None:
        self.chunks.append(_I64.pack(v))

    def u8(self, v: int) -> None:
        self.chunks.append(_U8.pack(v))

    def raw(self, data: bytes | memoryview | None) -> None:
        size = len(data) if data is not None else 0
        self.chunks.append(_I32.pack(size))
        if size:
            assert data is not None
            self.chunks.append(data)

    def str(self, text: str) -> None:
        self.raw(text.encode("utf-8"))

    def error(self, error: pb.Error | None) -> None:
        if error is None or not error.code:
            self.i16(0)
            self.str("")
        else:
            self.i16(error.code)
            self.str(error.message)


class DataPeers:
    """The data listener address of every broker, asked of each with ``DataListener.Describe``
    and cached per gRPC address (a broker that restarts on the same address keeps its entry
    until asking again fails)."""

    def __init__(self, broker_id: int, own: Callable[[], dpb.DataListenerInfo], channels: Channels) -> None:
        self.broker_id = broker_id
        self._own = own
        self._channels = channels
        self._lock = threading.Lock()
        self._known: dict[tuple[int, str], tuple[str, int]] = {}

    def address(self, broker_id: int, grpc_address: str) -> tuple[str, int]:
        if broker_id == self.broker_id:
            info = self._own()
            return info.host, info.port
        key = (broker_id, grpc_address)
        with self._lock:
            found = self._known.get(key)
        if found is not None:
            return found
        try:
            channel = self._channels.open(grpc_address)
            try:  # spark_log._data_transport.describe_listener's call (brokers use only the public spark_log)
                call = channel.unary_unary("/spark_log.data.v1.DataListener/Describe",
                                           request_serializer=dpb.DescribeDataListenerRequest.SerializeToString,
                                           response_deserializer=dpb.DataListenerInfo.FromString)
                info = call(dpb.DescribeDataListenerRequest(), timeout=_DESCRIBE_TIMEOUT_S)
            finally:
                channel.close()
        except grpc.RpcError as exc:
            log.info("broker %d (%s) did not say where its data listener is: %s", broker_id, grpc_address, exc)
            return "", 0
        answer = (info.host, info.port)
        if info.port:
            with self._lock:
                self._known[key] = answer
        return answer

    def forget(self, broker_id: int, grpc_address: str) -> None:
        """Drop the cached address of ``broker_id`` (its listener refused a connection: it
        restarted elsewhere, or stopped); the next ``address`` asks again."""
        with self._lock:
            self._known.pop((broker_id, grpc_address), None)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], listener: "DataListener") -> None:
        self.listener = listener
        super().__init__(address, _Connection)


class _Connection(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        listener = self.server.listener
        caller = listener.new_caller(str(self.client_address[0]))
        context = listener.tls_context()
        if context is not None:
            sock.settimeout(_HANDSHAKE_TIMEOUT_S)
            try:
                sock = context.wrap_socket(sock, server_side=True)
            except (ssl.SSLError, OSError) as exc:
                log.info("data listener: TLS handshake with %s failed: %s", self.client_address, exc)
                return
            sock.settimeout(None)
            der = sock.getpeercert(binary_form=True)
            if der:
                from brokers.security.authn import certificate_principal

                try:  # the name the gRPC listener gives the same certificate
                    caller.principal = certificate_principal(der)
                    caller.authenticated = True
                except AuthenticationError as exc:  # never ANONYMOUS instead: every request is refused
                    caller.authenticated = False
                    caller.refusal = exc.message
        listener._track(sock, True)
        try:
            while not listener.stopping:
                head = _recv_exact(sock, 4)
                if head is None:
                    return
                (size,) = _U32.unpack(head)
                if size < _REQUEST_HEAD.size or size > MAX_REQUEST_BYTES:
                    log.warning("data listener: refusing a %d-byte request from %s", size, self.client_address)
                    return
                body = _recv_exact(sock, size)
                if body is None:
                    return
                api, correlation = _REQUEST_HEAD.unpack_from(body, 0)
                answer = listener.answer(api, memoryview(body)[_REQUEST_HEAD.size:], is_active=lambda: not listener.stopping,
                                         caller=caller)
                head_out = _Writer()
                head_out.chunks.append(_U32.pack(correlation))
                chunks = head_out.chunks + answer
                total = sum(len(c) for c in chunks)
                _send_chunks(sock, [_U32.pack(total), *chunks])
                if caller.closing:
                    return
        except OSError:
            return
        finally:
            listener._track(sock, False)
            listener.end_session(caller)


_IOV_MAX = 512  # buffers per sendmsg (Linux allows 1024)
_SMALL = 16 << 10  # chunks below this are joined before sending


def _send_chunks(sock: socket.socket, chunks: list[bytes | memoryview]) -> None:
    """Send ``chunks`` in order: TLS as one joined buffer (one record stream, not one per
    chunk); plaintext with ``sendmsg`` (small chunks joined, large payloads as they are: one
    system call, not one per field, and no tiny segments under ``TCP_NODELAY``)."""
    if isinstance(sock, ssl.SSLSocket):
        sock.sendall(b"".join(chunks))
        return
    buffers: list[bytes | memoryview] = []
    small: list[bytes | memoryview] = []
    for chunk in chunks:
        if len(chunk) < _SMALL:
            small.append(chunk)
            continue
        if small:
            buffers.append(b"".join(small))
            small = []
        buffers.append(chunk)
    if small:
        buffers.append(b"".join(small))
    views = [memoryview(b).cast("B") for b in buffers]
    while views:
        sent = sock.sendmsg(views[:_IOV_MAX])
        while sent and views:
            if sent >= len(views[0]):
                sent -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0


def _recv_exact(sock: socket.socket, size: int) -> bytearray | None:
    out = unfilled_bytearray(size)  # every byte is received into it before it is returned
    view = memoryview(out)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            return None
        got += n
    return out


class DataListener:
    """The data listener of one broker (module docstring).  ``start``/``stop``."""

    def __init__(self, *, manager: PartitionManager, builder: MetadataBuilder, fetch: FetchHandler,
                 produce: ProduceHandler, list_offsets: ListOffsetsHandler, host: str, port: int,
                 data_dir: Path, channels: Channels, tier_fetch: TierFetchHandler | None = None) -> None:
        self.manager = manager
        self.tier_fetch = tier_fetch  # None: FETCH_TIER is refused (no tier location known)
        self.builder = builder
        self.fetch = fetch
        self.produce = produce
        self.list_offsets = list_offsets
        self.host = host
        self.requested_port = port
        self.data_dir = Path(data_dir)
        self.port = 0
        self.stopping = False
        self.peers = DataPeers(manager.broker_id, self.info, channels)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.security: Any = None  # brokers.security.node_security.NodeSecurity (attach_security)
        self._tls: tuple[int, ssl.SSLContext] | None = None

    def attach_security(self, security: Any) -> None:
        """Serve with the node's ``NodeSecurity``: its TLS files, SCRAM sessions, authorizer
        and quotas (module docstring).  Before ``start``."""
        self.security = security

    @property
    def protocol(self) -> str:
        return str(self.security.config.security_protocol) if self.security is not None else "PLAINTEXT"

    def new_caller(self, host: str) -> Caller:
        from brokers.security.principal import ANONYMOUS

        return Caller(principal=ANONYMOUS, host=host, authenticated=self.protocol != "SASL_SSL")

    def tls_context(self) -> ssl.SSLContext | None:
        """The server context of the node's current TLS material (rebuilt when it is renewed);
        None without TLS."""
        files = self.security.files if self.security is not None else None
        if files is None:
            return None
        material = files.current()
        cached = self._tls
        if cached is not None and cached[0] == material.generation:
            return cached[1]
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        load_chain(context, material, prefix="data-listener-tls-")
        if material.ca:
            context.load_verify_locations(cadata=material.ca.decode("ascii"))
        if self.security.config.ssl_client_auth == "required":
            context.verify_mode = ssl.CERT_REQUIRED
        self._tls = (material.generation, context)
        return context

    @property
    def port_file(self) -> Path:
        return self.data_dir / PORT_FILE

    def info(self) -> dpb.DataListenerInfo:
        return dpb.DataListenerInfo(broker_id=self.manager.broker_id, host=self.host if self.port else "",
                                    port=self.port)

    def start(self) -> None:
        self._server = _Server((self.host, self.requested_port), self)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="data-listener", daemon=True)
        self._thread.start()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.port_file.with_suffix(".tmp")
        tmp.write_text(f"{self.port}\n")
        os.replace(tmp, self.port_file)
        log.info("broker %d: data listener on %s:%d", self.manager.broker_id, self.host, self.port)

    def stop(self, timeout_s: float = 5.0) -> None:
        self.stopping = True
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        with self._lock:
            for sock in list(self._sockets):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        if self._thread is not None:
            self._thread.join(timeout_s)
        try:
            self.port_file.unlink()
        except FileNotFoundError:
            pass

    def _track(self, sock: socket.socket, add: bool) -> None:
        with self._lock:
            (self._sockets.add if add else self._sockets.discard)(sock)

    # --- requests ---------------------------------------------------------------------

    def answer(self, api: int, payload: memoryview, *, is_active: Callable[[], bool] = lambda: True,
               caller: Caller | None = None) -> list[bytes | memoryview]:
        """The response chunks after the correlation id: error code, message, payload."""
        out = _Writer()
        caller = caller if caller is not None else self.new_caller("")
        try:
            request = _Reader(payload)
            body = _Writer()
            if caller.session_token is not None and api not in (SCRAM_START, SCRAM_FINISH, NODE_AUTH):
                self._check_session(caller)
            if api == SCRAM_START:
                self._scram_start(request, body, caller)
            elif api == SCRAM_FINISH:
                self._scram_finish(request, body, caller)
            elif api == NODE_AUTH:
                self._replica_api(api, request, body, is_active, caller)
            elif not caller.authenticated:
                raise AuthenticationError(caller.refusal or "this listener needs authentication: SCRAM-SHA-256 "
                                          "(SCRAM_START/SCRAM_FINISH) or a client certificate")
            elif api in (METADATA, METADATA_V2):
                self._metadata(request, body, caller, topic_ids=api == METADATA_V2)
            elif api in (LIST_OFFSETS, LIST_OFFSETS_V2):
                self._list_offsets(request, body, caller, epochs=api == LIST_OFFSETS_V2)
            elif api in (FETCH, FETCH_V2):
                self._fetch(request, body, is_active, caller, epochs=api == FETCH_V2)
            elif api in (FETCH_TIER, FETCH_TIER_V2):
                self._fetch(request, body, is_active, caller, tier=True, epochs=api == FETCH_TIER_V2)
            elif api == PRODUCE:
                self._produce(request, body, caller)
            elif api == PRODUCE_TXN:
                transactional_id = request.str()
                self._produce(request, body, caller, transactional_id=transactional_id)
            elif api == PB_PRODUCE:
                self._pb_produce(request, body, caller)
            elif api == PB_FETCH:
                self._pb_fetch(request, body, is_active, caller)
            elif api == CLIENT_ID:
                caller.client_id = request.str()
            elif api in REPLICA_APIS:  # followers (replica_listener.py)
                self._replica_api(api, request, body, is_active, caller)
            else:
                raise InvalidRequestError(f"unknown data listener api {api}")
        except SparkLogError as exc:
            out.i16(int(exc.code))
            out.str(exc.message)
            return out.chunks
        except Exception as exc:  # noqa: BLE001 - a typed error to the client, never a dropped connection
            log.exception("data listener api %d failed", api)
            error = StorageError(f"data listener request failed on the broker: {exc}")
            out.i16(int(error.code))
            out.str(error.message)
            return out.chunks
        out.i16(0)
        out.str("")
        return out.chunks + body.chunks

    def _replica_api(self, api: int, request: _Reader, out: _Writer, is_active: Callable[[], bool],
                     caller: Caller) -> None:
        """NODE_AUTH, REPLICA_FETCH and REPLICA_FETCH_SESSION (and their _V2): the followers'
        side (``replica_listener.py``)."""
        if api == NODE_AUTH:
            replica_listener.node_auth(self, request, out, caller)
        elif api in (REPLICA_FETCH_SESSION, REPLICA_FETCH_SESSION_V2):
            replica_listener.replica_fetch_session(self, request, out, is_active, caller,
                                                   topic_ids=api == REPLICA_FETCH_SESSION_V2)
        else:
            replica_listener.replica_fetch(self, request, out, is_active, caller, topic_ids=api == REPLICA_FETCH_V2)

    # --- security ---------------------------------------------------------------------

    def _scram_start(self, request: _Reader, out: _Writer, caller: Caller) -> None:
        if self.protocol != "SASL_SSL" or self.security is None:
            raise AuthenticationError(f"SCRAM needs a SASL_SSL listener; this one is {self.protocol}")
        client_first = request.str()
        exchange_id, server_first = self.security.sessions.start(client_first, self.manager.image.security.users)
        out.str(exchange_id)
        out.str(server_first)

    def _scram_finish(self, request: _Reader, out: _Writer, caller: Caller) -> None:
        if self.protocol != "SASL_SSL" or self.security is None:
            raise AuthenticationError(f"SCRAM needs a SASL_SSL listener; this one is {self.protocol}")
        exchange_id, client_final = request.str(), request.str()
        result = self.security.sessions.finish(exchange_id, client_final)
        self.end_session(caller)  # a connection authenticating again: its earlier session ends
        # the connection is the session: its token stays here (never sent), and every later
        # request checks it as gRPC checks a call's token (_check_session)
        caller.session_token = result.token
        caller.principal = result.principal
        caller.authenticated = True
        out.str(result.server_final)
        out.str(result.principal)

    def _check_session(self, caller: Caller) -> None:
        """Before each request of a SCRAM connection: its session is still live (not expired,
        the user not deleted, the password not changed), asked of the gRPC listener's own
        check (``Authenticator.session_principal``).  Else the session's typed error
        (``SessionExpiredError``, retriable) is the answer, the connection is no longer
        authenticated and is closed once it is sent: the client connects and authenticates
        again (the JVM connector retries a retriable error, then reconnects)."""
        assert caller.session_token is not None
        try:
            caller.principal = self.security.authenticator.session_principal(caller.session_token)
        except SparkLogError:
            from brokers.security.principal import ANONYMOUS

            caller.session_token = None
            caller.principal = ANONYMOUS
            caller.authenticated = False
            caller.closing = True
            raise

    def end_session(self, caller: Caller) -> None:
        """End ``caller``'s SCRAM session, if any (the connection closed, or authenticated again)."""
        token, caller.session_token = caller.session_token, None
        if token is not None and self.security is not None:
            self.security.sessions.end(token)

    def _authorizer(self, caller: Caller) -> Any:
        """The authorizer when it applies to ``caller`` (None: everything allowed)."""
        authorizer = self.security.authorizer if self.security is not None else None
        if authorizer is None or authorizer.is_super(caller.principal):
            return None
        return authorizer

    def _check(self, method: str, message: Any, caller: Caller) -> None:
        """The gRPC method's rule (``RULES``) for ``message``; the typed refusal of the first
        check no alternative of which is allowed."""
        authorizer = self._authorizer(caller)
        if authorizer is None:
            return
        from brokers.security.interceptor import _denied
        from brokers.security.rules import RULES

        image = self.manager.image
        for check in RULES[method].checks(message):
            if not any(authorizer.authorize(image.security, caller.principal, caller.host, op, res) for op, res in check):
                raise _denied(check, caller.principal)

    def _quota(self, key: str, caller: Caller, measure: Callable[[], int]) -> int:
        """Charge the bytes ``measure()`` counts to ``caller``'s byte-rate quota and delay the
        answer as the gRPC listener does (refusing a caller whose bucket already has too many
        delayed answers); the delay in ms (0: none).  Bytes are counted only where a quota
        applies: counting a produce request's reads each partition's records out of its
        protobuf message, a copy of every byte."""
        if self.security is None:
            return 0
        from brokers.security.principal import is_node

        security = self.manager.image.security
        if not security.quotas or is_node(caller.principal):
            return 0
        nbytes = measure()
        if not nbytes:
            return 0
        quotas = self.security.quotas
        user = caller.principal.partition(":")[2]
        if not quotas.admit(security.quotas, key, user, caller.client_id):
            raise ThrottledError(f"{caller.principal} is over its {key} quota with answers still being delayed")
        charge = quotas.charge(security.quotas, key, user, caller.client_id, nbytes)
        if charge.throttle_ms:
            try:
                time.sleep(charge.throttle_ms / 1000)
            finally:
                quotas.done(charge)
        return int(charge.throttle_ms)

    # --- requests (continued) -------------------------------------------------------------

    def _metadata(self, request: _Reader, out: _Writer, caller: Caller, *, topic_ids: bool = False) -> None:
        if not self.manager.caught_up:
            from spark_log.errors import BrokerNotAvailableError

            raise BrokerNotAvailableError(f"broker {self.manager.broker_id} is catching up with the metadata log")
        n = request.i32()
        image = self.manager.image
        names = sorted(image.topics) if n < 0 else [request.str() for _ in range(n)]
        authorizer = self._authorizer(caller)
        denied: set[str] = set()
        if authorizer is not None:
            from brokers.security.rules import topic as topic_resource
            from spark_log.acls import Operation

            allowed = {name for name in names if authorizer.authorize(image.security, caller.principal, caller.host,
                                                                      Operation.DESCRIBE, topic_resource(name))}
            if n < 0:
                names = [name for name in names if name in allowed]  # other topics' existence is not revealed
            else:
                denied = set(names) - allowed
        brokers = sorted(image.brokers.items())
        out.i32(len(brokers))
        for broker_id, info in brokers:
            host, port = self.peers.address(broker_id, info.address) if not info.fenced else ("", 0)
            out.i32(broker_id)
            out.str(info.address)
            out.str(host)
            out.i32(port)
            out.str(info.rack)
            out.u8(1 if info.fenced else 0)
        out.i32(len(names))
        for name in names:
            topic = image.topics.get(name)
            out.str(name)
            if name in denied:
                out.i16(int(TopicAuthorizationError.code))
                out.str(f"principal {caller.principal} is not allowed describe on topic {name!r}")
                if topic_ids:
                    out.str("")
                out.str("")
                out.u8(0)
                out.i32(0)
                out.i32(0)
                out.i32(0)
                continue
            if topic is None:
                out.i16(int(pb_unknown_code()))
                out.str(f"unknown topic {name!r}")
                if topic_ids:
                    out.str("")
                out.str("")
                out.u8(0)
                out.i32(0)
                out.i32(0)
                out.i32(0)
                continue
            meta = self.builder.topic_meta(topic)
            out.i16(0)
            out.str("")
            if topic_ids:
                out.str(topic.topic_id)
            out.str(topic.kind)
            out.u8(1 if topic.config.message_timestamp_type == "LogAppendTime" else 0)
            out.i32(len(meta.key_columns))
            for column in meta.key_columns:
                out.str(column)
            out.i32(len(meta.schemas))
            for version in meta.schemas:
                out.i32(version.schema_id)
                out.raw(version.arrow_schema)
            out.i32(len(meta.partitions))
            for part in meta.partitions:
                out.i32(part.partition)
                out.i32(part.leader_id)
                out.i32(part.leader_epoch)
                out.i32(len(part.replicas))
                for r in part.replicas:
                    out.i32(r)
                out.i32(len(part.isr))
                for r in part.isr:
                    out.i32(r)

    def _list_offsets(self, request: _Reader, out: _Writer, caller: Caller, *, epochs: bool = False) -> None:
        """LIST_OFFSETS, or LIST_OFFSETS_V2 (``epochs``: each partition carries the client's
        leader epoch, and each answer the replica's)."""
        spec = request.i64()
        isolation = request.u8()
        n = request.count()
        partitions = []
        for _ in range(n):
            topic, partition = request.str(), request.i32()
            partitions.append(pb.ListOffsetsPartition(topic=topic, partition=partition, timestamp=spec,
                                                      current_leader_epoch=request.i32() if epochs else -1))
        # replica_id -1: a consumer (0 would be a follower broker's id: its offsets, and CLUSTER_ACTION under ACLs)
        message = pb.ListOffsetsRequest(
            replica_id=-1, isolation_level=pb.READ_COMMITTED if isolation == 1 else pb.READ_UNCOMMITTED,
            partitions=partitions)
        self._check("/spark_log.broker.v1.Broker/ListOffsets", message, caller)
        response = self.list_offsets.handle(message)
        out.i32(len(response.partitions))
        for part in response.partitions:
            out.str(part.topic)
            out.i32(part.partition)
            out.error(part.error if part.HasField("error") else None)
            out.i64(part.offset)
            if epochs:
                out.i32(part.leader_epoch)

    def _fetch(self, request: _Reader, out: _Writer, is_active: Callable[[], bool], caller: Caller, *,
               tier: bool = False, epochs: bool = False) -> None:
        """FETCH or FETCH_TIER (``tier``); their _V2 (``epochs``) carry the client's leader
        epoch of each partition after its number."""
        max_wait_ms, min_bytes, max_bytes = request.i32(), request.i32(), request.i32()
        isolation = request.u8()
        n = request.count()
        partitions = []
        for _ in range(n):
            topic, partition = request.str(), request.i32()
            epoch = request.i32() if epochs else -1
            fetch_offset, max_offset, partition_max_bytes = request.i64(), request.i64(), request.i32()
            partitions.append(pb.FetchPartition(topic=topic, partition=partition, fetch_offset=fetch_offset,
                                                max_offset=max_offset, partition_max_bytes=partition_max_bytes,
                                                current_leader_epoch=epoch))
        message = pb.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                                  isolation_level=pb.READ_COMMITTED if isolation == 1 else pb.READ_UNCOMMITTED,
                                  partitions=partitions)
        self._check("/spark_log.broker.v1.Broker/Fetch", message, caller)
        pushdown = data_pushdown.read_block(request)   # FETCH_TIER's too: the tier's rows are filtered here
        if pushdown is not None:
            data_pushdown.apply(pushdown, message, self.manager.image.topics)
        if tier:
            if self.tier_fetch is None:
                raise InvalidRequestError("this broker serves no FETCH_TIER (it knows no tier location)")
            parts = self.tier_fetch.collect(message)
        else:
            parts = self.fetch.collect(message, is_active=is_active)
        self._quota("consumer_byte_rate", caller, lambda: sum(len(payload) for _r, _f, payload in parts if payload))
        out.i32(len(parts))
        for result, _field, payload in parts:
            out.str(result.topic)
            out.i32(result.partition)
            out.error(result.error if result.HasField("error") else None)
            out.i64(result.high_watermark)
            out.i64(result.log_start_offset)
            out.i64(result.next_fetch_offset)
            out.raw(payload)
            out.i32(len(result.aborted_transactions))
            for txn in result.aborted_transactions:
                out.i64(txn.producer_id)
                out.i64(txn.first_offset)
                out.i64(txn.last_offset)
        if pushdown is not None:
            kinds = data_pushdown.payload_kinds(parts)
            out.i32(len(kinds))
            for kind in kinds:
                out.u8(kind)

    def _produce(self, request: _Reader, out: _Writer, caller: Caller, *, transactional_id: str = "") -> None:
        acks, timeout_ms = request.i16(), request.i32()
        n = request.count()
        entries = []
        for _ in range(n):
            topic, partition, epoch = request.str(), request.i32(), request.i32()
            entries.append(ProduceEntry(topic, partition, request.raw(), epoch))  # the records: a view
        message = ProduceView(acks, timeout_ms, transactional_id, tuple(entries))
        response = self._handle_produce(message, caller)
        out.i32(len(response.partitions))
        for part in response.partitions:
            out.str(part.topic)
            out.i32(part.partition)
            out.error(part.error if part.HasField("error") else None)
            out.i64(part.base_offset)
            out.i64(part.last_offset)
            out.u8(1 if part.duplicate else 0)


    # --- the Python clients' transport: gRPC's own messages, this framing ---------------------

    def _pb_produce(self, request: _Reader, out: _Writer, caller: Caller) -> None:
        """PB_PRODUCE: ``Broker.Produce`` with its protobuf request and answer as they are (the
        request read by ``parse_produce_request``: its records stay views of the request)."""
        message = parse_produce_request(request.data[request.at:])
        request.at = len(request.data)
        out.chunks.append(self._handle_produce(message, caller).SerializeToString())

    def _handle_produce(self, message: ProduceRequestLike, caller: Caller) -> pb.ProduceResponse:
        """``Broker.Produce``'s rule, the producer's quota (its delay in ``throttle_time_ms``)
        and ``ProduceHandler``: PRODUCE, PRODUCE_TXN and PB_PRODUCE all go this way."""
        self._check("/spark_log.broker.v1.Broker/Produce", message, caller)
        throttle_ms = self._quota("producer_byte_rate", caller, lambda: sum(len(p.records) for p in message.partitions))
        response = self.produce.handle(message)
        if throttle_ms:
            response.throttle_time_ms = throttle_ms
        return response

    def _pb_fetch(self, request: _Reader, out: _Writer, is_active: Callable[[], bool], caller: Caller) -> None:
        """PB_FETCH: a consumer's ``Broker.Fetch``, answered with the serialised
        ``FetchResponse`` the gRPC method answers (``wire.encode_fetch_response``)."""
        message = _parse_fetch_request(request)
        if message.replica_id >= 0:
            raise InvalidRequestError("PB_FETCH is for consumers (replica_id -1); followers send REPLICA_FETCH")
        self._check("/spark_log.broker.v1.Broker/Fetch", message, caller)
        parts = self.fetch.collect(message, is_active=is_active)
        throttle_ms = self._quota("consumer_byte_rate", caller,
                                  lambda: sum(len(payload) for _r, _f, payload in parts if payload))
        out.chunks.append(encode_fetch_response(parts, throttle_ms))


def _parse_fetch_request(request: _Reader) -> pb.FetchRequest:
    """The rest of ``request`` as a ``FetchRequest``; ``InvalidRequestError`` if it does not parse."""
    try:
        # parsed from the view, without a copy first: protobuf's parsers take any buffer (its stubs say bytes)
        message = pb.FetchRequest.FromString(memoryview(request.data)[request.at:])  # type: ignore[arg-type]
    except DecodeError as exc:
        raise InvalidRequestError(f"malformed FetchRequest in a data listener request: {exc}") from None
    request.at = len(request.data)
    return message


def pb_unknown_code() -> int:
    from spark_log.errors import ErrorCode

    return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def describe_handler(info: Callable[[], dpb.DataListenerInfo]) -> grpc.GenericRpcHandler:
    """The ``DataListener`` gRPC service: where this broker's data listener is."""
    def describe(_request: dpb.DescribeDataListenerRequest, _context: grpc.ServicerContext) -> dpb.DataListenerInfo:
        return info()

    return grpc.method_handlers_generic_handler("spark_log.data.v1.DataListener", {
        "Describe": grpc.unary_unary_rpc_method_handler(
            describe, request_deserializer=dpb.DescribeDataListenerRequest.FromString,
            response_serializer=dpb.DataListenerInfo.SerializeToString),
    })


def check_config(mode: str, config: Any) -> str | None:
    """``None`` when the listener should start, else why not; ``InvalidConfigError`` for
    ``data_listener = "on"`` on a node whose security the listener cannot honour."""
    if mode == "off":
        return "data_listener = off"
    refusal = security_refusal(config)
    if refusal is not None and mode == "on":
        raise InvalidConfigError(f"data_listener = on: {refusal}", key="data_listener")
    return refusal

