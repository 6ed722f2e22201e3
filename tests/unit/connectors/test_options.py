"""Option parsing: every option, and every refusal names the option."""
from __future__ import annotations

import pickle

import pytest

from connectors.offsets import TopicPartition as TP
from connectors.options import READER_OPTIONS, WRITER_OPTIONS, ReaderOptions, WriterOptions
from spark_log.errors import InvalidConfigError


def test_reader_defaults() -> None:
    o = ReaderOptions.parse({"subscribe": "a"})
    assert o.subscribe == ("a",)
    assert (o.starting_offsets, o.ending_offsets, o.max_offsets_per_trigger, o.max_bytes_per_trigger) == (None,) * 4
    assert (o.min_partitions, o.fail_on_data_loss, o.include_headers, o.isolation_level) == (1, True, False, "read_uncommitted")
    assert pickle.loads(pickle.dumps(o)) == o


def test_reader_every_option() -> None:
    o = ReaderOptions.parse({
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "subscribepattern": "cl.*",
        "startingoffsets": '{"clicks": {"0": 5}}',
        "maxoffsetspertrigger": "100",
        "maxbytespertrigger": "2048",
        "minpartitions": "4",
        "maxrecordsperpartition": "1000",
        "failondataloss": "FALSE",
        "includeheaders": "true",
        "isolationlevel": "read_committed",
        "columns": "value, offset",
        "polltimeoutms": "500",
        "checkpointLocation": "/tmp/x",   # Spark's own options are let through
        "path": "ignored",
    })
    assert o.bootstrap == "127.0.0.1:9092"
    assert o.subscribe_pattern == "cl.*"
    assert o.starting_offsets == {TP("clicks", 0): 5}
    assert (o.max_offsets_per_trigger, o.max_bytes_per_trigger, o.min_partitions, o.max_records_per_partition) == (100, 2048, 4, 1000)
    assert (o.fail_on_data_loss, o.include_headers, o.isolation_level) == (False, True, "read_committed")
    assert o.columns == ("value", "offset")
    assert o.poll_timeout_ms == 500


