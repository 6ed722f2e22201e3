"""A typed topic created without a schema (``kind="typed"``): its first registered schema
becomes schema id 0; the refusals around it; it survives snapshots (controller part,
``topics.py`` / ``schema_versions.py``)."""
from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

from brokers.controller.controller import QuorumController
from brokers.metadata import records as r
from brokers.metadata.snapshot import decode_image, encode_image
from spark_log.clock import ManualClock
from spark_log.errors import InvalidRequestError, InvalidSchemaError, SchemaMismatchError

from .local_raft import LocalRaft

V0 = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


@pytest.fixture
def controller() -> QuorumController:
    ids = (f"topic-{i}" for i in itertools.count())
    c = QuorumController(node_id=1, clock=ManualClock(), session_timeout_ms=1000, id_factory=lambda: next(ids))
    LocalRaft(c).win_leadership()
    for b in range(3):
        c.register_broker(broker_id=b, incarnation=f"i{b}", address=f"127.0.0.1:{9100 + b}")
    return c


def _records(c: QuorumController) -> list[r.MetadataRecord]:
    raft = c._raft
    assert isinstance(raft, LocalRaft)
    return [r.decode(p) for batch in raft.proposals for p in batch]


def test_typed_topic_without_schema_has_no_schema_record(controller: QuorumController) -> None:
    topic = controller.create_topic(name="t", partitions=2, kind="typed")
    assert topic.kind == "typed" and topic.schema is None and topic.schema_id == -1 and topic.schemas == ()
    assert len(topic.partitions) == 2
    assert not [x for x in _records(controller) if isinstance(x, r.SchemaRecord) and x.topic == "t"]


def test_first_registered_schema_is_id_0_then_evolves(controller: QuorumController) -> None:
    controller.create_topic(name="t", kind="typed", key_columns=["id"])
    assert controller.register_schema(topic="t", schema=V0) == 0
    assert controller.register_schema(topic="t", schema=V0) == 0  # a racing second writer: same answer
    assert controller.image.topics["t"].schema_by_id(0) == V0
    v1 = V0.append(pa.field("note", pa.string()))
    assert controller.register_schema(topic="t", schema=v1) == 1
    with pytest.raises(SchemaMismatchError, match="name|id"):
        controller.register_schema(topic="t", schema=pa.schema([("id", pa.string())]))


def test_first_schema_must_satisfy_the_key_columns_and_schema_rules(controller: QuorumController) -> None:
    controller.create_topic(name="t", kind="typed", key_columns=["user"])
    before = controller.image.topics["t"]
    with pytest.raises(InvalidSchemaError, match="user"):
        controller.register_schema(topic="t", schema=V0)
    with pytest.raises(InvalidSchemaError, match="reserved"):
        controller.register_schema(topic="t", schema=pa.schema([("user", pa.string()), ("offset", pa.int64())]))
    assert controller.image.topics["t"] is before


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"kind": "columnar"}, "kind"),
        ({"kind": "bytes", "schema": V0}, "bytes"),
        ({"kind": "typed", "key_columns": ["a", "a"]}, "distinct"),
        ({"kind": "typed", "key_columns": [""]}, "non-empty"),
        ({"kind": "bytes", "key_columns": ["a"]}, "typed topic"),
    ],
)
def test_kind_refusals(controller: QuorumController, kwargs: dict, text: str) -> None:  # type: ignore[type-arg]
    before = controller.image.topics
    with pytest.raises(InvalidRequestError, match=text):
        controller.create_topic(name="x", **kwargs)
    assert controller.image.topics == before


def test_explicit_kinds_match_the_defaults(controller: QuorumController) -> None:
    assert controller.create_topic(name="b", kind="bytes").schema_id == 0
    typed = controller.create_topic(name="s", kind="typed", schema=V0)
    assert typed.kind == "typed" and typed.schema == V0 and typed.schema_id == 0


def test_schemaless_topic_survives_snapshots(controller: QuorumController) -> None:
    controller.create_topic(name="t", kind="typed", key_columns=["id"])
    image = decode_image(encode_image(controller.image))
    assert image.topics["t"].kind == "typed" and image.topics["t"].schemas == ()
    other = QuorumController(node_id=2)
    other.restore(controller.image.offset + 1, controller.snapshot())
    assert other.image == controller.image
    controller.register_schema(topic="t", schema=V0)
    assert decode_image(encode_image(controller.image)).topics["t"].schema_by_id(0) == V0
