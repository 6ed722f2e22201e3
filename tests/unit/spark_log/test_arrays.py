"""spark_log.arrays: Arrow arrays from their buffers equal pa.array's, and a client's data
path (a batch sent, a fetched frame read, a control frame) never imports pandas."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_log._records import add_reserved_columns
from spark_log.arrays import (binary_array, binary_from_buffers, bool_array, int16_array, int32_array, int64_array,
                               repeated_int32, repeated_string, timestamp_ms_array, to_numpy)

ROOT = Path(__file__).resolve().parents[3]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60))
def test_binary_from_buffers_equals_pa_array(values: list[bytes | None]) -> None:
    built = binary_from_buffers(values)
    expected = pa.array(values, pa.binary())
    built.validate(full=True)
    assert built.equals(expected) and built.null_count == expected.null_count


@pytest.mark.parametrize("values", [["text", b"bytes"], [bytearray(b"ab"), None], [memoryview(b"xyz")],
                                    [np.arange(3, dtype=np.int32).tobytes()]], ids=["str", "bytearray", "view", "np-bytes"])
def test_other_inputs_convert_as_pa_array_converts_them(values: list[Any]) -> None:
    assert binary_from_buffers(values).equals(pa.array(values, pa.binary()))
    assert binary_array(values).equals(pa.array(values, pa.binary()))


def test_input_pa_array_refuses_is_refused_the_same_way() -> None:
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError, TypeError)):
        binary_from_buffers([b"a", 5])  # type: ignore[list-item]


def test_numeric_builders_equal_pa_array() -> None:
    numbers = [0, 1, -5, 2**40]
    assert int64_array(numbers).equals(pa.array(numbers, pa.int64()))
    assert int32_array(np.array([3, -1])).equals(pa.array([3, -1], pa.int32()))
    assert int16_array([7]).equals(pa.array([7], pa.int16()))
    assert timestamp_ms_array([1, 2]).equals(pa.array([1, 2], pa.timestamp("ms")))
    flags = [True, False] * 9 + [True]
    assert bool_array(flags).equals(pa.array(flags, pa.bool_()))
    assert int64_array(np.arange(10)[::3]).equals(pa.array([0, 3, 6, 9], pa.int64()))  # strided input


@pytest.mark.parametrize("array", [
    pa.array([1, 2, 3], pa.int64()).slice(1), pa.array([1.5, 2.5], pa.float64()), pa.array([7], pa.uint16()),
    pa.array([True, False, True] * 5, pa.bool_()).slice(3, 9), pa.array([1, None], pa.int64()),
    pa.array(["a", "b"]), pa.chunked_array([pa.array([1], pa.int32()), pa.array([2], pa.int32())]),
], ids=["int64-slice", "float64", "uint16", "bool-slice", "nulls", "strings", "chunked"])
def test_to_numpy_equals_arrows_conversion(array: Any) -> None:
    expected = array.to_numpy(zero_copy_only=False)
    got = to_numpy(array)
    assert got.dtype == expected.dtype and np.array_equal(got, expected, equal_nan=got.dtype.kind == "f")


def test_repeated_columns() -> None:
    assert repeated_string("tópic", 3).equals(pa.array(["tópic"] * 3))
    assert repeated_string("t", 0).equals(pa.array([], pa.string()))
    assert repeated_int32(4, 2).equals(pa.array([4, 4], pa.int32()))


@pytest.mark.parametrize("n", [1, 3, 64, 65, 300])
def test_reserved_columns_of_small_and_large_batches(n: int) -> None:
    batch = pa.RecordBatch.from_arrays([pa.array([b"v"] * n, pa.binary())], names=["value"])
    offsets = int64_array(np.arange(10, 10 + n))
    first = add_reserved_columns(batch, topic="tópic", partition=2, offsets=offsets, timestamps=None)
    other = add_reserved_columns(batch, topic="other", partition=3, offsets=offsets, timestamps=None)
    again = add_reserved_columns(batch, topic="tópic", partition=2, offsets=offsets, timestamps=None)
    assert first.schema.names == ["value", "topic", "partition", "offset"]
    assert first.column("topic").to_pylist() == ["tópic"] * n and first.column("partition").to_pylist() == [2] * n
    assert other.column("topic").to_pylist() == ["other"] * n and other.column("partition").to_pylist() == [3] * n
    assert first.column("offset").to_pylist() == list(range(10, 10 + n))
    assert again.equals(first)
    first.validate(full=True)


def test_a_clients_data_path_does_not_import_pandas() -> None:
    code = """
import sys
import numpy as np
from spark_log._records import bytes_batch, add_reserved_columns
from spark_log.frame import encode_batch, decode_batch, encode_marker
from spark_log.schemas import BYTES_SCHEMA
batch = bytes_batch([b"k", None], [b"v", None], None, [1, 2])
frame = encode_batch(batch, compression="lz4")
again = decode_batch(frame, BYTES_SCHEMA)
from spark_log.arrays import int64_array, timestamp_ms_array
add_reserved_columns(again, topic="t", partition=0, offsets=int64_array(np.array([5, 6])),
                     timestamps=timestamp_ms_array(np.full(2, 7)))
from spark_log._partitioner import key_array
key_array(batch, ["key"])
encode_marker(True, producer_id=1, producer_epoch=0, coordinator_epoch=1, timestamp_ms=1)
from spark_log import bytes_message
from spark_log.frame import Codec
assert bytes_message.encode([b"k"], [b"v"], [1], Codec.LZ4) is not None
print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas')[:3])
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
