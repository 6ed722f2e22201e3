"""What every client shares: bootstrap resolution, a channel pool and a metadata cache.

``Cluster`` keeps one gRPC channel per broker address (a channel multiplexes any number of
concurrent calls, so producers pipeline on it), caches topic metadata, refreshes it on
demand and after retriable errors, and turns ``grpc.RpcError`` into typed
``spark_log.errors`` exceptions.  Thread-safe: one ``Cluster`` may serve many threads.

Bootstrap resolution (``resolve_bootstrap``): the argument (``"host:port[,host:port...]"`` or
a list), else ``$SPARK_LOG_BOOTSTRAP``, else the file ``bootstrap`` in the local dev cluster's
data directory (``$SPARK_LOG_DATA_DIR`` or ``./.spark-log``), else ``InvalidConfigError``.

Security resolution (``resolve_security``): the ``security`` argument (a
``ClientSecurity``), else the Kafka-style properties file named by
``$SPARK_LOG_CLIENT_CONFIG``, else, when the bootstrap itself comes from the dev cluster's
``bootstrap`` file, the ``client.properties`` next to it (written by ``spark-log dev up
--tls``), else plaintext.  Channels are opened by ``_secure_channel.open_channel`` (TLS,
SCRAM sessions per broker, the client id).

Leader epochs (KIP-320).  The cache remembers, per (topic, partition), the partition's
metadata with the highest leader epoch seen (it survives ``forget``; a topic recreated
under the same name has a new topic id and starts over).  An answer whose leader epoch for
a partition is lower is *stale* for it (a broker behind the metadata log, or a deposed
leader cut off from the controller that still believes it leads): the remembered entry is
kept, never the older leader, and the refresh goes on to the next broker; a broker that
answered stale is asked last by the next refreshes until it answers fresh.  Equal or higher
epochs are taken as they come.  ``leader`` hands out the epoch with the address;
ListOffsets and consumer fetches carry it, and the broker refuses one that does not match
its own (``FencedLeaderEpochError`` / ``UnknownLeaderEpochError``, retried
after a refresh).  A client that has only ever talked to a zombie leader knows no newer
epoch and may read its stale answer: that is Kafka's model too.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TypeVar

import grpc
import pyarrow as pa

from . import errors
from .errors import (
    BrokerNotAvailableError,
    InvalidConfigError,
    SparkLogError,
    UnknownTopicOrPartitionError,
)
from .proto import broker_pb2 as pb
from .proto import broker_pb2_grpc as rpc
from .schemas import schema_from_bytes
from .security import ClientSecurity
from ._data_transport import PB_FETCH, PB_PRODUCE, RETRY_S, DataTransport, describe_listener
from ._secure_channel import open_channel

__all__ = ["Cluster", "TopicInfo", "resolve_bootstrap", "resolve_security", "CHANNEL_OPTIONS", "error_from_pb",
           "TRANSPORTS"]

T = TypeVar("T")
log = logging.getLogger(__name__)

TRANSPORTS = ("auto", "grpc")  # produce and fetch: the brokers' data listeners when usable, or gRPC only
_DESCRIBE_S = 5.0

DEFAULT_DATA_DIR = ".spark-log"
CHANNEL_OPTIONS = (
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.enable_retries", 0),
)


def resolve_bootstrap(bootstrap: str | Sequence[str] | None) -> list[str]:
    """Broker addresses to start from (see the module docstring for the order)."""
    if bootstrap is None:
        bootstrap = os.environ.get("SPARK_LOG_BOOTSTRAP") or None
    if bootstrap is None:
        path = Path(os.environ.get("SPARK_LOG_DATA_DIR") or DEFAULT_DATA_DIR) / "bootstrap"
        if path.is_file():
            bootstrap = path.read_text().strip() or None
    if bootstrap is None:
        raise InvalidConfigError(
            "no bootstrap address: pass bootstrap='host:port', set SPARK_LOG_BOOTSTRAP, "
            "or start a local cluster with 'spark-log dev up'"
        )
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    addresses = [item.strip() for item in items if item and item.strip()]
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise InvalidConfigError(f"bootstrap address {address!r} is not host:port")
    if not addresses:
        raise InvalidConfigError("bootstrap is empty")
    return addresses


CLIENT_CONFIG_ENV = "SPARK_LOG_CLIENT_CONFIG"
CLIENT_CONFIG_FILE = "client.properties"


def resolve_security(security: ClientSecurity | None,
                     bootstrap: str | Sequence[str] | None) -> ClientSecurity | None:
    """The client's security settings (see the module docstring for the order)."""
    if security is not None:
        if not isinstance(security, ClientSecurity):
            raise InvalidConfigError(f"security must be a spark_log.ClientSecurity, got {type(security).__name__}",
                                     key="security")
        return security
    named = os.environ.get(CLIENT_CONFIG_ENV)
    if named:
        return ClientSecurity.from_file(named).with_files_relative_to(Path(named).resolve().parent)
    if bootstrap is None and not os.environ.get("SPARK_LOG_BOOTSTRAP"):
        directory = Path(os.environ.get("SPARK_LOG_DATA_DIR") or DEFAULT_DATA_DIR)
        path = directory / CLIENT_CONFIG_FILE
        if (directory / "bootstrap").is_file() and path.is_file():
            return ClientSecurity.from_file(path).with_files_relative_to(path.resolve().parent)
    return None


