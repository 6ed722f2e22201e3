"""spark_log.bytes_message: a small bytes-topic batch written directly is byte for byte the
IPC message pyarrow writes for the same batch (so no reader can tell them apart), reads back
as that batch, and the writer declines what it does not cover."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log import bytes_message
from spark_log._records import BYTES_SCHEMA, bytes_batch, null_headers
from spark_log.frame import Codec, decode_batch, encode_message, ipc_message, read_message
from spark_log.schemas import schema_from_bytes, schema_to_bytes

CODECS = [Codec.NONE, Codec.LZ4]


def _item(max_size: int) -> st.SearchStrategy[bytes | None]:
    # random bytes and runs of one byte (LZ4 compresses those, so both block kinds appear)
    return st.one_of(st.none(), st.binary(max_size=max_size),
                     st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=3), st.integers(0, 3000)))


@st.composite
def _batches(draw: Any) -> tuple[list[bytes | None] | None, list[bytes | None], list[int]]:
    n = draw(st.integers(1, 80))
    values = draw(st.lists(_item(300), min_size=n, max_size=n))
    keys = draw(st.one_of(st.none(), st.just([None] * n), st.lists(_item(24), min_size=n, max_size=n),
                          st.lists(st.binary(max_size=24), min_size=n, max_size=n)))
    timestamps = draw(st.lists(st.integers(-(2**62), 2**62), min_size=n, max_size=n))
    return keys, values, timestamps


def _by_pa_array(keys: list[bytes | None] | None, values: list[bytes | None], timestamps: list[int]) -> pa.RecordBatch:
    """The same batch built with pa.array (the builder bytes_batch uses once pandas is loaded)."""
    n = len(values)
    key = pa.nulls(n, pa.binary()) if keys is None or keys.count(None) == n else pa.array(keys, pa.binary())
    return pa.RecordBatch.from_arrays([key, pa.array(values, pa.binary()), null_headers(n),
                                       pa.array(timestamps, pa.timestamp("ms"))], schema=BYTES_SCHEMA)


@settings(max_examples=300, deadline=None)
@given(_batches(), st.sampled_from(CODECS))
def test_the_message_is_pyarrows_byte_for_byte(batch: Any, codec: Codec) -> None:
    keys, values, timestamps = batch
    message = bytes_message.encode(keys, values, timestamps, codec)
    expected = bytes_batch(keys, values, None, timestamps)
    assert message == ipc_message(expected, codec).to_pybytes()
    assert message == ipc_message(_by_pa_array(keys, values, timestamps), codec).to_pybytes()
    read = read_message(pa.py_buffer(message), BYTES_SCHEMA, codec)
    read.validate(full=True)
    assert read.equals(expected)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_a_frame_around_it_decodes_to_the_records(codec: Codec) -> None:
    keys, values, stamps = [b"k", None, b"key-3"], [b"one", None, b""], [1, 2, 3]
    message = bytes_message.encode(keys, values, stamps, codec)
    assert message is not None
    frame = encode_message(message, codec=codec, record_count=3, first_timestamp=1, max_timestamp=3)
    batch = decode_batch(frame, BYTES_SCHEMA, verify=True)
    assert batch.column("key").to_pylist() == keys
    assert batch.column("value").to_pylist() == values
    assert batch.column("headers").to_pylist() == [None, None, None]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == stamps
    assert frame == encode_message(ipc_message(batch, codec), codec=codec, record_count=3, first_timestamp=1,
                                   max_timestamp=3)


@pytest.mark.parametrize(("keys", "values", "stamps", "codec"), [
    (None, [], [], Codec.LZ4),  # no records
    (None, [b"v"] * (bytes_message.MAX_RECORDS + 1), [1] * (bytes_message.MAX_RECORDS + 1), Codec.LZ4),
    (None, [b"x" * (bytes_message.MAX_BYTES + 1)], [1], Codec.NONE),
    (None, ["text"], [1], Codec.NONE),  # str: the producer encodes it first; anything else goes to pyarrow
    (None, [bytearray(b"v")], [1], Codec.NONE),
    (None, [memoryview(b"v")], [1], Codec.LZ4),
    ([b"k", "k"], [b"v", b"w"], [1, 2], Codec.NONE),
    ([b"k"], [b"v", b"w"], [1, 2], Codec.NONE),  # keys and values of different lengths
    (None, [b"v"], [1, 2], Codec.NONE),
    (None, [b"v"], [2**63], Codec.NONE),  # not an int64 timestamp: pyarrow's error, not a wrapped one
    (None, [b"v"], ["1"], Codec.NONE),
    (None, [b"v"], [1], Codec.ZSTD),
], ids=["empty", "too-many", "too-large", "str", "bytearray", "memoryview", "str-key", "short-keys", "long-stamps",
        "stamp-overflow", "stamp-str", "zstd"])
def test_what_it_does_not_cover_is_declined(keys: Any, values: Any, stamps: Any, codec: Codec) -> None:
    assert bytes_message.encode(keys, values, stamps, codec) is None


def test_the_bytes_schema_read_back_is_the_one_object() -> None:
    # the producer takes the direct path only for ``info.schema is BYTES_SCHEMA``
    assert schema_from_bytes(schema_to_bytes(BYTES_SCHEMA)) is BYTES_SCHEMA
    other = pa.schema([pa.field("value", pa.binary())])
    assert schema_from_bytes(schema_to_bytes(other)).equals(other)
