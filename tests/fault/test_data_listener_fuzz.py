"""Fuzzing a live broker's data listener through raw sockets (hypothesis).

The data listener (``brokers/server/data_listener.py``) carries the Python clients' produce
and fetch, the JVM connector's every request and the followers' fetches, in a binary framing
of its own; ``test_broker_fuzz.py`` does the same for the gRPC API.  A one-node cluster holds
a topic with sentinel records written first.  Hypothesis then sends, over plain TCP (no
client library in between):

- garbage payloads behind a well-formed request head, for every api number the listener
  knows and some it does not;
- well-formed requests of every client api (METADATA, LIST_OFFSETS, FETCH, FETCH_TIER,
  PRODUCE, PRODUCE_TXN, the _V2 variants, PB_PRODUCE, PB_FETCH, CLIENT_ID) with absurd field
  values: negative, huge, unknown topics and partitions, names that are not UTF-8, damaged
  frames;
- broken framing: a declared length below the head or above the limit, a request cut short.

A well-framed request must get an answer with its correlation id: success or a typed error
code, never the listener's catch-all (``STORAGE_ERROR`` "... failed on the broker", which
means a handler met input it did not expect), at the top or inside a partition's answer.
Broken framing may close the connection.  After every example the broker must still answer
METADATA.  At the end (the module fixture's teardown, on every worker that ran some of it)
every sentinel is still stored, byte for byte, at its offset, the logs read back as valid
frames, each high watermark is where its log ends (no fake follower fetch moved one), and
the broker's log holds no handler failure.  About 10 s; ``make fuzz`` searches longer.
"""
from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokers.launcher.local import LocalCluster
from brokers.server import data_listener as dl
from spark_log import Admin
from spark_log.errors import ErrorCode
from spark_log.proto import broker_pb2 as pb
from tests.support.data_client import describe
from tests.support.fuzz import assert_sentinels_kept, damaged_frames, frame, fuzz_settings, write_sentinels
from tests.support.replica_logs import read_replica, replica_dir

pytestmark = [pytest.mark.fault]

TOPIC = "fuzzed-dl"
FUZZ = fuzz_settings(25)
_I16, _I32, _I64, _U8, _U32 = (struct.Struct(f) for f in ("<h", "<i", "<q", "<B", "<I"))
CATCH_ALL = b"failed on the broker"
FETCHES = (dl.FETCH, dl.FETCH_V2, dl.FETCH_TIER, dl.FETCH_TIER_V2)
CLIENT_APIS = (dl.METADATA, dl.LIST_OFFSETS, dl.FETCH, dl.PRODUCE, dl.SCRAM_START, dl.SCRAM_FINISH, dl.PRODUCE_TXN,
               dl.FETCH_TIER, dl.LIST_OFFSETS_V2, dl.FETCH_V2, dl.FETCH_TIER_V2, dl.METADATA_V2, dl.PB_PRODUCE,
               dl.PB_FETCH, dl.CLIENT_ID)
REPLICA_FETCHES = (dl.REPLICA_FETCH, dl.REPLICA_FETCH_SESSION, dl.REPLICA_FETCH_V2, dl.REPLICA_FETCH_SESSION_V2)
EVERY_API = CLIENT_APIS + (dl.NODE_AUTH,) + REPLICA_FETCHES + (0, 21, 99, 255)
TIMEOUT_S = 90.0  # above the longest wait a request may ask for (a fetch's 60 s)


class Broker:
    def __init__(self, cluster: LocalCluster, address: tuple[str, int], stored: list[tuple[int, bytes]]) -> None:
        self.cluster, self.address, self.stored = cluster, address, stored


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    cluster = LocalCluster(tmp_path_factory.mktemp("dl-fuzz"), brokers=1)
    cluster.up(timeout_s=60)
    try:
        stored = write_sentinels(cluster.bootstrap, TOPIC)
        info = describe(cluster.bootstrap.split(",")[0])
        broker = Broker(cluster, (info.host, info.port), stored)
        yield broker
        # after the last test of this module on this worker (xdist may split a module across
        # workers, each with its own cluster): a failure here is an error of that test
        assert_nothing_lost(broker)
    finally:
        cluster.down(timeout_s=20)


