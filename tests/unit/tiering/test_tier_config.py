"""Tiering settings (issue 15): Kafka's names, validation naming the key, the refusals."""
from __future__ import annotations

from pathlib import Path

import pytest

from brokers.controller.configs import alter_config_records
from brokers.metadata.image import MetadataImage, TopicImage
from spark_log.compaction import check_settings
from spark_log.config import BrokerConfig, TopicConfig, load_toml
from spark_log.errors import InvalidConfigError
from spark_log.tier import bounded_options, table_path


def test_kafka_names_and_effective_local_retention() -> None:
    config = TopicConfig().with_overrides({"remote.storage.enable": "true", "retention.ms": "100000",
                                           "local.retention.ms": "5000", "local.retention.bytes": "1024"})
    assert config.remote_storage_enable is True
    assert config.effective_local_retention_ms == 5000
    assert config.effective_local_retention_bytes == 1024
    names = config.to_kafka_names()
    assert names["remote.storage.enable"] == "true" and names["local.retention.ms"] == "5000"
    default = TopicConfig(remote_storage_enable=True, retention_ms=7000, retention_bytes=-1)
    assert default.effective_local_retention_ms == 7000  # -2: as retention.ms
    assert default.effective_local_retention_bytes == -1


@pytest.mark.parametrize(("overrides", "key"), [
    ({"local.retention.ms": "1000"}, "local.retention.ms"),            # not tiered
    ({"local.retention.bytes": "10"}, "local.retention.bytes"),         # not tiered
    ({"remote.storage.enable": "maybe"}, "remote_storage_enable"),
    ({"remote.storage.enable": "true", "local.retention.ms": "-3"}, "local.retention.ms"),
    ({"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "2000"}, "local.retention.ms"),
    ({"remote.storage.enable": "true", "retention.bytes": "1000", "local.retention.bytes": "-1"},
     "local.retention.bytes"),
])
def test_bad_tier_settings_name_the_key(overrides: dict[str, str], key: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        TopicConfig().with_overrides(overrides)


def test_tier_location_default_and_refusals(tmp_path: Path) -> None:
    config = BrokerConfig(broker_id=1, data_dir=str(tmp_path / "node-1"))
    assert config.resolved_tier_location() == str(tmp_path / "tier")
    assert BrokerConfig(broker_id=1, tier_location=f"file://{tmp_path}/t").resolved_tier_location() == str(tmp_path / "t")
    with pytest.raises(InvalidConfigError, match="tier_location"):
        BrokerConfig(broker_id=1, tier_location="gs://bucket/tier")
    with pytest.raises(InvalidConfigError, match="tier_location"):
        BrokerConfig(broker_id=1, tier_location="s3:///no-bucket")
    with pytest.raises(InvalidConfigError, match="tier_storage_options"):
        BrokerConfig(broker_id=1, tier_location="/mnt/tier", tier_storage_options={"aws_region": "x"})


def test_object_store_tier_location_and_its_options(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text('broker_id = 1\ntier_location = "s3a://bucket/prefix/"\n'
                    '[tier_storage_options]\naws_endpoint_url = "http://127.0.0.1:9000"\naws_allow_http = true\n'
                    'aws_secret_access_key = "s3cr3t"\n')
    config = load_toml(BrokerConfig, toml)
    assert config.resolved_tier_location() == "s3://bucket/prefix"
    assert config.tier_storage_options == {"aws_endpoint_url": "http://127.0.0.1:9000", "aws_allow_http": "true",
                                           "aws_secret_access_key": "s3cr3t"}
    assert "s3cr3t" not in repr(config)
    options = bounded_options(config.resolved_tier_location(), config.tier_storage_options)
    assert options is not None and options["timeout"] and options["max_retries"] and options["aws_allow_http"] == "true"
    assert bounded_options("/mnt/tier", None) is None
    assert table_path("s3://bucket/prefix/", "t") == "s3://bucket/prefix/t"
    toml.write_text('broker_id = 1\ntier_location = "s3://b/p"\ntier_storage_options = "x"\n')
    with pytest.raises(InvalidConfigError, match="tier_storage_options"):
        load_toml(BrokerConfig, toml)


def _image(config: TopicConfig) -> MetadataImage:
    topic = TopicImage(name="t", topic_id="id", kind="bytes", key_columns=(), config=config, partitions={}, schemas=())
    return MetadataImage(topics={"t": topic})


def test_alter_turns_tiering_on_and_refuses_turning_it_off() -> None:
    records, config = alter_config_records(_image(TopicConfig()), "t", set={"remote.storage.enable": "true",
                                                                           "local.retention.ms": "0"})
    assert records and config.remote_storage_enable and config.local_retention_ms == 0
    with pytest.raises(InvalidConfigError, match="remote.storage.enable"):
        alter_config_records(_image(config), "t", set={"remote.storage.enable": "false"})
    with pytest.raises(InvalidConfigError, match="remote.storage.enable"):
        alter_config_records(_image(config), "t", delete=["remote.storage.enable"])


@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete,compact"])
def test_a_tiered_topic_cannot_be_compacted(policy: str) -> None:
    """The Delta tier is never compacted: a key tombstoned and compacted away on the brokers
    would come back from it, so the combination is refused at create and at alter, either
    way round (Kafka's ``LogConfig.validateNoRemoteStorageForCompactedTopic``)."""
    # the refusal is the controller's, at create and alter (check_settings): a config stored before it still loads
    stored = TopicConfig().with_overrides({"remote.storage.enable": "true", "cleanup.policy": policy})
    with pytest.raises(InvalidConfigError, match=r"cannot be compacted") as refused:
        check_settings(kind="bytes", key_columns=(), schema=None, config=stored)
    assert refused.value.details.get("key") == "remote.storage.enable"
    tiered = TopicConfig(remote_storage_enable=True)
    with pytest.raises(InvalidConfigError, match="cannot be compacted"):
        alter_config_records(_image(tiered), "t", set={"cleanup.policy": policy})
    with pytest.raises(InvalidConfigError, match="cannot be compacted"):
        alter_config_records(_image(TopicConfig(cleanup_policy=policy)), "t", set={"remote.storage.enable": "true"})
    assert TopicConfig(cleanup_policy=policy).compact            # untiered: compaction as before
