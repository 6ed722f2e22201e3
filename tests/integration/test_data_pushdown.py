"""The data listener's FETCH with a pushdown block (brokers/server/data_pushdown.py) against a
real cluster: the brokers answer with an Arrow stream of the kept rows, projected, and say so
in the trailing payload kinds; a FETCH without the block still gets stored frames and no
kinds; a predicate the rule does not push and a block over two topics are refused."""
from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from brokers.launcher.local import LocalCluster
from spark_log import Admin, Producer
from spark_log.errors import ErrorCode
from tests.support.data_client import DataClient, DataError, describe

pytestmark = pytest.mark.integration

_I16, _I32, _I64, _U8 = struct.Struct("<h"), struct.Struct("<i"), struct.Struct("<q"), struct.Struct("<B")


def _s(text: str) -> bytes:
    data = text.encode()
    return _I32.pack(len(data)) + data


def _fetch(topics: list[str], block: bytes) -> bytes:
    head = _I32.pack(0) + _I32.pack(1) + _I32.pack(1 << 20) + _U8.pack(0) + _I32.pack(len(topics))
    return head + b"".join(_s(t) + _I32.pack(0) + _I64.pack(0) + _I64.pack(0) + _I32.pack(0) for t in topics) + block


def _block(columns: list[str] | None, predicates: list[bytes]) -> bytes:
    out = _U8.pack(1) + _I32.pack(-1 if columns is None else len(columns))
    out += b"".join(_s(c) for c in columns or [])
    return out + _I32.pack(len(predicates)) + b"".join(predicates)


def test_fetch_with_a_pushdown_block_answers_the_kept_rows(cluster: LocalCluster, topic_name: str) -> None:
    schema = pa.schema([("n", pa.int64()), ("s", pa.string()), ("f", pa.float64())])
    with Admin(cluster.bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=1, schema=schema)
        admin.create_topic(topic_name + "-b", partitions=1, replication_factor=1, schema=schema)
    rows = pa.table({"n": list(range(100)), "s": [f"s{i % 3}" for i in range(100)],
                     "f": [float("nan") if i == 5 else float(i) for i in range(100)]}, schema=schema)
    with Producer(cluster.bootstrap) as producer:
        for future in producer.send_batch(topic_name, rows, partition=0):
            future.result(timeout=30)
    first = cluster.bootstrap.split(",")[0]
    info = describe(first)
    with DataClient(info.host, info.port) as any_broker:
        brokers, topics = any_broker.metadata([topic_name])
    _address, host, port = brokers[topics[topic_name].partitions[0].leader]
    n_ge_90 = _s("n") + _U8.pack(3) + _U8.pack(1) + _I64.pack(90)            # n >= 90
    s_in = _s("s") + _U8.pack(6) + _I32.pack(2) + _U8.pack(3) + _s("s1") + _U8.pack(0)  # s IN ('s1', NULL)
    f_gt = _s("f") + _U8.pack(2) + _U8.pack(2) + struct.pack("<d", 97.5)     # f > 97.5 (NaN kept)
    with DataClient(host, port) as client:
        r = client.call(3, _fetch([topic_name], _block(["n"], [n_ge_90, s_in])))
        assert r.take(_I32) == 1
        _t, _p, code, message = r.str(), r.take(_I32), r.take(_I16), r.str()
        assert code == 0, message
        _hw, _start, next_offset = r.take(_I64), r.take(_I64), r.take(_I64)
        stream = r.raw()
        assert r.take(_I32) == 0  # no aborted transactions
        assert r.take(_I32) == 1 and r.take(_U8) == 1  # the payload kind: an Arrow stream
        kept = pa.ipc.open_stream(stream).read_all()
        assert kept.column_names == ["n", "offset", "timestamp"]
        assert kept.column("n").to_pylist() == [91, 94, 97] == kept.column("offset").to_pylist()
        assert next_offset == 100

        r = client.call(3, _fetch([topic_name], _block(None, [f_gt])))
        r.take(_I32), r.str(), r.take(_I32)
        assert r.take(_I16) == 0
        r.str(), r.take(_I64), r.take(_I64), r.take(_I64)
        kept = pa.ipc.open_stream(r.raw()).read_all()
        assert kept.column_names == ["n", "s", "f", "offset", "timestamp"]
        assert kept.column("n").to_pylist() == [5, 98, 99]  # Spark's NaN: above every value

        code, message, _hw, _next, frames = client.fetch(topic_name, 0, 0)  # no block: stored frames, no kinds
        assert code == 0 and frames[16:18] == b"SL", message

        not_pushed = _s("n") + _U8.pack(1) + _U8.pack(3) + _s("x")  # n = 'x': a value n cannot hold
        for refused in (_fetch([topic_name], _block(None, [not_pushed])),
                        _fetch([topic_name, topic_name + "-b"], _block(None, [n_ge_90]))):
            with pytest.raises(DataError) as error:
                client.call(3, refused)
            assert error.value.code == ErrorCode.INVALID_REQUEST

