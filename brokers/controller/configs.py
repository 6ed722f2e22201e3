"""Alter a topic's configs (pure validation).

``alter_config_records(image, topic, set=..., delete=..., defaults=...)``: keys in ``set``
take the given values, keys in ``delete`` return to the controller's default; dotted
(Kafka) and snake_case keys are both accepted.  ``UnknownTopicOrPartitionError`` for an
unknown topic, ``InvalidConfigError`` for an unknown key or a bad value, or compaction
settings the topic cannot honour (``spark_log.compaction.check_settings``; nothing
changes), or ``remote.storage.enable`` turned off on a tiered topic (not supported).  Returns ``([ConfigRecord], new_config)``, or ``([], config)`` if unchanged.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from brokers.metadata.image import MetadataImage
from brokers.metadata.records import ConfigRecord, MetadataRecord
from spark_log.compaction import check_settings as check_compaction_settings
from spark_log.config import TopicConfig, to_mapping
from spark_log.errors import InvalidConfigError, UnknownTopicOrPartitionError

__all__ = ["alter_config_records"]


def alter_config_records(
    image: MetadataImage,
    topic: str,
    *,
    set: Mapping[str, Any] | None = None,  # noqa: A002 - Kafka's word
    delete: Sequence[str] = (),
    defaults: TopicConfig = TopicConfig(),
) -> tuple[list[MetadataRecord], TopicConfig]:
    current = image.topics.get(topic)
    if current is None:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
    overlap = {k.replace(".", "_") for k in (set or {})} & {k.replace(".", "_") for k in delete}
    if overlap:
        raise InvalidConfigError(f"configs {sorted(overlap)} are both set and deleted", key=sorted(overlap)[0])
    default_values = to_mapping(defaults)
    reverted: dict[str, Any] = {}
    for key in delete:
        name = key.replace(".", "_").replace("-", "_")
        if name not in default_values:
            raise InvalidConfigError(f"unknown config key '{key}'", key=key)
        reverted[name] = default_values[name]
    config = current.config.with_overrides({**reverted, **dict(set or {})})
    check_compaction_settings(kind=current.kind, key_columns=current.key_columns, schema=current.schema, config=config)
    if current.config.remote_storage_enable and not config.remote_storage_enable:
        raise InvalidConfigError(
            f"topic {topic!r} is tiered: turning remote.storage.enable off is not supported (its history lives in "
            f"the Delta tier, which the brokers would no longer read); delete the topic instead",
            key="remote.storage.enable")
    if config == current.config:
        return [], config
    return [ConfigRecord(topic=topic, config=config)], config