def error_from_pb(error: pb.Error) -> SparkLogError | None:
    """The typed error of a per-partition ``Error`` message, or None when it says none."""
    if error.code == 0:
        return None
    details: dict[str, Any] = {}
    if error.leader_address:
        details["leader_address"] = error.leader_address
    return errors.from_code(error.code, error.message, **details)


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic as the cluster described it at some point (immutable snapshot)."""

    name: str
    kind: str  # "bytes" or "typed"
    partitions: dict[int, pb.PartitionMeta]
    schemas: dict[int, pa.Schema]
    schema_id: int  # the current schema's id
    key_columns: tuple[str, ...]
    fetched_at: float = field(default=0.0, compare=False)

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    @property
    def schema(self) -> pa.Schema:
        return self.schemas[self.schema_id]


def topic_info_from_pb(meta: pb.TopicMeta | pb.TopicDescription) -> TopicInfo:
    schemas = {s.schema_id: schema_from_bytes(s.arrow_schema) for s in meta.schemas}
    current = meta.schemas[-1].schema_id if meta.schemas else -1
    return TopicInfo(
        name=meta.name,
        kind=meta.kind or "bytes",
        partitions={p.partition: p for p in meta.partitions},
        schemas=schemas,
        schema_id=current,
        key_columns=tuple(meta.key_columns),
        fetched_at=time.monotonic(),
    )


# Read-only requests (metadata, Admin describes and lists) give each broker at most this
# long, then ask the next one (a stalled broker must not cost a whole request timeout);
# a timed-out or unreachable broker is skipped.  Asking again elsewhere is safe only for them.
READ_TRY_S = 10.0
_SKIP_READ = (BrokerNotAvailableError, errors.RequestTimeoutError)


class Cluster:
    """Channels, stubs and cached metadata for one cluster (see the module docstring)."""

    def __init__(self, bootstrap: str | Sequence[str] | None = None, *, request_timeout_s: float = 30.0,
                 security: ClientSecurity | None = None, client_id: str = "", transport: str = "auto") -> None:
        self.bootstrap = resolve_bootstrap(bootstrap)
        self.security = resolve_security(security, bootstrap)
        if not isinstance(client_id, str):
            raise InvalidConfigError(f"client_id must be a string, got {client_id!r}", key="client_id")
        if transport not in TRANSPORTS:
            raise InvalidConfigError(f"invalid value for 'transport': {transport!r}; use one of {', '.join(TRANSPORTS)}",
                                     key="transport")
        self.client_id = client_id
        # produce and fetch over the brokers' data listeners (_data_transport.py): plaintext clients only
        self.transport = transport
        plaintext = self.security is None or not (self.security.tls or self.security.scram)
        self._data = DataTransport(client_id=client_id) if transport == "auto" and plaintext else None
        # address -> (its Produce and Fetch routes, or None until the monotonic time to ask again)
        self._data_routes: dict[str, tuple[tuple[_DataRoute, _DataRoute] | None, float]] = {}
        self.request_timeout_s = request_timeout_s
        self._lock = threading.RLock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, tuple[grpc.Channel, rpc.BrokerStub, Any, Any]] = {}
        self._brokers: dict[int, str] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._metadata_offset = -1  # highest metadata offset seen in an answer
        self._refreshes = 0  # each refresh starts with the next broker (see refresh)
        # (topic, partition) -> (topic id, the partition's metadata with the highest leader epoch seen)
        self._newest: dict[tuple[str, int], tuple[str, pb.PartitionMeta]] = {}
        self._stale_addresses: set[str] = set()  # answered a stale leader epoch: asked last
        self.stale_answers = 0  # metadata answers found stale for some partition (tests, metrics)
        self._closed = False

    # -- channels ---------------------------------------------------------------------

    def channel(self, address: str) -> grpc.Channel:
        with self._lock:
            if self._closed:
                raise BrokerNotAvailableError("client is closed")
            channel = self._channels.get(address)
            if channel is None:
                channel = open_channel(address, self.security, client_id=self.client_id, options=CHANNEL_OPTIONS,
                                       timeout_s=self.request_timeout_s)
                self._channels[address] = channel
            return channel

    def broker(self, address: str) -> rpc.BrokerStub:
        """The ``Broker`` stub of ``address`` (made once per channel: a stub builds a callable
        per method, which the producer would otherwise pay on every request)."""
        channel = self.channel(address)
        stub = self._stubs.get(address)
        if stub is None or stub[0] is not channel:
            stub = self._stubs[address] = (channel, rpc.BrokerStub(channel),
                                           channel.unary_unary("/spark_log.broker.v1.Broker/Fetch",
                                                               request_serializer=pb.FetchRequest.SerializeToString),
                                           channel.unary_unary("/spark_log.broker.v1.Broker/Produce",
                                                               response_deserializer=pb.ProduceResponse.FromString))
        return stub[1]

    def produce_raw(self, address: str) -> Any:
        """``Broker.Produce`` of ``address`` taking a serialised ``ProduceRequest``
        (``fetch_wire.encode_produce_request``: frames copied once): its ``future(request,
        timeout=)`` is a gRPC future or a ``DataCall`` (the data listener, ``transport``)."""
        route = self._data_route(address)
        if route is not None:
            return route[0]
        self.broker(address)
        return self._stubs[address][3]

    def fetch_raw(self, address: str) -> Any:
        """``Broker.Fetch`` of ``address`` answering the serialised ``FetchResponse`` bytes
        (read with ``fetch_wire.parse_fetch_response``: no copy of the records); as
        ``produce_raw``, over the data listener when there is one."""
        route = self._data_route(address)
        if route is not None:
            return route[1]
        self.broker(address)
        return self._stubs[address][2]

    def _data_route(self, address: str) -> tuple[_DataRoute, _DataRoute] | None:
        """The data listener's Produce and Fetch of ``address`` (None: use gRPC), asked of the
        broker with ``DataListener.Describe`` once and again ``RETRY_S`` after a failure."""
        if self._data is None:
            return None
        routes, retry_at = self._data_routes.get(address, (None, 0.0))
        if routes is not None or time.monotonic() < retry_at:
            return routes
        host, port = self._describe_data_listener(address)
        if not port:
            self._data_routes[address] = (None, time.monotonic() + RETRY_S)
            return None
        self.broker(address)
        _channel, _stub, grpc_fetch, grpc_produce = self._stubs[address]

        def unusable() -> None:
            self._data_routes[address] = (None, time.monotonic() + RETRY_S)

        routes = (_DataRoute(self._data, host, port, PB_PRODUCE, bytes, _produce_response, grpc_produce, unusable),
                  _DataRoute(self._data, host, port, PB_FETCH, pb.FetchRequest.SerializeToString, _as_is, grpc_fetch,
                             unusable))  # the fetch answer's bytes as they are: parse_fetch_response copies no records
        self._data_routes[address] = (routes, 0.0)
        return routes

    def _describe_data_listener(self, address: str) -> tuple[str, int]:
        try:
            info = describe_listener(self.channel(address), min(self.request_timeout_s, _DESCRIBE_S))
        except grpc.RpcError:
            return "", 0
        host = info.host if info.host not in ("", "0.0.0.0", "::") else address.rsplit(":", 1)[0].strip("[]")
        return host, int(info.port)

    def admin(self, address: str) -> rpc.AdminStub:
        return rpc.AdminStub(self.channel(address))

    def addresses(self) -> list[str]:
        """Known live broker addresses first, then the bootstrap ones."""
        with self._lock:
            known = list(self._brokers.values())
        return known + [a for a in self.bootstrap if a not in known]

    def broker_address(self, broker_id: int) -> str | None:
        with self._lock:
            return self._brokers.get(broker_id)

    def call_any(self, call: Callable[[str], T], *, read_only: bool = False) -> T:
        """Run ``call(address)`` against brokers in turn until one is reachable.  With
        ``read_only`` a timed-out call moves on to the next broker too (asking again
        elsewhere is safe; a write that timed out may still have happened)."""
        skip: tuple[type[SparkLogError], ...] = _SKIP_READ if read_only else (BrokerNotAvailableError,)
        last: SparkLogError | None = None
        for address in self.addresses():
            try:
                return call(address)
            except grpc.RpcError as exc:
                error = errors.from_rpc_error(exc, address=address)
                if not isinstance(error, skip):
                    raise error from None
                last = error
        raise last or BrokerNotAvailableError("no broker reachable at " + ",".join(self.bootstrap))

    # -- metadata ---------------------------------------------------------------------

    def refresh(self, topics: Iterable[str] | None = None, *, auto_create: bool = False) -> pb.MetadataResponse:
        """Ask a broker for metadata (of ``topics``, or all topics) and update the cache.
        ``auto_create`` (producers): a named topic that does not exist is created by a broker
        with ``auto_create_topics`` on (Kafka's ``allow_auto_topic_creation``)."""
        names = sorted(set(topics)) if topics is not None else []
        request = pb.MetadataRequest(topics=names, all_topics=topics is None,
                                     allow_auto_topic_creation=auto_create and topics is not None)
        best: pb.MetadataResponse | None = None
        last: SparkLogError | None = None
        # A broker behind the metadata log is skipped if another is ahead; one that does not
        # answer within READ_TRY_S (stalled, or cut off) is skipped too: a metadata
        # request is read-only, so asking the next broker is always safe.  Each refresh
        # starts with the next broker: a broker cut off from the others answers with an old
        # image that no answer seen so far is ahead of, and asking it first every time kept
        # a producer sending to a deposed leader for good (a real network partition did).
        # An answer stale in a partition's leader epoch (module docstring) is used only when
        # no broker gives a fresh one, and then only for what it does not regress.
        try_timeout_s = min(self.request_timeout_s, READ_TRY_S)
        addresses = self.addresses()
        with self._lock:
            start = self._refreshes % len(addresses) if addresses else 0
            self._refreshes += 1
            stale_addresses = set(self._stale_addresses)
        ordered = addresses[start:] + addresses[:start]
        ordered = [a for a in ordered if a not in stale_addresses] + [a for a in ordered if a in stale_addresses]
        best_stale = True
        for address in ordered:
            try:
                answer = self.broker(address).Metadata(request, timeout=try_timeout_s)
            except grpc.RpcError as exc:
                error = errors.from_rpc_error(exc, address=address)
                if not isinstance(error, _SKIP_READ):
                    raise error from None
                last = error
                continue
            stale = self._is_stale(answer)
            with self._lock:
                self.stale_answers += stale
                (self._stale_addresses.add if stale else self._stale_addresses.discard)(address)
            if best is None or (best_stale and not stale) or (
                    best_stale == stale and answer.metadata_offset > best.metadata_offset):
                best, best_stale = answer, stale
            if not stale and answer.metadata_offset >= self._metadata_offset:
                break
        if best is None:
            raise last or BrokerNotAvailableError("no broker reachable at " + ",".join(self.bootstrap))
        response = best
        if not best_stale:  # a stale image's offset says nothing about how new the others are
            self._metadata_offset = max(self._metadata_offset, response.metadata_offset)
        with self._lock:
            if best_stale:  # keep addresses of brokers a stale image may not list
                self._brokers.update({b.broker_id: b.address for b in response.brokers})
            else:
                self._brokers = {b.broker_id: b.address for b in response.brokers}
            for meta in response.topics:
                if meta.error.code:
                    self._topics.pop(meta.name, None)
                else:
                    self._topics[meta.name] = self._newest_info(meta)
            if topics is None:
                present = {m.name for m in response.topics}
                for name in list(self._topics):
                    if name not in present:
                        del self._topics[name]
        return response

    def _is_stale(self, answer: pb.MetadataResponse) -> bool:
        """Whether ``answer`` names an older leader epoch for some partition than one seen."""
        with self._lock:
            for meta in answer.topics:
                if meta.error.code:
                    continue
                if any(self._older(meta, part) is not None for part in meta.partitions):
                    return True
        return False

    def _older(self, meta: pb.TopicMeta, part: pb.PartitionMeta) -> pb.PartitionMeta | None:
        """The remembered entry of ``part`` when ``part`` names an older leader epoch of the
        same topic id (a stale answer for it), else None (caller holds the lock)."""
        known = self._newest.get((meta.name, part.partition))
        if known is not None and known[0] == meta.topic_id and part.leader_epoch < known[1].leader_epoch:
            return known[1]
        return None

    def _newest_info(self, meta: pb.TopicMeta) -> TopicInfo:
        """``meta`` as a ``TopicInfo``, each partition at the highest leader epoch seen
        (remembered here; caller holds the lock)."""
        info = topic_info_from_pb(meta)
        for index, part in list(info.partitions.items()):
            kept = self._older(meta, part)
            if kept is not None:
                info.partitions[index] = kept  # a stale answer for this partition: keep the newer entry
            else:
                self._newest[(meta.name, index)] = (meta.topic_id, part)
        return info

    def known_leader_epoch(self, topic: str, partition: int) -> int:
        """The highest leader epoch seen for the partition (-1: none)."""
        with self._lock:
            known = self._newest.get((topic, partition))
        return known[1].leader_epoch if known is not None else -1

    def topic(self, name: str, *, refresh: bool = False, auto_create: bool = False) -> TopicInfo:
        """Cached metadata of ``name``; raises ``UnknownTopicOrPartitionError`` if absent (or
        the typed error a broker gave for creating it, with ``auto_create``: see ``refresh``)."""
        if not refresh:
            info = self._topics.get(name)  # no lock: a dict read is atomic (the producer asks once per send)
            if info is not None:
                return info
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            response = self.refresh([name], auto_create=auto_create)
            with self._lock:
                info = self._topics.get(name)
            if info is not None:
                return info
            error = next((m.error for m in response.topics if m.name == name and m.error.code), None)
            if error is None or error.code == UnknownTopicOrPartitionError.code:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            if error.code != errors.RequestTimeoutError.code or time.monotonic() >= deadline:
                raise errors.from_code(error.code, error.message)  # e.g. auto-creation refused by the controller
            time.sleep(0.05)  # auto-created, not yet in that broker's metadata: polling it again

    def forget(self, name: str) -> None:
        with self._lock:
            self._topics.pop(name, None)

    def leader(self, topic: str, partition: int, *, refresh: bool = False) -> tuple[str, int]:
        """``(address, leader_epoch)`` of the partition's leader."""
        info = self.topic(topic, refresh=refresh)
        meta = info.partitions.get(partition)
        if meta is None:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has no partition {partition} (it has {info.num_partitions})"
            )
        address = self.broker_address(meta.leader_id) if meta.leader_id >= 0 else None
        if address is None:
            from .errors import NotLeaderError

            raise NotLeaderError(f"partition {topic}-{partition} has no live leader right now")
        return address, meta.leader_epoch

    def note_leader(self, topic: str, partition: int, leader_address: str | None) -> None:
        """A NOT_LEADER answer named the new leader: drop the stale entry so the next call refreshes."""
        self.forget(topic)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels, self._channels = list(self._channels.values()), {}
        if self._data is not None:
            self._data.close()
        for channel in channels:
            channel.close()


