"""A follower's connection to its leader's data listener (``REPLICA_FETCH``, issue 19).

``DataFetchClient(host, port, channels=...)`` opens one TCP connection to the leader's
binary data listener (``brokers/server/data_listener.py``, ``replica_listener.py``) with the
node's own security, as its gRPC channels have it:

- ``PLAINTEXT`` nodes: a plain connection;
- TLS nodes: TLS verifying the leader's certificate against the node's CA and host name,
  presenting the node's own certificate (the leader takes its subject as the principal when
  it requires client certificates, as gRPC does); when the node's channels carry the
  inter-node token (``brokers.net.node_auth``), it is sent first with ``NODE_AUTH``, and the
  connection is ``Node:<id>``, as a gRPC call with the token is.

``fetch_session(...)`` sends one ``REPLICA_FETCH_SESSION_V2``: the connection is the fetch
session (``brokers/server/replica_session.py``), so the client keeps what it sent on it and
sends only what changed.  ``fetch(...)`` sends one ``REPLICA_FETCH_V2`` and reads the answer into one buffer with
``recv_into``; each partition's frames are a read-only view of that buffer (one copy from
the kernel, none after it: the follower checks the CRCs and writes the views).
Both name each partition's topic id (``ReplicaWanted.topic_id``, KIP-516: a leader whose
replica has another id answers ``INCONSISTENT_TOPIC_ID``); a leader that predates them refuses
the api (``InvalidRequestError``: the fetcher then fetches it over gRPC, whose
``FetchPartition.topic_id`` such a leader ignores).
``close()`` may be called from any thread: it cancels a fetch in flight (its ``recv``
ends).  Errors: ``OSError`` (``ConnectionError``, ``TimeoutError``, ``ssl.SSLError``) for the
transport, the typed ``SparkLogError`` of a whole-request refusal, ``CorruptRecordError``
for an answer that does not parse.
"""
from __future__ import annotations

import socket
import ssl
import struct
import threading
from typing import NamedTuple, Sequence

from brokers.net.channels import Channels
from brokers.net.node_auth import HEADER as NODE_HEADER
from brokers.net.tls import load_chain
from brokers.partition.messages import Diverging
from spark_log.errors import CorruptRecordError, from_code
from spark_log.unfilled import unfilled_bytearray

from .replica_wire import FETCH_HEAD, I32, OFFSETS, PART, WANTED, ReplicaWanted, name_bytes, read_name

__all__ = ["DataFetchClient", "ReplicaAnswer"]

# brokers.server.replica_listener (not imported here); the follower sends the _V2 ones (topic ids)
NODE_AUTH, REPLICA_FETCH, REPLICA_FETCH_SESSION = 9, 10, 18
REPLICA_FETCH_V2, REPLICA_FETCH_SESSION_V2 = 19, 20
_CONNECT_TIMEOUT_S = 5.0
_U32 = struct.Struct("<I")
_REQUEST_HEAD = struct.Struct("<IBI")  # length, api, correlation id
_ANSWER_HEAD = struct.Struct("<Ih")  # correlation id, error code


class ReplicaAnswer(NamedTuple):
    """One partition of the leader's answer."""

    topic: str
    partition: int
    error_code: int
    error_message: str
    high_watermark: int
    log_start_offset: int
    diverging: Diverging | None
    records: memoryview


def _str(text: str) -> bytes:
    data = text.encode("utf-8")
    return I32.pack(len(data)) + data


