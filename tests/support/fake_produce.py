"""A ``Producer`` whose cluster is a fake: every Produce call is recorded, and answered at
once by a callback (``auto``) or later by the test (``FakeCluster.held``), so a test decides
exactly what the broker says to each frame and when.

    cluster = FakeCluster({"t": bytes_topic()}, auto=ok)
    p = fake_producer(monkeypatch, cluster, linger_ms=0)
    p.send("t", b"v").result(timeout=10)
    [(topic, partition, header)] = cluster.frames()

``auto=None``: calls stay in ``held`` until the test calls ``FakeCall.answer`` (or
``FakeCall.cancel``, what closing a gRPC channel does to the calls on it).
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import grpc
import pyarrow as pa
import pytest

from spark_log import _producer
from spark_log._client import TopicInfo
from spark_log.errors import ErrorCode
from spark_log.frame import FrameHeader, iter_frames
from spark_log.proto import broker_pb2 as pb
from spark_log.schemas import BYTES_SCHEMA

__all__ = ["Answer", "FakeCall", "FakeCluster", "bytes_topic", "typed_topic", "ok", "answer_all", "fake_producer"]

# the answer to one partition entry of a call: (error code, base offset)
Answer = Callable[[pb.PartitionRecords, int], tuple[ErrorCode, int]]
_Callback = Callable[["FakeCall"], None]


class FakeCall:
    """One Produce call in flight, as the producer sees a gRPC future: ``add_done_callback``
    and ``result``."""

    def __init__(self, request: pb.ProduceRequest) -> None:
        self.request = request
        self._callbacks: list[_Callback] = []
        self._response: pb.ProduceResponse | None = None
        self._cancelled = False
        self._lock = threading.Lock()

    @property
    def answered(self) -> bool:
        return self._response is not None or self._cancelled

    def add_done_callback(self, fn: _Callback) -> None:
        with self._lock:
            if not self.answered:
                self._callbacks.append(fn)
                return
        fn(self)

    def result(self) -> pb.ProduceResponse:
        if self._cancelled:
            raise grpc.FutureCancelledError()
        assert self._response is not None, "result() of a call not answered yet"
        return self._response

    def answer(self, per_entry: Answer) -> None:
        """Answer every partition entry with ``per_entry(entry, index)``."""
        response = pb.ProduceResponse()
        for i, entry in enumerate(self.request.partitions):
            code, base = per_entry(entry, i)
            response.partitions.add(topic=entry.topic, partition=entry.partition, base_offset=base,
                                    last_offset=base, error=pb.Error(code=int(code), message=code.name))
        self._finish(response=response)

    def cancel(self) -> None:
        """What closing the channel does to a call in flight: ``result`` raises
        ``grpc.FutureCancelledError``."""
        self._finish(cancelled=True)

    def _finish(self, *, response: pb.ProduceResponse | None = None, cancelled: bool = False) -> None:
        with self._lock:
            if self.answered:
                return
            self._response, self._cancelled = response, cancelled
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)

    def headers(self) -> list[tuple[str, int, FrameHeader]]:
        """``(topic, partition, header)`` of every frame of the call, in order."""
        out = []
        for entry in self.request.partitions:
            for _, header in iter_frames(memoryview(entry.records), verify=False):
                out.append((entry.topic, entry.partition, header))
        return out


class FakeCluster:
    """Stands in for ``_client.Cluster``: metadata from ``topics``, every leader at one
    address, every Produce call recorded in ``held`` (and answered by ``auto`` if given).

    ``topic_hook(name)`` runs on every metadata lookup (``topic``) and may raise, as a
    failed metadata refresh does.  ``cancel_on_close``: ``close`` cancels the calls still
    unanswered, as closing a gRPC channel does."""

    def __init__(self, topics: dict[str, TopicInfo], auto: Answer | None = None, *,
                 cancel_on_close: bool = False) -> None:
        self._topics = dict(topics)  # the metadata cache the producer reads in send() (as Cluster._topics)
        self.auto = auto
        self.held: list[FakeCall] = []
        self.lock = threading.Lock()
        self.topic_calls = 0
        self.topic_hook: Callable[[str], None] | None = None
        self.cancel_on_close = cancel_on_close
        self.closed = False

    def topic(self, name: str, *, refresh: bool = False, auto_create: bool = False) -> TopicInfo:
        self.topic_calls += 1
        if self.topic_hook is not None:
            self.topic_hook(name)
        return self._topics[name]

    def broker_address(self, broker_id: int) -> str:
        return "127.0.0.1:1"

    def leader(self, topic: str, partition: int, *, refresh: bool = False) -> tuple[str, int]:
        return "127.0.0.1:1", 0

    def produce_raw(self, address: str) -> Any:
        cluster = self

        class Stub:
            @staticmethod
            def future(request: bytes, timeout: float) -> FakeCall:
                call = FakeCall(pb.ProduceRequest.FromString(request))
                with cluster.lock:
                    cluster.held.append(call)
                if cluster.auto is not None:
                    call.answer(cluster.auto)
                return call
        return Stub()

    def forget(self, name: str) -> None:
        pass

    def close(self) -> None:
        self.closed = True
        if self.cancel_on_close:
            for call in self.calls():
                call.cancel()

    def calls(self) -> list[FakeCall]:
        with self.lock:
            return list(self.held)

    def unanswered(self) -> list[FakeCall]:
        return [call for call in self.calls() if not call.answered]

    def frames(self) -> list[tuple[str, int, FrameHeader]]:
        """``(topic, partition, header)`` of every frame sent, in send order."""
        return [frame for call in self.calls() for frame in call.headers()]


def bytes_topic(name: str = "t", partitions: int = 1) -> TopicInfo:
    return TopicInfo(name=name, kind="bytes",
                     partitions={i: pb.PartitionMeta(partition=i, leader_id=1) for i in range(partitions)},
                     schemas={0: BYTES_SCHEMA}, schema_id=0, key_columns=())


def typed_topic(name: str, schema: pa.Schema, partitions: int = 1, key_columns: tuple[str, ...] = ()) -> TopicInfo:
    return TopicInfo(name=name, kind="typed",
                     partitions={i: pb.PartitionMeta(partition=i, leader_id=1) for i in range(partitions)},
                     schemas={0: schema}, schema_id=0, key_columns=key_columns)


def ok(entry: pb.PartitionRecords, i: int) -> tuple[ErrorCode, int]:
    """Every entry appended (at offset 100 + its index in the call)."""
    return ErrorCode.NONE, 100 + i


def answer_all(code: ErrorCode, base_offset: int = -1) -> Answer:
    """Every entry answered ``code``."""
    return lambda entry, i: (code, base_offset)


def fake_producer(monkeypatch: pytest.MonkeyPatch, cluster: FakeCluster, **kwargs: Any) -> _producer.Producer:
    """A ``Producer`` talking to ``cluster`` (``kwargs``: the Producer's own)."""
    monkeypatch.setattr(_producer, "Cluster", lambda *args, **kw: cluster)
    return _producer.Producer("127.0.0.1:1", **kwargs)
