"""The sink's checks on the driver (``resolve_target``) and its routing (``_partition_of_rows``),
over a fake admin: bad options and columns get a typed error before anything is written."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from connectors import client
from connectors.options import WriterOptions
from connectors.writer import WriteTarget, _partition_of_rows, resolve_target
from spark_log.errors import InvalidConfigError, SchemaMismatchError, UnknownTopicOrPartitionError
from spark_log.schemas import HEADERS_TYPE


class _Admin:
    """The part of ``Admin`` the driver's checks use, over topics held in a dict."""

    def __init__(self) -> None:
        self.topics: dict[str, SimpleNamespace] = {}

    def add(self, name: str, *, kind: str = "bytes", partitions: int = 1, replication_factor: int = 1,
            schema: pa.Schema | None = None) -> None:
        self.topics[name] = SimpleNamespace(name=name, kind=kind, num_partitions=partitions, schema=schema,
                                            key_columns=(), config={}, replication_factor=replication_factor)

    def describe_topic(self, name: str, live: bool = True) -> SimpleNamespace:
        if name not in self.topics:
            raise UnknownTopicOrPartitionError(f"no topic {name!r}")
        return self.topics[name]

    def create_topic(self, name: str, *, partitions: int, replication_factor: int, kind: str, **_: Any) -> None:
        self.add(name, kind=kind, partitions=partitions, replication_factor=replication_factor)

    def register_schema(self, name: str, schema: pa.Schema) -> int:
        self.topics[name].schema = schema
        return 0

    def close(self) -> None:
        pass


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> _Admin:
    fake = _Admin()
    monkeypatch.setattr(client, "open_admin", lambda options: fake)
    return fake


def _bytes_target(partitions: int) -> WriteTarget:
    return WriteTarget(WriterOptions.parse({"topic": "t"}), "bytes", "t", {"t": partitions}, ("key",))


def test_a_partition_column_routes_rows_and_nulls_fall_back_to_the_key() -> None:
    batch = pa.record_batch({"value": pa.array([b"a", b"b"]), "partition": pa.array([2, None], pa.int32())})
    assert _partition_of_rows(batch, _bytes_target(3), 3, fallback=4).tolist() == [2, 1]


@pytest.mark.parametrize("given", [-1, -7, 3])
def test_a_partition_outside_the_topic_is_refused(given: int) -> None:
    """Kafka's producer refuses a negative partition; the sink re-routed it by key."""
    batch = pa.record_batch({"value": pa.array([b"a", b"b"]), "partition": pa.array([0, given], pa.int32())})
    with pytest.raises(InvalidConfigError, match=f"column 'partition' holds {given}, but the topic has partitions 0 to 2"):
        _partition_of_rows(batch, _bytes_target(3), 3, fallback=0)


def test_key_columns_are_refused_when_rows_name_their_topic(admin: _Admin) -> None:
    """Rows that name their topic go to bytes topics, which hash 'key': keyColumns had no effect."""
    schema = pa.schema([("topic", pa.string()), ("value", pa.binary()), ("k", pa.string())])
    with pytest.raises(InvalidConfigError, match="option 'keyColumns' applies to typed topics"):
        resolve_target(WriterOptions.parse({"keyColumns": "k"}), schema)
    target = resolve_target(WriterOptions.parse({"keyColumns": "key"}), schema)
    assert (target.topic, target.key_columns) == (None, ("key",))


@pytest.mark.parametrize("column,kind", [
    ("value", pa.int64()),
    ("key", pa.float64()),
    ("headers", pa.list_(pa.string())),
    ("headers", pa.map_(pa.string(), pa.binary())),
    ("timestamp", pa.string()),
])
@pytest.mark.parametrize("topic_option", [True, False])
def test_a_bytes_sink_refuses_column_types_it_cannot_store_at_start(
        admin: _Admin, column: str, kind: pa.DataType, topic_option: bool) -> None:
    """Checked on the driver, as Spark's Kafka sink does, not first in every executor task."""
    admin.add("t")
    fields = [pa.field("topic", pa.string()), pa.field("value", pa.binary()), pa.field(column, kind)]
    schema = pa.schema([f for f in fields if f.name != column] + [pa.field(column, kind)])
    options = WriterOptions.parse({"topic": "t"} if topic_option else {})
    with pytest.raises(SchemaMismatchError, match=f"column '{column}' of the DataFrame is {kind}"):
        resolve_target(options, schema)


def test_a_bytes_sink_takes_string_keys_and_values_and_kafka_headers(admin: _Admin) -> None:
    admin.add("t")
    schema = pa.schema([("key", pa.string()), ("value", pa.string()), ("headers", HEADERS_TYPE),
                        ("timestamp", pa.timestamp("us", tz="UTC"))])
    assert resolve_target(WriterOptions.parse({"topic": "t"}), schema).kind == "bytes"


@pytest.mark.parametrize("asked,option", [
    ({"partitions": "4"}, "partitions"),
    ({}, "partitions"),  # the default asks for 1
    ({"partitions": "3", "replicationFactor": "2"}, "replicationFactor"),
])
def test_create_topic_settings_that_an_existing_topic_does_not_have_are_refused(
        admin: _Admin, asked: dict[str, str], option: str) -> None:
    """createTopic=true with partitions=4 on an existing 3-partition topic wrote to the 3 partitions:
    the accepted setting had no effect."""
    admin.add("t", kind="typed", partitions=3, replication_factor=3, schema=pa.schema([("n", pa.int64())]))
    options = WriterOptions.parse({"topic": "t", "createTopic": "true", **asked})
    with pytest.raises(InvalidConfigError, match=f"option '{option}' is .* but topic 't' exists with"):
        resolve_target(options, pa.schema([("n", pa.int64())]))


def test_create_topic_writes_to_an_existing_topic_made_as_asked(admin: _Admin) -> None:
    admin.add("t", kind="typed", partitions=3, replication_factor=2, schema=pa.schema([("n", pa.int64())]))
    options = WriterOptions.parse({"topic": "t", "createTopic": "true", "partitions": "3", "replicationFactor": "2"})
    assert resolve_target(options, pa.schema([("n", pa.int64())])).partitions == {"t": 3}


def test_create_topic_creates_a_missing_topic(admin: _Admin) -> None:
    options = WriterOptions.parse({"topic": "t", "createTopic": "true", "partitions": "2"})
    assert resolve_target(options, pa.schema([("n", pa.int64())])).partitions == {"t": 2}
    assert (admin.topics["t"].kind, admin.topics["t"].schema) == ("typed", pa.schema([("n", pa.int64())]))


def test_a_typed_sink_refuses_a_timestamp_column_it_cannot_keep(admin: _Admin) -> None:
    """A bytes topic keeps a DataFrame's 'timestamp' as the record timestamp; a typed topic
    dropped it and stamped the write time (a typed topic copied through Spark lost its event
    times). Until typed frames are cut per timestamp, the column is refused at start."""
    admin.add("t", kind="typed", schema=pa.schema([("n", pa.int64())]))
    schema = pa.schema([("n", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC"))])
    with pytest.raises(SchemaMismatchError, match=r"typed topic.*'timestamp' column.*df.drop\('timestamp'\)"):
        resolve_target(WriterOptions.parse({"topic": "t"}), schema)
    assert resolve_target(WriterOptions.parse({"topic": "t"}), schema.remove(1)).kind == "typed"