def _produce_response(answer: memoryview) -> pb.ProduceResponse:
    return pb.ProduceResponse.FromString(bytes(answer))


def _as_is(answer: memoryview) -> memoryview:
    return answer


class _DataRoute:
    """``future(request, timeout=)`` of one broker's data listener for one api, gRPC's
    ``future`` when no connection can be opened to it (the route is then left for
    ``RETRY_S``: ``unusable``)."""

    def __init__(self, transport: DataTransport, host: str, port: int, api: int, serialize: Callable[[Any], bytes],
                 parse: Callable[[memoryview], Any], grpc_call: Any, unusable: Callable[[], None]) -> None:
        self._transport, self._host, self._port, self._api = transport, host, port, api
        self._serialize, self._parse = serialize, parse
        self._grpc_call, self._unusable = grpc_call, unusable

    def future(self, request: Any, *, timeout: float) -> Any:
        payload = self._serialize(request)
        try:
            return self._transport.call(self._host, self._port, self._api, payload, timeout, self._parse)
        except (OSError, SparkLogError) as exc:
            if self._transport.closed:
                raise BrokerNotAvailableError("client is closed") from None
            log.info("data listener at %s:%d not usable (%s): gRPC for %.0f s", self._host, self._port, exc, RETRY_S)
            self._unusable()
            return self._grpc_call.future(request, timeout=timeout)


def retry(
    call: Callable[[], T],
    *,
    cluster: Cluster,
    topics: Sequence[str] = (),
    deadline_s: float = 30.0,
    backoff_s: float = 0.05,
    brief: tuple[type[SparkLogError], ...] = (),
    brief_s: float = 5.0,
) -> T:
    """Run ``call`` and retry it on retriable errors until ``deadline_s``, refreshing the
    metadata of ``topics`` before a retry when the error asks for it.  Errors of a type in
    ``brief`` are retried for ``brief_s`` only (long enough for a lagging broker to catch
    up, short enough for a definitive answer not to look like a hang)."""
    started = time.monotonic()
    deadline = started + deadline_s
    delay = backoff_s
    while True:
        try:
            return call()
        except grpc.RpcError as exc:
            error: SparkLogError = errors.from_rpc_error(exc)
        except SparkLogError as exc:
            error = exc
        now = time.monotonic()
        if not error.retriable or now + delay > deadline or (isinstance(error, brief) and now - started >= brief_s):
            raise error
        if error.refresh_metadata:
            for name in topics:
                cluster.forget(name)
        time.sleep(delay)  # backoff between attempts, not synchronisation
        delay = min(delay * 2, 1.0)