class DataFetchClient:
    """One connection to one leader's data listener (module docstring)."""

    def __init__(self, host: str, port: int, *, channels: Channels) -> None:
        self.host, self.port = host, port
        self._correlation = 0
        self._closed = False
        self._lock = threading.Lock()
        self._sent: dict[tuple[str, int], ReplicaWanted] = {}  # this connection's fetch session: what the leader holds
        sock = socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            token = None
            if channels.tls:
                files = getattr(channels, "files", None)
                if files is None:
                    raise ssl.SSLError("the node's TLS channels hold no TLS files")
                sock = _client_context(files).wrap_socket(sock, server_hostname=host)
                token = next((value for key, value in getattr(channels, "metadata", ()) if key == NODE_HEADER), None)
            self._sock = sock
            if token is not None:
                self._call(NODE_AUTH, _str(token if isinstance(token, str) else token.decode()), _CONNECT_TIMEOUT_S)
        except BaseException:
            sock.close()
            raise

    def close(self) -> None:
        """Close the connection (any thread): a fetch in flight ends with an ``OSError``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def fetch(self, *, replica_id: int, max_wait_ms: int, max_bytes: int,
              partitions: Sequence[ReplicaWanted]) -> list[ReplicaAnswer]:
        """One ``REPLICA_FETCH_V2`` (``brokers/server/replica_listener.py``)."""
        names: dict[str, bytes] = {}
        parts = _wanted([FETCH_HEAD.pack(replica_id, max_wait_ms, 1, max_bytes, len(partitions))], partitions, names)
        view = self._call(REPLICA_FETCH_V2, b"".join(parts), max_wait_ms / 1000 + 5.0)
        return _parse(view)

    def fetch_session(self, *, replica_id: int, max_wait_ms: int, max_bytes: int,
                      partitions: Sequence[ReplicaWanted]) -> list[ReplicaAnswer]:
        """One ``REPLICA_FETCH_SESSION_V2`` of ``partitions`` within this connection's fetch
        session: only the requests that changed since the last one travel, and the answer
        holds only the partitions with something new (a partition left out has nothing new:
        the HW it was last told stands).  Any failure closes the connection (the two ends'
        sessions may no longer agree); ``InvalidRequestError``: also a leader that does not
        know the API (the caller uses ``fetch`` on a new connection)."""
        sent = self._sent
        upserts = [w for w in partitions if sent.get((w.topic, w.partition)) != w]
        for w in upserts:
            sent[(w.topic, w.partition)] = w
        removals: list[tuple[str, int]] = []
        if len(sent) != len(partitions):  # every partition is in ``sent`` now: only then did some leave
            keep = {(w.topic, w.partition) for w in partitions}
            removals = [key for key in sent if key not in keep]
            for key in removals:
                del sent[key]
        names: dict[str, bytes] = {}
        parts = _wanted([FETCH_HEAD.pack(replica_id, max_wait_ms, 1, max_bytes, len(upserts))], upserts, names)
        parts.append(I32.pack(len(removals)))
        for topic, index in removals:
            parts.append(name_bytes(topic, names) + I32.pack(index))
        try:
            return _parse(self._call(REPLICA_FETCH_SESSION_V2, b"".join(parts), max_wait_ms / 1000 + 5.0))
        except BaseException:
            self.close()  # the two ends' sessions may differ now: a new connection starts a new one
            raise

    def resend(self, topic: str, partition: int) -> None:
        """Send ``topic-partition``'s request again in the next session fetch, so the leader
        answers it in full (the last answer could not be applied)."""
        self._sent.pop((topic, partition), None)

    # -- wire --------------------------------------------------------------------------------

    def _call(self, api: int, payload: bytes, timeout_s: float) -> memoryview:
        """Send one request, read its answer; the payload after the error as a view."""
        if self._closed:
            raise ConnectionError("data fetch connection closed")
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        sock = self._sock
        sock.settimeout(timeout_s)
        sock.sendall(_REQUEST_HEAD.pack(5 + len(payload), api, self._correlation) + payload)
        (size,) = _U32.unpack(self._exact(4))
        if size < _ANSWER_HEAD.size + 4:
            raise CorruptRecordError(f"data listener answer of {size} bytes is too short")
        buffer = self._exact(size)
        view = memoryview(buffer).toreadonly()
        correlation, code = _ANSWER_HEAD.unpack_from(view, 0)
        if correlation != self._correlation:
            raise CorruptRecordError(f"data listener answered correlation {correlation}, expected {self._correlation}")
        at = _ANSWER_HEAD.size
        (length,) = I32.unpack_from(view, at)
        if length < 0 or at + 4 + length > size:
            raise CorruptRecordError("malformed data listener answer (error message)")
        if code:
            message = bytes(view[at + 4: at + 4 + length]).decode("utf-8", "replace")
            raise from_code(code, message)
        return view[at + 4 + length:]

    def _exact(self, size: int) -> bytearray:
        out = unfilled_bytearray(size)  # every byte is received into it before it is returned
        view = memoryview(out)
        got = 0
        sock = self._sock
        while got < size:
            n = sock.recv_into(view[got:], size - got)
            if n == 0:
                raise ConnectionError("the leader's data listener closed the connection")
            got += n
        return out


def _wanted(parts: list[bytes], partitions: Sequence[ReplicaWanted], names: dict[str, bytes]) -> list[bytes]:
    """``parts`` with each partition's request appended (the _V2 layout: its name, its topic
    id, ``replica_wire.WANTED``)."""
    pack = WANTED.pack
    for topic, index, fetch_offset, leader_epoch, last_epoch, log_start, partition_max, topic_id in partitions:
        parts.append(name_bytes(topic, names) + name_bytes(topic_id, names) +
                     pack(index, fetch_offset, leader_epoch, last_epoch, log_start, partition_max))
    return parts


def _parse(view: memoryview) -> list[ReplicaAnswer]:
    """The answer's partitions (``replica_wire``): a partition without an error is one
    ``struct`` call after its topic name; one with an error is read field by field."""
    try:
        (n,) = I32.unpack_from(view, 0)
        at = 4
        out: list[ReplicaAnswer] = []
        names: dict[bytes, str] = {}
        total = len(view)
        for _ in range(n):
            topic, at = read_name(view, at, names)
            partition, code, message_length, leader_length, hw, _lso, log_start, _leo, _next, div_epoch, div_end, size = \
                PART.unpack_from(view, at)
            if code == 0 and message_length == 0 and leader_length == 0:
                message = ""
                at += PART.size
            else:
                message, at = read_name(view, at + 6, names)  # the same coding as a name
                _leader, at = read_name(view, at, names)
                hw, _lso, log_start, _leo, _next, div_epoch, div_end, size = OFFSETS.unpack_from(view, at)
                at += OFFSETS.size
            if size < 0 or at + size > total:
                raise CorruptRecordError("malformed REPLICA_FETCH answer: frames run past the answer")
            records = view[at: at + size]
            at += size
            diverging = Diverging(div_epoch, div_end) if div_epoch >= 0 else None
            out.append(ReplicaAnswer(topic, partition, code, message, hw, log_start, diverging, records))
    except struct.error as exc:
        raise CorruptRecordError(f"malformed REPLICA_FETCH answer: {exc}") from None
    except ValueError as exc:  # a string past the answer or not UTF-8
        raise CorruptRecordError(f"malformed REPLICA_FETCH answer: {exc}") from None
    return out


def _client_context(files: object) -> ssl.SSLContext:
    """A client context of the node's current TLS material: its CA (or the system roots), its
    own certificate presented, the leader's name checked."""
    material = files.current()  # type: ignore[attr-defined]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if material.ca:
        context.load_verify_locations(cadata=material.ca.decode("ascii"))
    else:
        context.load_default_certs()
    load_chain(context, material, prefix="replica-fetch-tls-")
    return context
