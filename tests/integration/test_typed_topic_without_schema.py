"""A typed topic created without a schema (``kind="typed"`` / ``topics create --typed``),
against real brokers: every client behaves sanely until the first schema is registered,
which becomes schema id 0; afterwards the topic works as one created with that schema."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grpc
import pyarrow as pa
import pytest

from spark_log import Admin, Consumer, Producer, errors
from spark_log.proto import broker_pb2 as pb
from spark_log.proto import broker_pb2_grpc as rpc

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([pa.field("user", pa.string(), nullable=False), pa.field("n", pa.int64())])


def test_schemaless_typed_topic_then_first_schema(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin, Producer(bootstrap) as producer, \
            Consumer(bootstrap, auto_offset_reset="earliest") as plain, \
            Consumer(bootstrap, columns=["n"], auto_offset_reset="earliest") as projected:
        created = admin.create_topic(topic_name, partitions=2, kind="typed", key_columns=["user"])
        assert (created.kind, created.schema, created.schema_id, created.key_columns) == ("typed", None, -1, ("user",))
        described = admin.describe_topic(topic_name)
        assert described.kind == "typed" and described.schema is None and described.schemas == {}
        with pytest.raises(errors.NoSchemaError, match=f"{topic_name}.*no schema yet"):
            admin.get_schema(topic_name)
        with pytest.raises(errors.NoSchemaError, match="register one"):
            producer.send(topic_name, {"user": "a", "n": 1})
        with pytest.raises(errors.NoSchemaError, match=topic_name):
            producer.send_batch(topic_name, pa.table({"user": ["a"], "n": [1]}))
        for consumer in (plain, projected):
            consumer.assign([(topic_name, 0), (topic_name, 1)])
            assert consumer.poll_arrow(timeout=0.3) == []
            assert [consumer.position(topic_name, p) for p in (0, 1)] == [0, 0]
        assert admin.list_offsets(topic_name, "latest") == {0: 0, 1: 0}

        assert admin.register_schema(topic_name, SCHEMA) == 0
        assert admin.register_schema(topic_name, SCHEMA) == 0  # idempotent, as a racing second writer
        assert admin.get_schema(topic_name).equals(SCHEMA)
        rows = pa.table({"user": [f"u{i}" for i in range(10)], "n": list(range(10))}, schema=SCHEMA)
        for future in producer.send_batch(topic_name, rows):
            future.result(timeout=30)
        producer.send(topic_name, {"user": "z", "n": 99}).result(timeout=30)

        got: list[int] = []
        while len(got) < 11:
            batches = projected.poll_arrow(timeout=5.0)
            assert batches, f"projected read stalled at {sorted(got)}"
            for batch in batches:
                assert batch.schema.names[0] == "n" and "user" not in batch.schema.names
                got.extend(batch.column("n").to_pylist())
        assert sorted(got) == list(range(10)) + [99]
        records = []
        while len(records) < 11:
            polled = plain.poll(timeout=5.0)
            assert polled, f"plain read stalled after {len(records)} records"
            records.extend(polled)
        assert sorted(r.value["n"] for r in records) == list(range(10)) + [99]


def test_first_schema_is_checked_against_key_columns_and_rules(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, kind="typed", key_columns=["user"])
        with pytest.raises(errors.InvalidSchemaError, match="user"):
            admin.register_schema(topic_name, pa.schema([("id", pa.int64())]))
        with pytest.raises(errors.InvalidSchemaError, match="reserved"):
            admin.register_schema(topic_name, pa.schema([("user", pa.string()), ("offset", pa.int64())]))
        assert admin.describe_topic(topic_name).schema is None  # nothing registered by the refusals
        assert admin.register_schema(topic_name, SCHEMA) == 0
        with pytest.raises(errors.SchemaMismatchError):
            admin.register_schema(topic_name, pa.schema([("user", pa.string()), ("n", pa.string())]))
        assert admin.describe_topic(topic_name).schema_id == 0


def test_kind_refusals_and_validate_only(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        with pytest.raises(errors.InvalidRequestError, match="kind"):
            admin.create_topic(topic_name, kind="columnar")
        with pytest.raises(errors.InvalidRequestError, match="bytes"):
            admin.create_topic(topic_name, kind="bytes", schema=SCHEMA)
        checked = admin.create_topic(topic_name, kind="typed", validate_only=True)
        assert checked.kind == "typed" and topic_name not in admin.list_topics()
        # the brokers refuse a bad kind too (not only this client)
        address = bootstrap.split(",")[0]
        with grpc.insecure_channel(address) as channel:
            with pytest.raises(grpc.RpcError) as caught:
                rpc.AdminStub(channel).CreateTopic(
                    pb.CreateTopicRequest(name=topic_name, partitions=1, replication_factor=1, kind="columnar"),
                    timeout=30)
        error = errors.from_rpc_error(caught.value)
        assert isinstance(error, errors.InvalidRequestError) and "kind" in error.message
        assert topic_name not in admin.list_topics()


def _cli(bootstrap: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOG_BOOTSTRAP=bootstrap)
    return subprocess.run([sys.executable, "-m", "spark_log.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=120, env=env, cwd=REPO)


def test_cli_topics_create_typed(bootstrap: str, topic_name: str) -> None:
    created = _cli(bootstrap, "topics", "create", topic_name, "--typed", "--key-columns", "user", "--partitions", "2")
    assert created.returncode == 0 and f"created typed topic {topic_name}" in created.stdout, created.stderr
    described = _cli(bootstrap, "topics", "describe", topic_name)
    assert "kind typed" in described.stdout and "schema: none yet" in described.stdout
    assert "keys: user" in described.stdout
    produced = _cli(bootstrap, "produce", topic_name, stdin='{"user": "a", "n": 1}\n')
    assert produced.returncode == 1 and "NO_SCHEMA" in produced.stderr and "Traceback" not in produced.stderr
    refused = _cli(bootstrap, "topics", "create", topic_name + "-b", "--key-columns", "user")
    assert refused.returncode == 1 and "--typed" in refused.stderr


def test_list_offsets_for_many_topics_in_one_call(bootstrap: str, topic_name: str) -> None:
    """``Admin.list_offsets_for_topics`` (connector need 2): the same answers as one
    ``list_offsets`` per topic, including a schemaless typed topic (all zero)."""
    names = [f"{topic_name}-{i}" for i in range(3)]
    with Admin(bootstrap) as admin, Producer(bootstrap) as producer:
        admin.create_topic(names[0], partitions=2)
        admin.create_topic(names[1], partitions=3)
        admin.create_topic(names[2], partitions=1, kind="typed")
        for i in range(7):
            producer.send(names[0], b"x", partition=i % 2)
            producer.send(names[1], b"y", partition=i % 3)
        producer.flush(30)
        many = admin.list_offsets_for_topics(names, "latest")
        assert many == {(t, p): o for t in names for p, o in admin.list_offsets(t, "latest").items()}
        assert many[(names[0], 0)] == 4 and many[(names[1], 2)] == 2 and many[(names[2], 0)] == 0
        assert set(admin.list_offsets_for_topics(names[:2], "earliest").values()) == {0}
        assert admin.list_offsets_for_topics([]) == {}
        with pytest.raises(errors.InvalidRequestError, match="sequence"):
            admin.list_offsets_for_topics(names[0])  # type: ignore[arg-type]
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="no-such"):
            admin.list_offsets_for_topics([names[0], f"{topic_name}-no-such"])


def test_bounded_reads_stop_at_end(bootstrap: str, topic_name: str) -> None:
    """A fetch bound (connector need 4): ``FetchPartition.max_offset`` keeps frames at or
    past it out of the answer, and ``Consumer.seek(..., end=)`` reads exactly [start, end)."""
    from spark_log.frame import iter_frames

    with Admin(bootstrap) as admin, Producer(bootstrap) as producer:
        admin.create_topic(topic_name, partitions=1)
        for i in range(4):  # four frames of ten records: offsets 0-9, 10-19, 20-29, 30-39
            for future in producer.send_batch(topic_name, pa.table({"value": [b"%d" % (10 * i + j) for j in range(10)]}),
                                              partition=0):
                future.result(timeout=30)
        leader = admin.describe_topic(topic_name).partitions[0].leader
        with grpc.insecure_channel(bootstrap.split(",")[0]) as channel:
            brokers = rpc.BrokerStub(channel).Metadata(pb.MetadataRequest(topics=[topic_name]), timeout=30).brokers
        address = next(b.address for b in brokers if b.broker_id == leader)

        def fetch(offset: int, max_offset: int) -> list[int]:
            request = pb.FetchRequest(replica_id=-1, max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20, partitions=[
                pb.FetchPartition(topic=topic_name, partition=0, fetch_offset=offset, current_leader_epoch=-1,
                                  last_fetched_epoch=-1, log_start_offset=-1, max_offset=max_offset)])
            with grpc.insecure_channel(address) as channel:
                response = rpc.BrokerStub(channel).Fetch(request, timeout=30)
            (result,) = response.partitions
            assert not result.error.code, result.error.message
            return [h.base_offset for _, h in iter_frames(memoryview(result.records))]

        assert fetch(5, 0) == [0, 10, 20, 30]          # no bound
        assert fetch(5, 15) == [0, 10]                 # the frame straddling 15 comes whole, nothing after
        assert fetch(12, 20) == [10]
        assert fetch(20, 20) == []                     # at the bound: answered at once, not after max_wait_ms

    with Consumer(bootstrap) as consumer:
        consumer.assign([(topic_name, 0)])
        with pytest.raises(errors.InvalidRequestError, match="end"):
            consumer.seek(topic_name, 0, 5, end=4)
        consumer.seek(topic_name, 0, 5, end=15)
        got: list[int] = []
        while consumer.position(topic_name, 0) < 15:
            batches = consumer.poll_arrow(timeout=5.0)
            assert batches, f"bounded read stalled at {consumer.position(topic_name, 0)}"
            got.extend(o for b in batches for o in b.column("offset").to_pylist())
        assert got == list(range(5, 15)) and consumer.position(topic_name, 0) == 15
        assert consumer.poll_arrow(timeout=0.2) == [] and consumer.position(topic_name, 0) == 15
        consumer.seek(topic_name, 0, 38)  # no end: the bound is gone
        got = []
        while len(got) < 2:
            batches = consumer.poll_arrow(timeout=5.0)
            assert batches, f"unbounded read stalled after {got}"
            got.extend(o for b in batches for o in b.column("offset").to_pylist())
        assert got == [38, 39]

