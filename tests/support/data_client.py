"""A minimal Python client of the broker's binary data listener (brokers/server/data_listener.py),
for tests: the same wire format the JVM connector (connectors/jvm) speaks."""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from typing import Any

import grpc

from spark_log._data_transport import describe_listener
from spark_log.proto import data_listener_pb2 as dpb

_I16, _I32, _I64, _U8, _U32 = (struct.Struct(f) for f in ("<h", "<i", "<q", "<B", "<I"))


def describe(grpc_address: str) -> dpb.DataListenerInfo:
    """``DataListener.Describe`` on a broker's gRPC port."""
    with grpc.insecure_channel(grpc_address) as channel:
        return describe_listener(channel, 5.0)


class DataError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message


class _In:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, codec: struct.Struct) -> Any:
        (value,) = codec.unpack_from(self.data, self.at)
        self.at += codec.size
        return value

    def raw(self) -> bytes:
        n = self.take(_I32)
        out = self.data[self.at: self.at + n]
        self.at += n
        return out

    def str(self) -> str:
        return self.raw().decode()


def _s(text: str) -> bytes:
    data = text.encode()
    return _I32.pack(len(data)) + data


@dataclass
class Partition:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass
class Topic:
    name: str
    code: int
    kind: str
    timestamp_type: int
    key_columns: list[str]
    schemas: dict[int, bytes]
    partitions: list[Partition] = field(default_factory=list)


class DataClient:
    """One connection to one data listener; one request at a time."""

    def __init__(self, host: str, port: int, timeout_s: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self._correlation = 0
        self.last_aborted: list[tuple[int, int, int]] = []
        self.last_start = -1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "DataClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, api: int, payload: bytes) -> _In:
        self._correlation += 1
        body = _U8.pack(api) + _U32.pack(self._correlation) + payload
        self.sock.sendall(_U32.pack(len(body)) + body)
        (size,) = _U32.unpack(self._exact(4))
        answer = _In(self._exact(size))
        assert answer.take(_U32) == self._correlation
        code, message = answer.take(_I16), answer.str()
        if code:
            raise DataError(code, message)
        return answer

    def _exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("data listener closed the connection")
            out += chunk
        return bytes(out)

    def metadata(self, topics: list[str] | None = None) -> tuple[dict[int, tuple[str, str, int]], dict[str, Topic]]:
        payload = _I32.pack(-1) if topics is None else _I32.pack(len(topics)) + b"".join(_s(t) for t in topics)
        r = self.call(1, payload)
        brokers = {}
        for _ in range(r.take(_I32)):
            broker_id, address, host, port, _rack, _fenced = r.take(_I32), r.str(), r.str(), r.take(_I32), r.str(), r.take(_U8)
            brokers[broker_id] = (address, host, port)
        topics_out = {}
        for _ in range(r.take(_I32)):
            name, code, _msg, kind, ts_type = r.str(), r.take(_I16), r.str(), r.str(), r.take(_U8)
            keys = [r.str() for _ in range(r.take(_I32))]
            schemas = {}
            for _ in range(r.take(_I32)):
                sid = r.take(_I32)
                schemas[sid] = r.raw()
            topic = Topic(name, code, kind, ts_type, keys, schemas)
            for _ in range(r.take(_I32)):
                p, leader, epoch = r.take(_I32), r.take(_I32), r.take(_I32)
                replicas = [r.take(_I32) for _ in range(r.take(_I32))]
                isr = [r.take(_I32) for _ in range(r.take(_I32))]
                topic.partitions.append(Partition(p, leader, epoch, replicas, isr))
            topics_out[name] = topic
        return brokers, topics_out

    def list_offsets(self, spec: int, parts: list[tuple[str, int]], committed: bool = False) -> dict[tuple[str, int], tuple[int, int]]:
        payload = _I64.pack(spec) + _U8.pack(1 if committed else 0) + _I32.pack(len(parts))
        payload += b"".join(_s(t) + _I32.pack(p) for t, p in parts)
        r = self.call(2, payload)
        out = {}
        for _ in range(r.take(_I32)):
            t, p, code, _msg, offset = r.str(), r.take(_I32), r.take(_I16), r.str(), r.take(_I64)
            out[(t, p)] = (code, offset)
        return out

    def list_offsets_v2(self, spec: int, parts: list[tuple[str, int, int]],
                        committed: bool = False) -> dict[tuple[str, int], tuple[int, int, int]]:
        """LIST_OFFSETS_V2 (11): ``parts`` are (topic, partition, client leader epoch);
        ``{(topic, partition): (error code, offset, the replica's leader epoch)}``."""
        payload = _I64.pack(spec) + _U8.pack(1 if committed else 0) + _I32.pack(len(parts))
        payload += b"".join(_s(t) + _I32.pack(p) + _I32.pack(e) for t, p, e in parts)
        r = self.call(11, payload)
        out = {}
        for _ in range(r.take(_I32)):
            t, p, code, _msg, offset, epoch = r.str(), r.take(_I32), r.take(_I16), r.str(), r.take(_I64), r.take(_I32)
            out[(t, p)] = (code, offset, epoch)
        return out

    def fetch(self, topic: str, partition: int, offset: int, *, max_offset: int = 0, max_wait_ms: int = 0,
              max_bytes: int = 1 << 20, committed: bool = False, api: int = 3,
              leader_epoch: int | None = None) -> tuple[int, str, int, int, bytes]:
        """``(error code, message, high watermark, next fetch offset, stored frames)``; the
        aborted transactions of a ``committed`` (read_committed) fetch land in ``last_aborted``,
        the log start offset in ``last_start``.  ``api=8``: FETCH_TIER (the Delta tier's records).
        ``leader_epoch`` (not None): FETCH_V2 (12) / FETCH_TIER_V2 (13) carrying it."""
        if leader_epoch is not None:
            api = {3: 12, 8: 13}[api]
        epoch = b"" if leader_epoch is None else _I32.pack(leader_epoch)
        payload = (_I32.pack(max_wait_ms) + _I32.pack(1) + _I32.pack(max_bytes) + _U8.pack(int(committed)) + _I32.pack(1)
                   + _s(topic) + _I32.pack(partition) + epoch + _I64.pack(offset) + _I64.pack(max_offset) + _I32.pack(0))
        r = self.call(api, payload)
        assert r.take(_I32) == 1
        _t, _p, code, message = r.str(), r.take(_I32), r.take(_I16), r.str()
        hw, self.last_start, next_offset = r.take(_I64), r.take(_I64), r.take(_I64)
        frames = r.raw()
        self.last_aborted = [(r.take(_I64), r.take(_I64), r.take(_I64)) for _ in range(r.take(_I32))]
        return code, message, hw, next_offset, frames

    def produce(self, topic: str, partition: int, frames: bytes, *, acks: int = -1,
                timeout_ms: int = 10_000) -> tuple[int, str, int, int, bool]:
        """``(error code, message, base offset, last offset, duplicate)``"""
        payload = (_I16.pack(acks) + _I32.pack(timeout_ms) + _I32.pack(1) + _s(topic) + _I32.pack(partition)
                   + _I32.pack(-1) + _I32.pack(len(frames)) + frames)
        r = self.call(4, payload)
        assert r.take(_I32) == 1
        _t, _p, code, message = r.str(), r.take(_I32), r.take(_I16), r.str()
        return code, message, r.take(_I64), r.take(_I64), bool(r.take(_U8))
