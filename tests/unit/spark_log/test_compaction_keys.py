"""spark_log.compaction: the compaction key, tombstones, and the settings compaction refuses."""
from __future__ import annotations

from typing import Any, cast

import pyarrow as pa
import pytest

from spark_log.compaction import check_settings, has_keys, record_keys, tombstones
from spark_log.config import TopicConfig
from spark_log.errors import InvalidConfigError, SchemaMismatchError

SCHEMA = pa.schema(cast("list[pa.Field[Any]]", [
    pa.field("user", pa.string()), pa.field("region", pa.string()), pa.field("at", pa.timestamp("ms")),
                    pa.field("amount", pa.int64()), pa.field("deleted", pa.bool_())]))


def test_bytes_keys_are_the_key_bytes_and_a_null_key_is_no_key() -> None:
    batch = pa.record_batch({"key": pa.array([b"a", None, b""], pa.binary()), "value": pa.array([b"1", None, b"3"])})
    keys = record_keys(batch, kind="bytes")
    assert keys.to_pylist() == [b"a", None, b""]
    assert has_keys(keys).tolist() == [True, False, True]
    assert tombstones(batch, kind="bytes").tolist() == [False, True, False]


def test_typed_keys_never_collide_across_column_bounds_nulls_or_empties() -> None:
    rows = [("a", "bc"), ("ab", "c"), ("", "abc"), (None, "abc"), ("abc", None), ("abc", ""), ("a\x1fb", "c"),
            ("a", "b\x1fc")]
    table = pa.table({"user": [r[0] for r in rows], "region": [r[1] for r in rows]})
    keys = record_keys(table, kind="typed", key_columns=["user", "region"])
    assert len(set(keys.to_pylist())) == len(rows)
    assert has_keys(keys).all()


def test_typed_keys_cast_to_the_topic_schema_first() -> None:
    """A Spark DataFrame hands timestamps back in microseconds: same keys as the topic's ms."""
    stored = pa.table({"user": ["u"], "at": pa.array([1_700_000_000_123], pa.timestamp("ms"))})
    from_spark = pa.table({"user": pa.array(["u"], pa.large_string()),
                           "at": pa.array([1_700_000_000_123_000], pa.timestamp("us", tz="UTC"))})
    assert record_keys(stored, kind="typed", key_columns=["user", "at"], schema=SCHEMA).equals(
        record_keys(from_spark, kind="typed", key_columns=["user", "at"], schema=SCHEMA))


def test_typed_tombstones_follow_the_tombstone_column() -> None:
    table = pa.table({"user": ["a", "b", "c"], "deleted": pa.array([True, None, False])})
    assert tombstones(table, kind="typed", tombstone_column="deleted").tolist() == [True, False, False]
    assert tombstones(table, kind="typed").tolist() == [False, False, False]
    assert tombstones(table, kind="typed", tombstone_column="missing").tolist() == [False] * 3  # an older schema


def test_a_missing_key_column_is_refused() -> None:
    with pytest.raises(SchemaMismatchError, match="'region' is missing"):
        record_keys(pa.table({"user": ["a"]}), kind="typed", key_columns=["user", "region"])


@pytest.mark.parametrize("kind, keys, schema, settings, match", [
    ("bytes", (), None, {"tombstone.column": "x"}, "typed topics"),
    ("typed", (), SCHEMA, {"cleanup.policy": "compact"}, "key columns"),
    ("typed", ("user",), SCHEMA, {"tombstone.column": "user"}, "is a key column"),
    ("typed", ("user",), SCHEMA, {"tombstone.column": "nope"}, "not a column"),
    ("typed", ("user",), SCHEMA, {"tombstone.column": "amount"}, "boolean"),
])
def test_settings_compaction_cannot_honour_are_refused(kind: str, keys: tuple[str, ...], schema: pa.Schema | None,
                                                       settings: dict[str, str], match: str) -> None:
    with pytest.raises(InvalidConfigError, match=match):
        check_settings(kind=kind, key_columns=keys, schema=schema, config=TopicConfig().with_overrides(settings))


def test_settings_compaction_can_honour_pass() -> None:
    config = TopicConfig().with_overrides({"cleanup.policy": "compact,delete", "tombstone.column": "deleted"})
    check_settings(kind="typed", key_columns=("user",), schema=SCHEMA, config=config)
    check_settings(kind="typed", key_columns=("user",), schema=None, config=config)  # checked at the first schema
    check_settings(kind="bytes", key_columns=(), schema=None, config=TopicConfig(cleanup_policy="compact"))


@pytest.mark.parametrize("settings, match", [
    ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
    ({"min.cleanable.dirty.ratio": "nan"}, "min.cleanable.dirty.ratio"),
    ({"min.cleanable.dirty.ratio": True}, "min.cleanable.dirty.ratio"),
    ({"min.compaction.lag.ms": "-1"}, "min.compaction.lag.ms"),
    ({"max.compaction.lag.ms": "0"}, "max.compaction.lag.ms"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "max.compaction.lag.ms"),
    ({"cleanup.policy": "compacted"}, "cleanup.policy"),
    ({"delete.retention.ms": "-5"}, "delete.retention.ms"),
])
def test_topic_settings_are_validated_with_kafka_names(settings: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidConfigError, match=match):
        TopicConfig().with_overrides(settings)


def test_topic_settings_parse_and_describe_with_kafka_names() -> None:
    config = TopicConfig().with_overrides({"min.cleanable.dirty.ratio": "0.25", "cleanup.policy": "compact,delete",
                                           "max.compaction.lag.ms": 60000})
    assert (config.min_cleanable_dirty_ratio, config.compact, config.delete) == (0.25, True, True)
    names = config.to_kafka_names()
    assert names["min.cleanable.dirty.ratio"] == "0.25" and names["max.compaction.lag.ms"] == "60000"
    assert not TopicConfig().compact and TopicConfig(cleanup_policy="compact").delete is False


@pytest.mark.parametrize("settings, match", [
    ({"log_cleaner_threads": 0}, "log_cleaner_threads"),
    ({"log_cleaner_io_max_bytes_per_second": -1}, "log_cleaner_io_max_bytes_per_second"),
    ({"log_cleaner_dedupe_buffer_bytes": 1000}, "log_cleaner_dedupe_buffer_bytes"),
    ({"log_cleaner_backoff_ms": 0}, "log_cleaner_backoff_ms"),
    ({"log_cleaner_enable": "sometimes"}, "log_cleaner_enable"),
])
def test_broker_cleaner_settings_are_validated(settings: dict[str, object], match: str) -> None:
    from spark_log.config import BrokerConfig, from_mapping

    with pytest.raises(InvalidConfigError, match=match):
        from_mapping(BrokerConfig, {"broker_id": 1, **settings})
