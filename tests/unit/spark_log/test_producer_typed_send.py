"""``send`` to a typed topic: headers, the key hash and timestamps (unit,
``tests/support/fake_produce.py``: no broker)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from spark_log import errors
from tests.support.fake_produce import FakeCluster, fake_producer, ok, typed_topic

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def test_headers_are_refused_on_a_typed_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    """A typed frame holds only the schema's columns: headers given to ``send`` would be
    dropped, so they are refused, naming why; nothing is sent."""
    cluster = FakeCluster({"typed": typed_topic("typed", SCHEMA)}, auto=ok)
    p = fake_producer(monkeypatch, cluster, linger_ms=0)
    try:
        with pytest.raises(errors.InvalidRequestError, match="headers"):
            p.send("typed", {"id": 1, "name": "a"}, headers={"trace": b"x"})
        with pytest.raises(errors.InvalidRequestError, match="headers"):
            p.send("typed", {"id": 1, "name": "a"}, headers=[("trace", "x")])
        p.flush(5)
        assert cluster.frames() == []
        p.send("typed", {"id": 1, "name": "a"}, headers={}).result(timeout=10)  # no headers: nothing to drop
    finally:
        p.close(5)