def _exact(sock: socket.socket, n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def send_raw(broker: Broker, data: bytes) -> bytes | None:
    """``data`` as they are on a new connection; the first answer's body, or None when the
    broker closed the connection without one."""
    with socket.create_connection(broker.address, timeout=TIMEOUT_S) as sock:
        sock.sendall(data)
        head = _exact(sock, 4)
        if head is None:
            return None
        return _exact(sock, _U32.unpack(head)[0])


def ask(broker: Broker, api: int, payload: bytes, what: str) -> tuple[int, str, bytes]:
    """One well-framed request: (error code, message, the answer's payload).  Fails the test
    on a closed connection, a wrong correlation id or the listener's catch-all anywhere."""
    correlation = 0x5EED
    body = send_raw(broker, _U32.pack(5 + len(payload)) + _U8.pack(api) + _U32.pack(correlation) + payload)
    assert body is not None, f"{what}: the broker closed the connection instead of answering"
    assert _U32.unpack_from(body, 0)[0] == correlation, f"{what}: wrong correlation id"
    (code,) = _I16.unpack_from(body, 4)
    (size,) = _I32.unpack_from(body, 6)
    message = body[10:10 + size].decode()
    assert code in set(ErrorCode), f"{what}: unknown error code {code}: {message}"
    assert CATCH_ALL not in body, f"{what}: a handler did not expect this input: {body[:300]!r}"
    return code, message, body[10 + size:]


def assert_up(broker: Broker) -> None:
    code, message, _ = ask(broker, dl.METADATA, _I32.pack(1) + _s(TOPIC), "METADATA after the example")
    assert code == 0, f"the broker stopped answering METADATA: [{code}] {message}"


def _s(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return _I32.pack(len(data)) + data


# -- strategies ---------------------------------------------------------------------------------------

i16s = st.one_of(st.sampled_from([-32768, -2, -1, 0, 1, 2, 32767]), st.integers(-32768, 32767))
i32s = st.one_of(st.sampled_from([-2**31, -2, -1, 0, 1, 2, 40, 2**31 - 1]), st.integers(-2**31, 2**31 - 1))
i64s = st.one_of(st.sampled_from([-2**63, -2, -1, 0, 1, 39, 40, 41, 2**62, 2**63 - 1]), st.integers(-2**63, 2**63 - 1))
u8s = st.integers(0, 255)
waits = st.sampled_from([-1, 0, 1, 50, 2**31 - 1])
names = st.one_of(st.sampled_from([TOPIC.encode(), b"", b"nope", b"__consumer_offsets", b"\xff\xfe", b"a" * 300,
                                   b"\xc3(", b"x\x00y"]),
                  st.binary(max_size=40))


def _counted(items: list[bytes]) -> bytes:
    return _I32.pack(len(items)) + b"".join(items)


@st.composite
def fetch_payloads(draw: st.DrawFn, epochs: bool) -> bytes:
    head = _I32.pack(draw(waits)) + _I32.pack(draw(i32s)) + _I32.pack(draw(i32s)) + _U8.pack(draw(u8s))
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        part = _s(draw(names)) + _I32.pack(draw(i32s))
        if epochs:
            part += _I32.pack(draw(i32s))
        parts.append(part + _I64.pack(draw(i64s)) + _I64.pack(draw(i64s)) + _I32.pack(draw(i32s)))
    tail = draw(st.one_of(st.just(b""), st.binary(max_size=64)))  # a pushdown block, or garbage in its place
    return head + _counted(parts) + tail


@st.composite
def list_offsets_payloads(draw: st.DrawFn, epochs: bool) -> bytes:
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        part = _s(draw(names)) + _I32.pack(draw(i32s))
        parts.append(part + (_I32.pack(draw(i32s)) if epochs else b""))
    return _I64.pack(draw(i64s)) + _U8.pack(draw(u8s)) + _counted(parts)


@st.composite
def produce_payloads(draw: st.DrawFn) -> bytes:
    head = _I16.pack(draw(i16s)) + _I32.pack(draw(st.sampled_from([-1, 0, 1, 50, 2**31 - 1])))
    parts = []
    for _ in range(draw(st.integers(0, 2))):
        whole = frame([b"fuzz-" + bytes([i]) for i in range(draw(st.integers(1, 4)))])
        frames = draw(st.one_of(st.just(whole), damaged_frames(), st.binary(max_size=200)))
        parts.append(_s(draw(names)) + _I32.pack(draw(st.integers(-3, 3))) + _I32.pack(draw(i32s)) + _s(frames))
    return head + _counted(parts)


# -- garbage ------------------------------------------------------------------------------------------

@FUZZ
@given(api=st.sampled_from(EVERY_API), body=st.binary(max_size=512), wait=st.integers(0, 50))
def test_garbage_payloads_get_typed_answers(broker: Broker, api: int, body: bytes, wait: int) -> None:
    if api in FETCHES:  # a fetch's first field is how long it may wait: keep garbage from asking for a minute
        body = _I32.pack(wait) + body[4:]
    ask(broker, api, body, f"api {api} with {len(body)} garbage bytes")
    assert_up(broker)


@FUZZ
@given(api=st.sampled_from((dl.PB_PRODUCE, dl.PB_FETCH)), body=st.binary(max_size=512))
def test_garbage_protobuf_gets_typed_answers(broker: Broker, api: int, body: bytes) -> None:
    ask(broker, api, body, f"api {api} with {len(body)} garbage protobuf bytes")
    assert_up(broker)


# -- absurd values in well-formed requests -----------------------------------------------------------

@FUZZ
@given(v2=st.booleans(), count=st.sampled_from([-2, -1, 0, 1, 2]), topics=st.lists(names, max_size=3))
def test_absurd_metadata_gets_typed_answers(broker: Broker, v2: bool, count: int, topics: list[bytes]) -> None:
    payload = _I32.pack(count) + b"".join(_s(t) for t in topics)
    ask(broker, dl.METADATA_V2 if v2 else dl.METADATA, payload, f"METADATA {count} {topics}")
    assert_up(broker)


@FUZZ
@given(api=st.sampled_from(FETCHES), data=st.data())
def test_absurd_fetches_get_typed_answers(broker: Broker, api: int, data: st.DataObject) -> None:
    payload = data.draw(fetch_payloads(api in (dl.FETCH_V2, dl.FETCH_TIER_V2)))
    ask(broker, api, payload, f"api {api} {payload[:120]!r}")
    assert_up(broker)


@FUZZ
@given(v2=st.booleans(), data=st.data())
def test_absurd_list_offsets_get_typed_answers(broker: Broker, v2: bool, data: st.DataObject) -> None:
    payload = data.draw(list_offsets_payloads(v2))
    ask(broker, dl.LIST_OFFSETS_V2 if v2 else dl.LIST_OFFSETS, payload, f"LIST_OFFSETS {payload[:120]!r}")
    assert_up(broker)


@FUZZ
@given(txn=st.one_of(st.none(), names), data=st.data())
def test_absurd_produces_get_typed_answers(broker: Broker, txn: bytes | None, data: st.DataObject) -> None:
    payload = data.draw(produce_payloads())
    api = dl.PRODUCE if txn is None else dl.PRODUCE_TXN
    ask(broker, api, payload if txn is None else _s(txn) + payload, f"api {api} {payload[:120]!r}")
    assert_up(broker)


@FUZZ
@given(acks=i16s, timeout=st.sampled_from([-1, 0, 50, 2**31 - 1]), topic=names, partition=st.integers(-3, 3),
       replica=st.sampled_from([-2, -1, 0, 1, 7]), max_wait=st.sampled_from([-1, 0, 50, 2**31 - 1]),
       offset=i64s, max_bytes=i32s)
def test_absurd_protobuf_requests_get_typed_answers(broker: Broker, acks: int, timeout: int, topic: bytes,
                                                    partition: int, replica: int, max_wait: int, offset: int,
                                                    max_bytes: int) -> None:
    name = topic.decode("utf-8", "replace")
    produce = pb.ProduceRequest(acks=acks, timeout_ms=timeout, partitions=[pb.PartitionRecords(
        topic=name, partition=partition, records=frame([b"pb-fuzz"]))])
    ask(broker, dl.PB_PRODUCE, produce.SerializeToString(), f"PB_PRODUCE {produce}")
    fetch = pb.FetchRequest(replica_id=replica, max_wait_ms=max_wait, min_bytes=1, max_bytes=max_bytes,
                            partitions=[pb.FetchPartition(topic=name, partition=partition, fetch_offset=offset,
                                                          partition_max_bytes=max_bytes)])
    ask(broker, dl.PB_FETCH, fetch.SerializeToString(), f"PB_FETCH {fetch}")
    assert_up(broker)


@st.composite
def replica_fetch_payloads(draw: st.DrawFn, session: bool, topic_ids: bool) -> bytes:
    """A follower's fetch from anyone (a plaintext listener without the authorizer takes it):
    replica ids of the leader itself, of no broker, negative; absurd offsets and epochs; with
    ``topic_ids`` (the _V2 apis) a topic id per partition."""
    head = (_I32.pack(draw(st.sampled_from([-2, -1, 0, 1, 2, 7, 2**31 - 1]))) + _I32.pack(draw(waits))
            + _I32.pack(draw(i32s)) + _I32.pack(draw(i32s)))
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        topic_id = _s(draw(names)) if topic_ids else b""  # empty: not checked; else another id (refused)
        parts.append(_s(draw(names)) + topic_id + _I32.pack(draw(st.integers(-3, 3))) + _I64.pack(draw(i64s))
                     + _I32.pack(draw(i32s)) + _I32.pack(draw(i32s)) + _I64.pack(draw(i64s)) + _I32.pack(draw(i32s)))
    payload = head + _counted(parts)
    if session:
        gone = [_s(draw(names)) + _I32.pack(draw(st.integers(-3, 3))) for _ in range(draw(st.integers(0, 2)))]
        payload += _counted(gone)
    return payload + draw(st.one_of(st.just(b""), st.binary(max_size=16)))


@FUZZ
@given(api=st.sampled_from(REPLICA_FETCHES), data=st.data())
def test_absurd_replica_fetches_get_typed_answers(broker: Broker, api: int, data: st.DataObject) -> None:
    session = api in (dl.REPLICA_FETCH_SESSION, dl.REPLICA_FETCH_SESSION_V2)
    payload = data.draw(replica_fetch_payloads(session, api in (dl.REPLICA_FETCH_V2, dl.REPLICA_FETCH_SESSION_V2)))
    ask(broker, api, payload, f"api {api} {payload[:120]!r}")
    assert_up(broker)


@FUZZ
@given(client_id=names)
def test_any_client_id_is_taken_or_refused_typed(broker: Broker, client_id: bytes) -> None:
    ask(broker, dl.CLIENT_ID, _s(client_id), f"CLIENT_ID {client_id!r}")
    assert_up(broker)


# -- broken framing -----------------------------------------------------------------------------------

@pytest.mark.parametrize("declared", [0, 1, 4, dl.MAX_REQUEST_BYTES + 1, 2**32 - 1])
def test_a_request_length_outside_the_limits_closes_the_connection(broker: Broker, declared: int) -> None:
    assert send_raw(broker, _U32.pack(declared) + b"\x01" * 16) is None
    assert_up(broker)


def test_a_request_cut_short_is_dropped_with_its_connection(broker: Broker) -> None:
    with socket.create_connection(broker.address, timeout=TIMEOUT_S) as sock:
        sock.sendall(_U32.pack(1000) + _U8.pack(dl.METADATA) + _U32.pack(1) + b"\x00" * 10)
    assert_up(broker)


# -- nothing stored is lost ------------------------------------------------------------------------------

def assert_nothing_lost(broker: Broker) -> None:
    """Every sentinel still stored at its offset, the logs read back whole with dense
    offsets, the high watermarks where the logs end, and no handler failure in the broker's log."""
    bootstrap = broker.cluster.bootstrap
    node_dir: Path = broker.cluster.node_dir(1)
    assert_sentinels_kept(bootstrap, node_dir, TOPIC, broker.stored)
    with Admin(bootstrap) as admin:   # no fake follower moved a high watermark past what is stored
        latest = admin.list_offsets(TOPIC, "latest")
    for partition in (0, 1):
        stored = len(read_replica(replica_dir(node_dir, TOPIC, partition)))
        assert latest[partition] == stored, f"partition {partition}: high watermark {latest[partition]}, {stored} stored"
    failures = [line for line in (node_dir / "node.log").read_text(errors="replace").splitlines()
                if "data listener api" in line and "failed" in line]
    assert not failures, f"handlers failed on fuzzed input: {failures[:5]}"
