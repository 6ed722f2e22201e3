"""A frame whose schema id is newer than every version the leader's metadata image knows
waits (bounded) for the image instead of being refused at once: the writer learned the id
from a broker ahead of the leader (CI once saw ``register_schema`` return id 0 and the first
``send_batch`` refused by a leader whose image did not hold it yet).  An id that never comes
is still refused with ``SchemaMismatchError``, and nothing is appended."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pytest

from brokers.metadata.image import BrokerInfo, MetadataImage, PartitionInfo, SchemaVersion, TopicImage, frozen_map
from brokers.server.partition_manager import PartitionManager
from brokers.server.produce import ProduceHandler
from spark_log._client import error_from_pb
from spark_log.errors import SchemaMismatchError
from spark_log.frame import encode_batch
from spark_log.proto import broker_pb2 as pb

ME = 1
SCHEMA = pa.schema([("n", pa.int64())])


def _image(offset: int, *, with_schema: bool) -> MetadataImage:
    brokers = {ME: BrokerInfo(broker_id=ME, incarnation="i1", broker_epoch=1, address="127.0.0.1:9001")}
    schemas = (SchemaVersion(schema_id=0, schema=SCHEMA),) if with_schema else ()
    partitions = {0: PartitionInfo(replicas=(ME,), isr=(ME,), leader=ME, leader_epoch=1, partition_epoch=1)}
    topics = {"t": TopicImage(name="t", topic_id="id-t", kind="typed", partitions=frozen_map(partitions),
                              schemas=schemas)}
    return MetadataImage(brokers=frozen_map(brokers), topics=frozen_map(topics), offset=offset, epoch=1)


@pytest.fixture()
def manager(tmp_path: Path) -> Iterator[PartitionManager]:
    manager = PartitionManager(broker_id=ME, data_dir=tmp_path)
    image = _image(10, with_schema=False)   # a typed topic created without a schema, as the leader knows it
    manager.publish(None, image)
    manager.reconcile(image)
    try:
        yield manager
    finally:
        for partition in manager.hosted():
            partition.close()


def _request(schema_id: int, timeout_ms: int = 30_000) -> pb.ProduceRequest:
    frame = encode_batch(pa.record_batch([pa.array([1, 2, 3], pa.int64())], schema=SCHEMA), schema_id=schema_id)
    return pb.ProduceRequest(acks=1, timeout_ms=timeout_ms,
                             partitions=[pb.PartitionRecords(topic="t", partition=0, records=frame,
                                                             current_leader_epoch=-1)])


def test_a_schema_id_the_image_reaches_while_the_produce_waits_is_taken(manager: PartitionManager) -> None:
    waiting = threading.Event()
    wait_for_image = manager.wait_for_image

    def spy(*args: object, **kwargs: object) -> object:
        waiting.set()
        return wait_for_image(*args, **kwargs)  # type: ignore[arg-type]

    manager.wait_for_image = spy  # type: ignore[method-assign]
    answers: list[pb.ProduceResponse] = []
    producing = threading.Thread(target=lambda: answers.append(ProduceHandler(manager).handle(_request(0))))
    producing.start()
    assert waiting.wait(10), "the produce never waited for the image"
    assert not answers, "answered before the image knew schema 0"
    manager.publish(None, _image(11, with_schema=True))
    producing.join(timeout=10)
    (result,) = answers[0].partitions
    assert error_from_pb(result.error) is None, result.error
    assert (result.base_offset, result.last_offset) == (0, 2)
    assert manager.get("t", 0).offsets().log_end_offset == 3


def test_a_schema_id_that_never_comes_is_refused_and_nothing_is_written(manager: PartitionManager) -> None:
    started = time.monotonic()
    (result,) = ProduceHandler(manager).handle(_request(0, timeout_ms=300)).partitions
    assert isinstance(error_from_pb(result.error), SchemaMismatchError), result.error
    assert "schema id 0" in result.error.message
    assert time.monotonic() - started < 5, "the wait is bounded by the request's timeout"
    assert manager.get("t", 0).offsets().log_end_offset == 0


def test_a_known_schema_id_is_never_waited_for(manager: PartitionManager) -> None:
    manager.publish(None, _image(11, with_schema=True))

    def no_wait(*args: object, **kwargs: object) -> object:
        raise AssertionError("waited for an image although schema 0 is known")

    manager.wait_for_image = no_wait  # type: ignore[method-assign]
    (result,) = ProduceHandler(manager).handle(_request(0)).partitions
    assert error_from_pb(result.error) is None, result.error
