"""The group coordinator's broker settings: validated by ``BrokerConfig``, mapped to
``GroupConfig``, documented in conf/broker.toml."""
from __future__ import annotations

from pathlib import Path

import pytest

from brokers.server.broker_server import group_config
from spark_log.config import BrokerConfig, load_toml
from spark_log.errors import InvalidConfigError

ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize("bad", [
    {"offsets_topic_num_partitions": 0},
    {"offsets_topic_replication_factor": 0},
    {"group_consumer_assignors": ("sticky",)},
    {"group_consumer_assignors": ()},
    {"group_consumer_assignors": ("range", "range")},
    {"group_consumer_min_session_timeout_ms": 5000, "group_consumer_max_session_timeout_ms": 4000},
    {"group_consumer_session_timeout_ms": 10},
    {"group_consumer_heartbeat_interval_ms": 0},
    {"offsets_commit_timeout_ms": 0},
])
def test_bad_group_settings_are_refused_naming_the_key(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        BrokerConfig(broker_id=1, **bad)  # type: ignore[arg-type]
    assert raised.value.details["key"] in bad


def test_settings_map_to_the_coordinator_and_the_shipped_file_loads() -> None:
    config = BrokerConfig(broker_id=1, group_consumer_assignors=("range", "uniform"), offset_metadata_max_bytes=9,
                          group_consumer_heartbeat_interval_ms=700)
    mapped = group_config(config)
    assert mapped.default_assignor == "range" and mapped.offset_metadata_max_bytes == 9
    assert mapped.heartbeat_interval_ms == 700
    shipped = load_toml(BrokerConfig, ROOT / "conf" / "broker.toml")
    assert shipped.offsets_topic_num_partitions == 8 and shipped.group_consumer_assignors == ("uniform", "range")
