"""Fuzzing a live broker through a raw gRPC client (hypothesis).

A one-node cluster holds a topic with sentinel records written first.  Hypothesis then
sends, through raw gRPC channels (bytes in, bytes out, no client library in between):

- garbage bytes as the request of every RPC a broker serves its clients (malformed protobuf);
- Produce requests whose frames are real ones damaged: bytes flipped, cut, repeated,
  the header's fields set to absurd values (with the CRC recomputed, so the damage gets
  past the CRC to the checks behind it);
- Fetch, ListOffsets, Metadata, DescribePartitions and CreateTopic requests with absurd
  field values (negative, huge, unknown topics and partitions, impossible configs);
- requests of the group and transaction coordinators, Compaction and Tiering with every
  field (nested and repeated ones too) drawn from those absurd values;
- a compressed buffer whose length claims terabytes (once a ``make fuzz`` find).

Every answer must be a success, a typed error (spark-log's code in the trailing metadata,
or in the per-partition ``Error``), or a closed stream for a message that does not parse;
never an error from a handler that did not expect the input (``STORAGE_ERROR`` "... failed
on the broker", gRPC ``UNKNOWN``).  The broker must stay up (a Metadata call after every
example), and at the end (the module fixture's teardown, on every worker that ran some of it)
every sentinel is still stored, byte for byte, at its offset, and the whole log reads back as
valid frames.  About 30 s idle (``max_examples`` per test below).
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Callable, Iterator

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message_factory import GetMessageClass
import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokers.launcher.local import LocalCluster
from spark_log.errors import ErrorCode
from spark_log.frame import crc32c
from spark_log.proto import broker_pb2 as pb
from spark_log.proto import (compaction_pb2, data_listener_pb2, groups_pb2, security_pb2, tiering_pb2,
                             transactions_pb2)
from tests.support.fuzz import FIELDS, assert_sentinels_kept, damaged_frames, fuzz_settings, write_sentinels
from tests.support.fuzz import frame as make_frame

pytestmark = [pytest.mark.fault]

TOPIC = "fuzzed"
FUZZ = fuzz_settings(25)
# the other services a broker serves its clients: (module, service, methods, whether
# test_absurd_coordinator_compaction_and_tier_requests_get_typed_answers fills their fields)
CLIENT_SERVICES = (
    (compaction_pb2, "Compaction", ("Describe", "Compact", "OfferOffsetMap"), True),
    (groups_pb2, "GroupCoordinator", ("FindCoordinator", "ConsumerGroupHeartbeat", "OffsetCommit", "TxnOffsetCommit",
                                      "HoldTxnOffsets", "ReleaseTxnOffsets", "OffsetFetch", "ListGroups", "DescribeGroup",
                                      "DeleteGroup", "OffsetDelete"), True),
    (transactions_pb2, "TransactionCoordinator", ("FindCoordinator", "InitProducerId", "AddPartitions", "JoinTxn",
                                                  "AddOffsets", "EndTxn", "DescribeTxn"), True),
    (security_pb2, "Security", ("ScramStart", "ScramFinish", "WhoAmI", "DescribeUserScramCredentials", "DescribeAcls",
                                "DescribeClientQuotas"), False),
    (tiering_pb2, "Tiering", ("DescribeTier",), True),
    (data_listener_pb2, "DataListener", ("Describe",), False),
)
METHODS = ["/spark_log.broker.v1.Broker/" + m for m in ("Metadata", "Produce", "Fetch", "ListOffsets",
                                                           "DescribePartitions")] + \
          ["/spark_log.broker.v1.Admin/" + m for m in ("CreateTopic", "DeleteTopic", "DescribeTopic", "ListTopics",
                                                          "AlterConfigs", "RegisterSchema", "ElectLeaders",
                                                          "AlterPartitionReassignments",
                                                          "ListPartitionReassignments")] + \
          [f"/{module.DESCRIPTOR.services_by_name[service].full_name}/{m}"
           for module, service, methods, _ in CLIENT_SERVICES for m in methods]
CODE_KEY = "spark-log-error-code"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[tuple[int, bytes]], Path]]:
    cluster = LocalCluster(tmp_path_factory.mktemp("fuzz"), brokers=1)
    cluster.up(timeout_s=60)
    try:
        stored = write_sentinels(cluster.bootstrap, TOPIC)
        yield cluster.bootstrap, stored, cluster.node_dir(1)
        # after the last test of this module on this worker (xdist may split a module across
        # workers, each with its own cluster): a failure here is an error of that test
        assert_sentinels_kept(cluster.bootstrap, cluster.node_dir(1), TOPIC, stored)
    finally:
        cluster.down(timeout_s=20)


@pytest.fixture(scope="module")
def channel(broker: tuple[str, list[tuple[int, bytes]], Path]) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(broker[0].split(",")[0], options=[("grpc.max_receive_message_length", -1),
                                                                  ("grpc.max_send_message_length", -1)]) as ch:
        yield ch


def call(channel: grpc.Channel, method: str, request: bytes) -> bytes | grpc.RpcError:
    """Raw bytes to ``method``; its raw answer or the ``RpcError``."""
    stub: Callable[..., bytes] = channel.unary_unary(method)   # no (de)serializers: bytes in, bytes out
    try:
        return stub(request, timeout=30)
    except grpc.RpcError as exc:
        return exc


def assert_typed(outcome: bytes | grpc.RpcError, what: str, *, malformed: bool = False) -> None:
    """A success, a typed error, or (``malformed``: the message may not parse) a closed stream."""
    if not isinstance(outcome, grpc.RpcError):
        return
    metadata = {item.key: item.value for item in (outcome.trailing_metadata() or ())}
    code = outcome.code()
    details = outcome.details() or ""
    if CODE_KEY in metadata:
        assert int(metadata[CODE_KEY]) != ErrorCode.STORAGE_ERROR or "failed on the broker" not in details, (
            f"{what}: a handler did not expect this input: {details}")
        return
    if malformed and code == grpc.StatusCode.INTERNAL and "deserializ" in details.lower():
        return  # the message did not parse: the stream is closed with an error, nothing happened
    raise AssertionError(f"{what}: untyped error {code}: {details}")


def assert_up(channel: grpc.Channel) -> None:
    outcome = call(channel, "/spark_log.broker.v1.Broker/Metadata", pb.MetadataRequest(topics=[TOPIC]).SerializeToString())
    assert not isinstance(outcome, grpc.RpcError), f"the broker stopped answering: {outcome}"


def partition_errors(raw: bytes, response_type: type[pb.ProduceResponse] | type[pb.FetchResponse]
                     | type[pb.ListOffsetsResponse]) -> list[tuple[int, str]]:
    response = response_type.FromString(raw)
    return [(p.error.code, p.error.message) for p in response.partitions if p.HasField("error") and p.error.code]


# -- garbage ------------------------------------------------------------------------------------

@FUZZ
@given(method=st.sampled_from(METHODS), body=st.binary(max_size=2048))
def test_garbage_requests_get_typed_errors_or_a_closed_stream(channel: grpc.Channel, method: str, body: bytes) -> None:
    assert_typed(call(channel, method, body), f"{method} with {len(body)} garbage bytes", malformed=True)
    assert_up(channel)


# -- damaged frames -------------------------------------------------------------------------------

ABSURD_VALUES = [0, -1, 1, 2, 7, 2**15 - 1, 65535, 2**31 - 1, -(2**31), 2**62, -(2**63)]


def test_every_header_field_at_every_absurd_value_is_refused_or_harmless(channel: grpc.Channel) -> None:
    """Each header field of a valid frame set to each absurd value, the CRC recomputed (the
    damage gets past the CRC): a typed refusal, or an append the log can still read back
    (checked at the end: every stored frame decodes to as many records as it claims)."""
    for name, (at, fmt) in sorted(FIELDS.items()):
        for value in ABSURD_VALUES:
            frame = bytearray(make_frame([b"field", b"check"]))
            size = struct.calcsize(fmt)
            low, high = ((-(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1) if fmt.islower() else (0, 2 ** (8 * size) - 1))
            if not low <= value <= high:
                continue
            struct.pack_into(fmt, frame, at, value)
            struct.pack_into("<I", frame, 20, crc32c(memoryview(frame)[24:]))
            request = pb.ProduceRequest(acks=1, timeout_ms=2000, partitions=[
                pb.PartitionRecords(topic=TOPIC, partition=1, records=bytes(frame), current_leader_epoch=-1)])
            outcome = call(channel, "/spark_log.broker.v1.Broker/Produce", request.SerializeToString())
            assert_typed(outcome, f"Produce with {name}={value}")
            if isinstance(outcome, bytes):
                for code, message in partition_errors(outcome, pb.ProduceResponse):
                    assert code != ErrorCode.STORAGE_ERROR, f"{name}={value}: a handler did not expect it: {message}"
    assert_up(channel)


@fuzz_settings(60)
@given(frames=st.lists(damaged_frames(), min_size=1, max_size=3), acks=st.sampled_from([-1, 1]),
       partition=st.sampled_from([0, 1]))
def test_damaged_frames_are_refused_with_typed_errors(channel: grpc.Channel, frames: list[bytes], acks: int,
                                                      partition: int) -> None:
    """A valid request around damaged frames: the damage itself must be found."""
    request = pb.ProduceRequest(acks=acks, timeout_ms=2000, partitions=[
        pb.PartitionRecords(topic=TOPIC, partition=partition, records=b"".join(frames), current_leader_epoch=-1)])
    outcome = call(channel, "/spark_log.broker.v1.Broker/Produce", request.SerializeToString())
    assert_typed(outcome, f"Produce acks={acks} partition={partition}")
    if isinstance(outcome, bytes):
        for code, message in partition_errors(outcome, pb.ProduceResponse):
            assert code != ErrorCode.STORAGE_ERROR, f"Produce: a handler did not expect this input: {message}"
    assert_up(channel)


@pytest.mark.parametrize("claimed", [2**40, 2**48, 2**62])
def test_a_buffer_claiming_terabytes_is_a_corrupt_record(channel: grpc.Channel, claimed: int) -> None:
    """A compressed Arrow buffer's length prefix (the int64 before each LZ4 frame) rewritten,
    CRC recomputed: pyarrow then asks for that much memory and fails.  Found by ``make fuzz``:
    it was answered as STORAGE_ERROR "unexpected broker error: malloc of size ... failed"."""
    damaged = bytearray(make_frame([b"claims", b"too much"]))
    at = damaged.index(b"\x04\x22\x4d\x18")   # the first LZ4 frame of the body; its length prefix before it
    struct.pack_into("<q", damaged, at - 8, claimed)
    struct.pack_into("<I", damaged, 20, crc32c(memoryview(damaged)[24:]))
    request = pb.ProduceRequest(acks=1, timeout_ms=2000, partitions=[
        pb.PartitionRecords(topic=TOPIC, partition=1, records=bytes(damaged), current_leader_epoch=-1)])
    outcome = call(channel, "/spark_log.broker.v1.Broker/Produce", request.SerializeToString())
    assert isinstance(outcome, bytes), outcome
    assert [code for code, _ in partition_errors(outcome, pb.ProduceResponse)] == [ErrorCode.CORRUPT_RECORD]
    assert_up(channel)


@FUZZ
@given(acks=st.sampled_from([-1, 0, 1, 2, -7, 2**31 - 1]), timeout=st.sampled_from([0, -1, 1, 2**31 - 1]),
       topic=st.sampled_from([TOPIC, "", "no-such-topic", "a" * 300]),
       partition=st.sampled_from([0, 1, -1, 2, 2**31 - 1]), epoch=st.sampled_from([-1, 0, 5, -99, 2**31 - 1]),
       transactional=st.sampled_from(["", "tx"]), empty=st.booleans())
def test_absurd_produce_envelopes_get_typed_answers(channel: grpc.Channel, acks: int, timeout: int, topic: str,
                                                    partition: int, epoch: int, transactional: str,
                                                    empty: bool) -> None:
    records = b"" if empty else make_frame([b"envelope"])
    request = pb.ProduceRequest(acks=acks, timeout_ms=min(timeout, 2000), transactional_id=transactional, partitions=[
        pb.PartitionRecords(topic=topic, partition=partition, records=records, current_leader_epoch=epoch)])
    outcome = call(channel, "/spark_log.broker.v1.Broker/Produce", request.SerializeToString())
    assert_typed(outcome, f"Produce envelope {request.acks} {topic!r} {partition} {epoch}")
    if isinstance(outcome, bytes):
        for code, message in partition_errors(outcome, pb.ProduceResponse):
            assert code != ErrorCode.STORAGE_ERROR, f"Produce: a handler did not expect this input: {message}"
    assert_up(channel)


# -- absurd fields ---------------------------------------------------------------------------------

NAMES = st.sampled_from([TOPIC, "", "no-such-topic", "a" * 300, "../../etc", "x\x00y", "ü", " "])
INT32 = st.sampled_from([0, -1, 1, 2**31 - 1, -(2**31), 100_000])
INT64 = st.sampled_from([0, -1, -2, 1, 2**62, -(2**63), 2**63 - 1, 39, 40])


@FUZZ
@given(topic=NAMES, partition=INT32, offset=INT64, max_wait=INT32, min_bytes=INT32, max_bytes=INT32,
       partition_max=INT32, max_offset=INT64, replica=st.sampled_from([-1, 0, 1, 7, -5]),
       project=st.booleans(), row_filter=st.binary(max_size=64))
def test_absurd_fetches_get_typed_answers(channel: grpc.Channel, topic: str, partition: int, offset: int,
                                          max_wait: int, min_bytes: int, max_bytes: int, partition_max: int,
                                          max_offset: int, replica: int, project: bool, row_filter: bytes) -> None:
    request = pb.FetchRequest(replica_id=replica, max_wait_ms=min(max_wait, 200) if max_wait > 0 else max_wait,
                              min_bytes=min_bytes, max_bytes=max_bytes, project=project, row_filter=row_filter,
                              partitions=[pb.FetchPartition(topic=topic, partition=partition, fetch_offset=offset,
                                                            partition_max_bytes=partition_max, max_offset=max_offset,
                                                            current_leader_epoch=-1, last_fetched_epoch=-1)])
    outcome = call(channel, "/spark_log.broker.v1.Broker/Fetch", request.SerializeToString())
    assert_typed(outcome, f"Fetch {request}")
    if isinstance(outcome, bytes):
        for code, message in partition_errors(outcome, pb.FetchResponse):
            assert code != ErrorCode.STORAGE_ERROR, f"Fetch: a handler did not expect this input: {message}"
    assert_up(channel)


@FUZZ
@given(topic=NAMES, partition=INT32, timestamp=INT64, topics=st.lists(NAMES, max_size=3),
       partitions=INT32, replication=INT32, configs=st.dictionaries(
           st.sampled_from(["retention.ms", "min.insync.replicas", "segment.bytes", "bogus", "flush.messages",
                            "cleanup.policy", "max.message.bytes", ""]),
           st.sampled_from(["-5", "0", "abc", "1e99", "99999999999999999999", "", "compact", "1"]), max_size=3))
def test_absurd_offsets_metadata_and_topics_get_typed_answers(channel: grpc.Channel, topic: str, partition: int,
                                                              timestamp: int, topics: list[str], partitions: int,
                                                              replication: int, configs: dict[str, str]) -> None:
    offsets = pb.ListOffsetsRequest(partitions=[pb.ListOffsetsPartition(topic=topic, partition=partition,
                                                                        timestamp=timestamp, current_leader_epoch=-1)])
    outcome = call(channel, "/spark_log.broker.v1.Broker/ListOffsets", offsets.SerializeToString())
    assert_typed(outcome, f"ListOffsets {offsets}")
    if isinstance(outcome, bytes):
        for code, message in partition_errors(outcome, pb.ListOffsetsResponse):
            assert code != ErrorCode.STORAGE_ERROR, f"ListOffsets: a handler did not expect this input: {message}"
    for method, request in (
            ("/spark_log.broker.v1.Broker/Metadata", pb.MetadataRequest(topics=topics)),
            ("/spark_log.broker.v1.Admin/DescribeTopic", pb.DescribeTopicRequest(name=topic)),
            ("/spark_log.broker.v1.Admin/CreateTopic", pb.CreateTopicRequest(
                name=topic, partitions=partitions, replication_factor=replication, configs=configs,
                validate_only=True))):
        assert_typed(call(channel, method, request.SerializeToString()), f"{method} {request}")
    assert_up(channel)


# -- the coordinators' and other services' requests ------------------------------------------------

# method -> request class (every field filled by ``messages`` below); no Admin or Produce here:
# their own tests choose which fields may change the stored records
STRUCTURED = {f"/{service.full_name}/{m}": GetMessageClass(service.methods_by_name[m].input_type)
              for module, name, methods, structured in CLIENT_SERVICES if structured
              for service in (module.DESCRIPTOR.services_by_name[name],) for m in methods}
_FIELD = FieldDescriptor
_SCALARS = {_FIELD.TYPE_STRING: NAMES, _FIELD.TYPE_INT32: INT32, _FIELD.TYPE_INT64: INT64, _FIELD.TYPE_BOOL: st.booleans(),
            _FIELD.TYPE_BYTES: st.binary(max_size=256)}


def messages(descriptor: Any, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """Every field of ``descriptor`` set from the absurd values above (nested messages and
    repeated fields too, a few each), as a dict for ``_build``."""
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if field.message_type is not None and depth >= 2:
            continue
        one = messages(field.message_type, depth + 1) if field.message_type is not None else _SCALARS[field.type]
        parts[field.name] = st.lists(one, max_size=3) if field.is_repeated else one
    return st.fixed_dictionaries(parts)


def _build(kind: Any, values: dict[str, Any]) -> Any:
    """The message of class ``kind`` holding ``values`` (``messages``)."""
    message = kind()
    for name, value in values.items():
        field = kind.DESCRIPTOR.fields_by_name[name]
        if field.message_type is not None:
            items = value if field.is_repeated else [value]
            for item in items:
                target = getattr(message, name).add() if field.is_repeated else getattr(message, name)
                target.CopyFrom(_build(type(target), item))
        elif field.is_repeated:
            getattr(message, name).extend(value)
        else:
            setattr(message, name, value)
    return message


@FUZZ
@given(method=st.sampled_from(sorted(STRUCTURED)), data=st.data())
def test_absurd_coordinator_compaction_and_tier_requests_get_typed_answers(channel: grpc.Channel, method: str,
                                                                           data: st.DataObject) -> None:
    kind = STRUCTURED[method]
    message = _build(kind, data.draw(messages(kind.DESCRIPTOR)))
    assert_typed(call(channel, method, message.SerializeToString()), f"{method} {message}")
    assert_up(channel)
