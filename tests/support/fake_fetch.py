"""A ``Consumer`` whose cluster is a fake: fetches are answered by a callback, so a test
decides exactly what each fetch answer holds (errors per partition, records, long polls)."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable

import pyarrow as pa

from spark_log import Consumer
from spark_log._client import TopicInfo
from spark_log.frame import encode_batch
from spark_log.proto import broker_pb2 as pb
from spark_log.schemas import BYTES_SCHEMA

__all__ = ["FakeCluster", "frame", "response", "fake_consumer"]


def frame(base_offset: int, values: list[bytes], *, epoch: int = 0) -> bytes:
    """One stored frame of a bytes topic holding ``values`` from ``base_offset``."""
    n = len(values)
    batch = pa.record_batch([pa.array([None] * n, pa.binary()), pa.array(values),
                             pa.array([[]] * n, BYTES_SCHEMA.field("headers").type),
                             pa.array([0] * n, pa.timestamp("ms"))], schema=BYTES_SCHEMA)
    return bytes(encode_batch(batch, schema_id=0, base_offset=base_offset, partition_leader_epoch=epoch,
                              compression=None))


def response(*parts: pb.FetchPartitionResult) -> bytes:
    return pb.FetchResponse(partitions=list(parts)).SerializeToString()


class FakeCall:
    """A fetch in flight: answered at once, or when ``resolve`` is called."""

    def __init__(self, answer: Any) -> None:
        self.future: Future[Any] = Future()
        self.answer = answer

    def resolve(self) -> None:
        if not self.future.done():
            self.future.set_result(self.answer)

    def result(self) -> Any:
        return self.future.result()

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        self.future.add_done_callback(lambda _: fn(self))

    def cancel(self) -> bool:
        return self.future.cancel()


class FakeCluster:
    """One topic of ``partitions`` partitions led by one broker; ``answer(request)`` gives
    each fetch's serialised answer; ``on_call(call, request)`` (default: answer at once)
    decides when it arrives."""

    def __init__(self, topic: str, partitions: int, answer: Callable[[pb.FetchRequest], bytes]) -> None:
        self.topic_name = topic
        self.parts = {i: pb.PartitionMeta(partition=i, leader_id=1, leader_epoch=0) for i in range(partitions)}
        self.answer = answer
        self.on_call: Callable[[FakeCall, pb.FetchRequest], None] = lambda call, request: call.resolve()

    def topic(self, name: str, *, refresh: bool = False, auto_create: bool = False) -> TopicInfo:
        return TopicInfo(name=name, kind="bytes", partitions=self.parts, schemas={0: BYTES_SCHEMA}, schema_id=0,
                         key_columns=())

    def leader(self, topic: str, partition: int, *, refresh: bool = False) -> tuple[str, int]:
        return "fake:1", self.parts[partition].leader_epoch

    def forget(self, name: str) -> None:
        pass

    def fetch_raw(self, address: str) -> Any:
        cluster = self

        class Fetch:
            def future(self, request: pb.FetchRequest, timeout: float) -> FakeCall:
                call = FakeCall(cluster.answer(request))
                cluster.on_call(call, request)
                return call
        return Fetch()

    def close(self) -> None:
        pass


def fake_consumer(cluster: FakeCluster, **settings: Any) -> Consumer:
    consumer = Consumer("fake:1", transport="grpc", **settings)
    consumer._cluster.close()
    consumer._cluster = cluster  # type: ignore[assignment]
    return consumer
