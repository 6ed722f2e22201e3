"""Typed configs: defaults, validation naming the key, Kafka names, TOML files."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from spark_log.config import BrokerConfig, RaftConfig, TopicConfig, from_mapping, load_toml
from spark_log.errors import InvalidConfigError

CONF = Path(__file__).resolve().parents[3] / "conf"


def test_configs_are_frozen_and_keyword_only() -> None:
    config = TopicConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.retention_ms = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        TopicConfig(1)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"segment.bytes": "12"}, "segment.bytes"),
        ({"retention.ms": -5}, "retention.ms"),
        ({"cleanup.policy": "shred"}, "cleanup.policy"),
        ({"min.insync.replicas": "zero"}, "min_insync_replicas"),
        ({"unclean.leader.election.enable": "maybe"}, "unclean_leader_election_enable"),
        ({"no.such.key": 1}, "no.such.key"),
    ],
)
def test_bad_topic_configs_name_the_key(overrides: dict[str, object], key: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        TopicConfig().with_overrides(overrides)


def test_kafka_dotted_names_and_strings_are_accepted() -> None:
    config = TopicConfig().with_overrides(
        {"retention.ms": "60000", "cleanup.policy": "compact", "unclean.leader.election.enable": "true"}
    )
    assert config.retention_ms == 60000
    assert config.cleanup_policy == "compact"
    assert config.unclean_leader_election_enable is True
    assert config.to_kafka_names()["retention.ms"] == "60000"


def test_broker_config_validates_voters_and_timeouts() -> None:
    with pytest.raises(InvalidConfigError, match="controller_quorum_voters"):
        BrokerConfig(broker_id=1, controller_quorum_voters=("1@nohost",))
    with pytest.raises(InvalidConfigError, match="session_timeout_ms"):
        BrokerConfig(broker_id=1, heartbeat_interval_ms=500, session_timeout_ms=100)
    with pytest.raises(InvalidConfigError, match="replica_fetch_wait_max_ms"):
        BrokerConfig(broker_id=1, replica_lag_time_max_ms=1000, replica_fetch_wait_max_ms=1000)
    config = BrokerConfig(broker_id=1, controller_quorum_voters=("1@127.0.0.1:9001", "2@127.0.0.1:9002"))
    assert config.voters() == {1: "127.0.0.1:9001", 2: "127.0.0.1:9002"}


def test_raft_config_needs_election_longer_than_heartbeat() -> None:
    with pytest.raises(InvalidConfigError, match="election_ticks"):
        RaftConfig(election_ticks=2, heartbeat_ticks=2)


def test_nested_tables_and_unknown_nested_keys() -> None:
    config = from_mapping(BrokerConfig, {"broker_id": 3, "raft": {"tick_ms": 10}, "topic_defaults": {"retention_ms": 5}})
    assert config.raft.tick_ms == 10 and config.topic_defaults.retention_ms == 5
    with pytest.raises(InvalidConfigError, match="bogus"):
        from_mapping(BrokerConfig, {"broker_id": 3, "raft": {"bogus": 1}})


def test_missing_required_key_is_clear() -> None:
    with pytest.raises(InvalidConfigError, match="broker_id"):
        from_mapping(BrokerConfig, {})


@pytest.mark.parametrize("name", sorted(p.name for p in CONF.glob("*.toml")))
def test_shipped_conf_files_load(name: str) -> None:
    if name.startswith("broker"):
        config = load_toml(BrokerConfig, CONF / name)
        assert isinstance(config, BrokerConfig)
    elif name.startswith("topic"):
        assert isinstance(load_toml(TopicConfig, CONF / name), TopicConfig)


def test_the_documented_topic_settings_are_every_setting_at_its_default() -> None:
    """conf/topic-defaults.toml and broker.toml's [topic_defaults] document the topic settings:
    each names every TopicConfig field, at the value the code defaults to."""
    import tomllib

    fields = {f.name for f in dataclasses.fields(TopicConfig)}
    with open(CONF / "topic-defaults.toml", "rb") as handle:
        documented = tomllib.load(handle)
    with open(CONF / "broker.toml", "rb") as handle:
        in_broker = tomllib.load(handle)["topic_defaults"]
    for table in (documented, in_broker):
        assert set(table) == fields, sorted(fields ^ set(table))
    assert load_toml(TopicConfig, CONF / "topic-defaults.toml") == TopicConfig()
    assert load_toml(BrokerConfig, CONF / "broker.toml").topic_defaults == TopicConfig()


def test_broker_toml_documents_every_broker_setting_at_its_default() -> None:
    import tomllib

    text = (CONF / "broker.toml").read_text()
    table = tomllib.loads(text)
    for cls, keys in ((BrokerConfig, table), (RaftConfig, table["raft"])):
        missing = {f.name for f in dataclasses.fields(cls)} - set(keys)
        # a table setting with no default entries is documented by a commented example
        assert all(f"[{name}]" in text for name in missing), sorted(missing)
    shipped = load_toml(BrokerConfig, CONF / "broker.toml")
    assert dataclasses.replace(shipped, broker_id=0, data_dir=BrokerConfig(broker_id=0).data_dir) == \
        BrokerConfig(broker_id=0)


def test_toml_errors_are_typed(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("broker_id = = 1\n")
    with pytest.raises(InvalidConfigError, match="not valid TOML"):
        load_toml(BrokerConfig, bad)
    with pytest.raises(InvalidConfigError, match="cannot read"):
        load_toml(BrokerConfig, tmp_path / "missing.toml")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("broker_id = 1\nlisteners = 'x'\n")
    with pytest.raises(InvalidConfigError, match="listeners"):
        load_toml(BrokerConfig, unknown)


def test_raft_fetch_wait_is_at_least_a_tick_and_under_half_the_election_timeout() -> None:
    assert RaftConfig().fetch_wait_ticks == 5  # Kafka's 500 ms fetch max wait is 10 of these 50 ms ticks
    for bad in (0, 10):  # 2 x 10 ticks is the whole 20-tick election timeout
        with pytest.raises(InvalidConfigError, match="fetch_wait_ticks"):
            RaftConfig(fetch_wait_ticks=bad)
    assert RaftConfig(fetch_wait_ticks=9).fetch_wait_ticks == 9
