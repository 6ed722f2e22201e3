"""``validate_only`` must refuse exactly what the real request refuses (Kafka's
CreateTopics/AlterConfigs validateOnly: the same checks, nothing applied).  The broker's
``AdminHandler`` checked a validate_only create or alter with a few local checks only, so
requests the controller refuses were answered as valid; it now runs the controller's own
checks against its image.  Adds about 1 s on the shared cluster."""
from __future__ import annotations

import pytest

from spark_log import Admin
from spark_log.errors import (
    InvalidConfigError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
)


def test_validate_only_create_refuses_an_existing_topic(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=1)
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topic(topic_name, partitions=1, replication_factor=1, validate_only=True)


def test_validate_only_create_refuses_an_illegal_name(bootstrap: str) -> None:
    with Admin(bootstrap) as admin:
        with pytest.raises(InvalidTopicError):
            admin.create_topic("no spaces allowed!", partitions=1, replication_factor=1)
        with pytest.raises(InvalidTopicError):
            admin.create_topic("no spaces allowed!", partitions=1, replication_factor=1, validate_only=True)


def test_validate_only_create_refuses_a_replication_factor_above_the_brokers(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topic(topic_name, partitions=1, replication_factor=7, validate_only=True)


def test_validate_only_alter_refuses_deleting_an_unknown_key(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, replication_factor=1)
        with pytest.raises(InvalidConfigError):
            admin.alter_configs(topic_name, delete=["no.such.key"])
        with pytest.raises(InvalidConfigError):
            admin.alter_configs(topic_name, delete=["no.such.key"], validate_only=True)


def test_validate_only_describes_what_the_create_would_make_and_creates_nothing(bootstrap: str, topic_name: str) -> None:
    with Admin(bootstrap) as admin:
        described = admin.create_topic(topic_name, partitions=2, replication_factor=1,
                                       config={"retention.ms": "1234"}, validate_only=True)
        assert described.config["retention.ms"] == "1234"
        assert topic_name not in admin.list_topics()
        created = admin.create_topic(topic_name, partitions=1, replication_factor=1)
        assert created.config["retention.ms"] != "1234"
        after = admin.alter_configs(topic_name, set={"retention.ms": "999"}, validate_only=True)
        assert after.config["retention.ms"] == "999"
        assert admin.describe_topic(topic_name).config["retention.ms"] != "999"
