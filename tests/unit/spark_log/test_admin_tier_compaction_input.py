"""Admin's tiering and compaction calls refuse bad arguments with typed errors, before any
call to a broker (the address below has no broker: nothing is sent)."""
from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa
import pytest

from spark_log import Admin
from spark_log.errors import InvalidOffsetMapError, InvalidRequestError


@pytest.fixture()
def admin() -> Iterator[Admin]:
    with Admin("127.0.0.1:1") as client:
        yield client


@pytest.mark.parametrize(("partition", "start", "end"), [
    (0, "0", "1"), (0, 0, "1"), ("0", 0, 1), (0, True, 1), (0, 0, False), (True, 0, 1), (0, 0.0, 1),
    (0, 0, 1 << 63), (1 << 31, 0, 1), (0, None, 1),
])
def test_commit_tiered_refuses_what_is_not_an_int(admin: Admin, partition: Any, start: Any, end: Any) -> None:
    with pytest.raises(InvalidRequestError, match="must be a"):
        admin.commit_tiered("t", partition, start=start, end=end)


@pytest.mark.parametrize("offset_map", [
    {"key": [b"a"], "offset": [0]},
    pa.record_batch({"key": pa.array([b"a"]), "offset": pa.array([0], pa.int64())}),
    None,
])
def test_offer_offset_map_refuses_what_is_not_a_table(admin: Admin, offset_map: Any) -> None:
    with pytest.raises(InvalidOffsetMapError, match="pyarrow.Table"):
        admin.offer_offset_map("t", 0, offset_map, start=0, end=1)
