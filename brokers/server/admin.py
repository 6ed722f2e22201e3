"""Admin requests: forwarded to the active controller, answered from this broker's image.

Changes (create/delete topic, alter configs, register schema) go through
``ControllerClient``, which finds the active controller and follows NOT_CONTROLLER.  When
the controller has committed the change, this broker waits (up to ``wait_s``) until its own
metadata image shows it, so that a describe, produce or fetch sent to this broker right
after the answer sees the change; a create still missing from the image after that wait is
described from the controller's answer (never "unknown topic" for a committed create).
Describe and list are served from the local image.

Errors are the controller's typed errors, passed through unchanged.  ``validate_only``
creates check the request here (names, counts, configs, schema) without a round trip.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from brokers.controller.client import ControllerClient
from brokers.controller.configs import alter_config_records
from brokers.controller.topics import create_topic_records
from brokers.metadata.records import TopicRecord
from brokers.metadata.image import MetadataImage
from spark_log.schemas import schema_from_bytes
from spark_log.config import TopicConfig
from spark_log.errors import (
    InvalidSchemaError,
    InvalidTopicError,
    RequestTimeoutError,
    UnknownTopicOrPartitionError,
)
from spark_log.proto import broker_pb2 as pb

from .coordinator_topics import COORDINATOR_TOPICS
from .metadata import MetadataBuilder
from .topic_defaults import TopicDefaults

__all__ = ["AdminHandler"]

WaitFor = Callable[[Callable[[MetadataImage], bool], float], MetadataImage]


class AdminHandler:
    def __init__(self, *, controller: ControllerClient, image: Callable[[], MetadataImage], wait_for: WaitFor,
                 builder: MetadataBuilder, wait_s: float = 10.0, defaults: TopicDefaults = TopicDefaults(),
                 topic_config: TopicConfig = TopicConfig()) -> None:
        self.controller = controller
        self.defaults = defaults
        self.topic_config = topic_config  # the topic settings' defaults (the controller's topic_defaults)
        self.image = image
        self.wait_for = wait_for
        self.builder = builder
        self.wait_s = wait_s

    def _await(self, predicate: Callable[[MetadataImage], bool]) -> MetadataImage:
        try:
            return self.wait_for(predicate, self.wait_s)
        except RequestTimeoutError:
            return self.image()  # committed; this broker is just behind: answer with what it has

    def _described(self, name: str, image: MetadataImage) -> pb.TopicDescription:
        topic = image.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        return self.builder.describe(topic)

    def create_topic(self, request: pb.CreateTopicRequest) -> pb.TopicDescription:
        if request.name in COORDINATOR_TOPICS:  # their coordinators create them, with their settings
            raise InvalidTopicError(f"{request.name} is internal: its coordinator creates it")
        schema = None
        if request.arrow_schema:
            try:
                schema = schema_from_bytes(request.arrow_schema)
            except Exception as exc:  # noqa: BLE001 - any parse failure is the caller's bad input
                raise InvalidSchemaError(f"arrow_schema is not an Arrow IPC schema: {exc}") from None
        # -1: the broker's default_partitions / default_replication_factor (topic_defaults.py)
        partitions, replication_factor = self.defaults.fill(request.partitions, request.replication_factor)
        if request.validate_only:  # the controller's own checks, against this broker's image; nothing proposed
            records = create_topic_records(
                self.image(), name=request.name, topic_id="", partitions=partitions,
                replication_factor=replication_factor, config=dict(request.configs), schema=schema,
                key_columns=list(request.key_columns), defaults=self.topic_config, kind=request.kind or None)
            topic_record = next(r for r in records if isinstance(r, TopicRecord))
            return pb.TopicDescription(name=request.name, kind=topic_record.kind,
                                       configs=topic_record.config.to_kafka_names(),
                                       replication_factor=replication_factor,
                                       key_columns=list(topic_record.key_columns))
        created = self.controller.create_topic(
            request.name, partitions=partitions, replication_factor=replication_factor,
            config=dict(request.configs), schema=schema, key_columns=list(request.key_columns),
            kind=request.kind or None)
        wanted = len(created.partitions) or partitions
        image = self._await(lambda img: (t := img.topics.get(request.name)) is not None
                            and t.topic_id == created.topic_id and len(t.partitions) >= wanted)
        topic = image.topics.get(request.name)
        if topic is None or topic.topic_id != created.topic_id:
            # committed, but this broker's image is still behind after wait_s: the controller's
            # own answer describes it (answering "unknown topic" made clients retry a create
            # that had succeeded, and the retry find the topic existing)
            topic = created
        return self.builder.describe(topic)

    def delete_topic(self, request: pb.DeleteTopicRequest) -> pb.DeleteTopicResponse:
        if request.name in COORDINATOR_TOPICS:
            raise InvalidTopicError(f"{request.name} is internal: it holds coordinator state and cannot be deleted")
        self.controller.delete_topic(request.name)
        self._await(lambda img: request.name not in img.topics)
        return pb.DeleteTopicResponse()

    def describe_topic(self, request: pb.DescribeTopicRequest) -> pb.TopicDescription:
        return self._described(request.name, self.image())

    def list_topics(self, request: pb.ListTopicsRequest) -> pb.ListTopicsResponse:
        return pb.ListTopicsResponse(names=sorted(self.image().topics))

    def alter_configs(self, request: pb.AlterConfigsRequest) -> pb.TopicDescription:
        if request.validate_only:  # the controller's own checks, against this broker's image; nothing proposed
            image = self.image()
            _, config = alter_config_records(image, request.topic, set=dict(request.set), delete=list(request.delete),
                                             defaults=self.topic_config)
            return self.builder.describe(dataclasses.replace(image.topics[request.topic], config=config))
        configs = self.controller.alter_configs(request.topic, set=dict(request.set), delete=list(request.delete))
        image = self._await(lambda img: (t := img.topics.get(request.topic)) is not None
                            and t.config.to_kafka_names() == configs)
        return self._described(request.topic, image)

    def register_schema(self, request: pb.RegisterSchemaRequest) -> pb.RegisterSchemaResponse:
        try:
            schema = schema_from_bytes(request.arrow_schema)
        except Exception as exc:  # noqa: BLE001 - bad input
            raise InvalidSchemaError(f"arrow_schema is not an Arrow IPC schema: {exc}") from None
        schema_id = self.controller.register_schema(request.topic, schema)
        self._await(lambda img: (t := img.topics.get(request.topic)) is not None
                    and t.schema_by_id(schema_id) is not None)
        return pb.RegisterSchemaResponse(schema_id=schema_id)
