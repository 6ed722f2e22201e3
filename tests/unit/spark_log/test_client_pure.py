"""Pure parts of the clients: bootstrap resolution, record shaping, shared futures, filters."""
from __future__ import annotations

import concurrent.futures
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from spark_log._client import resolve_bootstrap
from spark_log._futures import FutureGroup
from spark_log._pushdown import to_expression
from spark_log._records import BYTES_SCHEMA, conform
from spark_log.errors import InvalidConfigError, InvalidRequestError, SchemaMismatchError
from spark_log.filters import deserialize_filter, filter_schema, serialize_filter


def test_bootstrap_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPARK_LOG_DATA_DIR", str(tmp_path))
    with pytest.raises(InvalidConfigError, match="spark-log dev up"):
        resolve_bootstrap(None)
    (tmp_path / "bootstrap").write_text("127.0.0.1:1,127.0.0.1:2\n")
    assert resolve_bootstrap(None) == ["127.0.0.1:1", "127.0.0.1:2"]
    monkeypatch.setenv("SPARK_LOG_BOOTSTRAP", "127.0.0.1:3")
    assert resolve_bootstrap(None) == ["127.0.0.1:3"]
    assert resolve_bootstrap(["127.0.0.1:4"]) == ["127.0.0.1:4"]
    with pytest.raises(InvalidConfigError):
        resolve_bootstrap("no-port")


def test_conform_bytes_fills_and_casts() -> None:
    table = conform(pa.table({"value": ["a", "b"], "partition": [0, 1]}), BYTES_SCHEMA, kind="bytes", now_ms=5)
    assert table.schema.equals(BYTES_SCHEMA)
    assert table.column("value").to_pylist() == [b"a", b"b"] and table.column("key").null_count == 2
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [5, 5]
    with pytest.raises(SchemaMismatchError):
        conform(pa.table({"key": [b"k"]}), BYTES_SCHEMA, kind="bytes", now_ms=0)
    with pytest.raises(SchemaMismatchError):
        conform(pa.table({"value": [1]}), BYTES_SCHEMA, kind="bytes", now_ms=0)


def test_conform_typed_is_strict() -> None:
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])
    reordered = conform(pa.table({"b": ["x"], "a": [1]}), schema, kind="typed", now_ms=0)
    assert reordered.schema.names == ["a", "b"]
    for bad in (pa.table({"a": [1]}), pa.table({"a": [1], "b": ["x"], "c": [2]}),
                pa.table({"a": pa.array([1], pa.int32()), "b": ["x"]}), pa.table({"a": pa.array([None], pa.int64()), "b": ["x"]})):
        with pytest.raises(SchemaMismatchError):
            conform(bad, schema, kind="typed", now_ms=0)


def test_future_group_resolves_in_bulk_and_works_with_wait() -> None:
    group = FutureGroup()
    futures = [group.new() for _ in range(3)]
    seen: list[object] = []
    futures[1].add_done_callback(lambda f: seen.append(f.result()))
    waiter = threading.Thread(target=lambda: concurrent.futures.wait(futures))
    waiter.start()
    assert not any(f.done() for f in futures) and not futures[0].cancel()
    group.resolve(lambda i: ("p", 10 + i))
    waiter.join(timeout=5)
    assert [f.result(timeout=1) for f in futures] == [("p", 10), ("p", 11), ("p", 12)]
    assert seen == [("p", 11)]
    failed = FutureGroup()
    future = failed.new()
    failed.fail(RuntimeError("boom"))
    assert isinstance(future.exception(timeout=1), RuntimeError)
    assert list(concurrent.futures.as_completed([future], timeout=1)) == [future]


def test_filters_round_trip_through_substrait() -> None:
    schema = pa.schema([("amount", pa.float64()), ("country", pa.string())])
    expression = to_expression([("amount", ">", 3.0), ("country", "=", "fr")])
    decoded, bound = deserialize_filter(serialize_filter(expression, schema))
    assert bound.names == ["amount", "country", "offset", "timestamp", "partition"] == filter_schema(schema).names
    batch = pa.record_batch({"amount": [1.0, 5.0, 7.0], "country": ["fr", "fr", "de"],
                             "offset": pa.array([0, 1, 2], pa.int64()),
                             "timestamp": pa.array([0, 0, 0], pa.timestamp("ms")),
                             "partition": pa.array([0, 0, 0], pa.int32())})
    assert batch.filter(decoded).column("offset").to_pylist() == [1]
    with pytest.raises(InvalidRequestError):
        to_expression("amount > 3")
    with pytest.raises(InvalidRequestError):
        serialize_filter(pc.field("missing") > 1, schema)
    with pytest.raises(InvalidRequestError):
        deserialize_filter(b"garbage")
