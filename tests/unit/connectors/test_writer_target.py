"""The sink's checks on the driver (``resolve_target``) and its routing (``_partition_of_rows``),
over a fake admin: bad options and columns get a typed error before anything is written."""
from __future__ import annotations

import pyarrow as pa
import pytest

from connectors.options import WriterOptions
from connectors.writer import WriteTarget, _partition_of_rows
from spark_log.errors import InvalidConfigError


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
