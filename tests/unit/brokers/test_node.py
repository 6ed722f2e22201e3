"""Node: role/voter validation at construction, and a single-node quorum in-process."""
from __future__ import annotations

from pathlib import Path

import pytest

from brokers.node import Node
from spark_log.config import BrokerConfig, RaftConfig
from spark_log.errors import InvalidConfigError
from tests.support.wait import wait_until


def test_a_controller_must_be_a_voter() -> None:
    config = BrokerConfig(broker_id=4, controller_quorum_voters=("1@127.0.0.1:9001",))
    with pytest.raises(InvalidConfigError, match="not in controller_quorum_voters"):
        Node(config)


def test_a_broker_only_node_needs_other_voters() -> None:
    with pytest.raises(InvalidConfigError, match="broker-only"):
        Node(BrokerConfig(broker_id=1, process_roles=("broker",)))
    with pytest.raises(InvalidConfigError, match="broker-only"):
        Node(BrokerConfig(broker_id=1, process_roles=("broker",), controller_quorum_voters=("1@127.0.0.1:9001",)))


def test_single_node_quorum_serves_and_stops_cleanly(tmp_path: Path) -> None:
    config = BrokerConfig(
        broker_id=1, data_dir=str(tmp_path / "n1"), process_roles=("controller",),
        raft=RaftConfig(tick_ms=10, election_ticks=5, fetch_wait_ticks=2),
    )
    node = Node(config)
    registrar_calls: list[Node] = []
    stopped: list[bool] = []

    def registrar(n: Node):  # type: ignore[no-untyped-def]
        assert n.server is not None and n.metadata is not None and n.controller_client is not None
        registrar_calls.append(n)
        return lambda: stopped.append(True)

    node.add_service_registrar(registrar)
    node.start()
    try:
        assert registrar_calls == [node]
        assert int((tmp_path / "n1" / "broker.port").read_text()) == node.port
        assert node.voters == {1: node.address}
        assert node.controller is not None
        wait_until(lambda: node.controller is not None and node.controller.is_active, timeout=20,
                   message="a single voter did not become the active controller")
        assert node.controller_client is not None
        node.controller_client.register_broker(broker_id=7, incarnation="x", address="127.0.0.1:7777")
        assert 7 in node.metadata.image.brokers
    finally:
        node.stop()
    assert stopped == [True]
    assert not (tmp_path / "n1" / "broker.port").exists()


def test_the_broker_part_never_imports_the_node() -> None:
    """The node takes the broker part as an explicit registrar (``python -m brokers.node``
    passes ``brokers.server.register``); the broker part sees the node only as a
    ``BrokerHost``, so the import goes one way."""
    import ast

    root = Path(__file__).resolve().parents[3] / "brokers"
    offenders = []
    for package in ("server", "replica", "partition", "log"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                offenders += [f"{path.name}: {name}" for name in names if name == "brokers.node"]
    assert not offenders
