"""Snapshots: an image survives encode/decode exactly; damaged snapshots are refused."""
from __future__ import annotations

import pyarrow as pa
import pytest

from brokers.metadata import records as r
from brokers.metadata.image import EMPTY
from brokers.metadata.schema_codec import schema_to_bytes
from brokers.metadata.snapshot import decode_image, encode_image
from spark_log.config import TopicConfig
from spark_log.errors import CorruptRecordError

from .helpers import broker, build, topic


def rich_image():  # type: ignore[no-untyped-def]
    img = build([broker(1), broker(2, epoch=4, fenced=True, rack="r"), *topic("a", [(1, 2), (2, 1)]), *topic("b", [(1,)])])
    return build(
        [
            r.PartitionChangeRecord(topic="a", partition=0, leader=r.NO_LEADER, isr=(1,)),
            r.ConfigRecord(topic="a", config=TopicConfig(cleanup_policy="compact")),
            r.SchemaRecord(topic="b", schema_id=1, schema_bytes=schema_to_bytes(pa.schema([("v", pa.string())]))),
        ],
        img,
    )


def test_round_trip() -> None:
    img = rich_image()
    assert decode_image(encode_image(img)) == img
    assert decode_image(encode_image(EMPTY)) == EMPTY


def test_damaged_snapshots_are_refused() -> None:
    data = encode_image(rich_image())
    for bad in (b"", b"junk", data[: len(data) // 2], data.replace(b'"snapshot"', b'"other"')):
        with pytest.raises(CorruptRecordError):
            decode_image(bad)