def test_assign_and_timestamp_and_ending() -> None:
    o = ReaderOptions.parse({"assign": '{"b": [1, 0], "a": [2]}', "startingTimestamp": "1700000000000", "endingOffsets": "latest"})
    assert o.assign == (TP("a", 2), TP("b", 0), TP("b", 1))
    assert o.starting_timestamp == 1_700_000_000_000
    assert o.ending_offsets == "latest"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "a", "subscrib": "b"}, "subscrib"),
        ({}, "subscribe"),
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "assign"),
        ({"subscribePattern": "(", }, "subscribePattern"),
        ({"assign": '{"a": []}'}, "assign"),
        ({"assign": '["a"]'}, "assign"),
        ({"subscribe": "a,,b"}, "subscribe"),
        ({"subscribe": "a", "startingOffsets": "soon"}, "startingOffsets"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets"),
        ({"subscribe": "a", "startingOffsets": "earliest", "startingTimestamp": "1"}, "startingTimestamp"),
        ({"subscribe": "a", "startingTimestamp": "-5"}, "startingTimestamp"),
        # beyond a 64-bit integer: protobuf refused it later with a bare ValueError
        ({"subscribe": "a", "startingTimestamp": "99999999999999999999"}, "startingTimestamp"),
        ({"subscribe": "a", "startingTimestamp": str(2**63)}, "startingTimestamp"),
        ({"subscribe": "a", "endingOffsets": '{"a": {"0": 99999999999999999999}}'}, "endingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": 9223372036854775808}}'}, "startingOffsets"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"2147483648": 0}}'}, "startingOffsets"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": str(2**64)}, "maxOffsetsPerTrigger"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({"subscribe": "a", "maxBytesPerTrigger": "lots"}, "maxBytesPerTrigger"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions"),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({"subscribe": "a", "includeHeaders": "1"}, "includeHeaders"),
        ({"subscribe": "a", "isolationLevel": "serializable"}, "isolationLevel"),
        ({"subscribe": "a", "columns": "value,value"}, "columns"),
        ({"subscribe": "a", "bootstrap": "h:1", "kafka.bootstrap.servers": "h:2"}, "kafka.bootstrap.servers"),
        ({"subscribe": "a", "bootstrap": " "}, "bootstrap"),
    ],
)
def test_reader_refusals_name_the_option(options: dict, named: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        ReaderOptions.parse(options)
    assert f"'{named}'" in str(info.value)


def test_stream_and_batch_only_options() -> None:
    with pytest.raises(InvalidConfigError, match="'endingOffsets'"):
        ReaderOptions.parse({"subscribe": "a", "endingOffsets": "latest"}).check_streaming()
    with pytest.raises(InvalidConfigError, match="'startingOffsets'"):
        ReaderOptions.parse({"subscribe": "a", "startingOffsets": "latest"}).check_batch()
    with pytest.raises(InvalidConfigError, match="'maxOffsetsPerTrigger'"):
        ReaderOptions.parse({"subscribe": "a", "maxOffsetsPerTrigger": "5"}).check_batch()
    ReaderOptions.parse({"subscribe": "a", "startingOffsets": "latest"}).check_streaming()


def test_writer_options() -> None:
    o = WriterOptions.parse({"topic": "t"})
    assert (o.topic, o.acks, o.compression, o.batch_size, o.key_columns) == ("t", "all", "lz4", 4 << 20, None)
    o = WriterOptions.parse({"topic": "t", "acks": "-1", "compression": "ZSTD", "batchSize": "65536",
                             "keyColumns": "a,b", "timeoutMs": "10", "checkpointLocation": "/x"})
    assert (o.acks, o.compression, o.batch_size, o.key_columns, o.timeout_ms) == ("all", "zstd", 65536, ("a", "b"), 10)
    assert WriterOptions.parse({"acks": "1"}).acks == "1"
    o = WriterOptions.parse({"topic": "t"})
    assert (o.create_topic, o.partitions, o.replication_factor) == (False, 1, 1)
    o = WriterOptions.parse({"topic": "t", "createTopic": "TRUE", "partitions": "4", "replicationFactor": "3"})
    assert (o.create_topic, o.partitions, o.replication_factor) == (True, 4, 3)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"topic": "t", "subscribe": "x"}, "subscribe"),
        ({"topic": "t", "acks": "0"}, "acks"),
        ({"topic": "t", "acks": "2"}, "acks"),
        ({"topic": "t", "compression": "gzip"}, "compression"),
        ({"topic": "t", "batchSize": "10"}, "batchSize"),
        ({"topic": ""}, "topic"),
        ({"topic": "t", "keyColumns": ","}, "keyColumns"),
        ({"topic": "t", "partitions": "3"}, "partitions"),
        ({"topic": "t", "replicationFactor": "3"}, "replicationFactor"),
        ({"topic": "t", "createTopic": "yes"}, "createTopic"),
        ({"createTopic": "true"}, "createTopic"),
        ({"topic": "t", "createTopic": "true", "partitions": "0"}, "partitions"),
    ],
)
def test_writer_refusals_name_the_option(options: dict, named: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        WriterOptions.parse(options)
    assert f"'{named}'" in str(info.value)


def test_option_tables_document_every_option() -> None:
    assert set(READER_OPTIONS) >= {"subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
                                   "startingTimestamp", "maxOffsetsPerTrigger", "maxBytesPerTrigger", "minPartitions",
                                   "failOnDataLoss", "includeHeaders", "isolationLevel", "columns", "bootstrap"}
    assert set(WRITER_OPTIONS) >= {"topic", "keyColumns", "acks", "compression", "batchSize", "bootstrap"}


def test_the_tombstone_column_option() -> None:
    parsed = WriterOptions.parse({"topic": "t", "tombstoneColumn": " deleted "})
    assert parsed.tombstone_column == "deleted"
    assert WriterOptions.parse({"topic": "t"}).tombstone_column is None
    with pytest.raises(InvalidConfigError, match="tombstoneColumn"):
        WriterOptions.parse({"topic": "t", "tombstoneColumn": " "})
    with pytest.raises(InvalidConfigError, match="needs option 'topic'"):
        WriterOptions.parse({"tombstoneColumn": "deleted"})
