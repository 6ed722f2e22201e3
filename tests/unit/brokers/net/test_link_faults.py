"""The link fault hook: ``isolated``/``cut`` cut every node-to-node path, both ways, read
from one file by every process; off (None at every call site) without the variable."""
from __future__ import annotations

import json
import os

import pytest

from brokers.controller.client import ControllerClient
from brokers.net import faults
from brokers.net.faults import ENV_VAR, FaultSpec, FetchFaults
from spark_log.errors import BrokerNotAvailableError
from spark_log.proto import controller_pb2 as pb
from tests.support.ports import free_ports


@pytest.fixture(autouse=True)
def fresh_process_links(monkeypatch):
    monkeypatch.setattr(faults, "_process_links", None)
    monkeypatch.setattr(faults.FaultFile, "_shared", {})


def write(path, spec) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(spec))
    os.replace(tmp, path)


def test_off_without_the_variable(monkeypatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert faults.link_filter(1) is None and faults.process_links() is None
    assert ControllerClient({1: "127.0.0.1:1"})._links is None


def test_isolated_and_cut_links_are_symmetric() -> None:
    spec = FaultSpec.parse(json.dumps({"2": {"isolated": True}, "4": {"cut": [1]}, "3": {"blocked": [1]}}))
    assert spec.link_cut(2, 1) and spec.link_cut(1, 2) and spec.link_cut(3, 2)
    assert not spec.link_cut(2, 2)
    assert spec.link_cut(4, 1) and spec.link_cut(1, 4) and not spec.link_cut(4, 3)
    assert not spec.link_cut(3, 1)  # "blocked" is the replica fetch path only
    assert spec.fetch_blocked(3, 1) and not spec.fetch_blocked(1, 3)
    assert spec.fetch_blocked(1, 2) and spec.fetch_blocked(2, 3)


def test_fetch_faults_see_isolation_of_either_end(tmp_path, monkeypatch) -> None:
    path = tmp_path / "faults.json"
    monkeypatch.setenv(ENV_VAR, str(path))
    one, two = FetchFaults.from_env(1), FetchFaults.from_env(2)
    write(path, {"2": {"isolated": True}})
    one.refresh(), two.refresh()
    assert one.blocked(2) and two.blocked(1) and not one.blocked(3)
    write(path, {})
    one.refresh(), two.refresh()
    assert not one.blocked(2) and not two.blocked(1)


def test_raft_filter_and_controller_client_follow_the_file(tmp_path, monkeypatch) -> None:
    path = tmp_path / "faults.json"
    write(path, {})
    monkeypatch.setenv(ENV_VAR, str(path))
    allowed = faults.link_filter(2)  # binds node 2 as this process's node
    assert allowed is not None and allowed(2, 1) and allowed(1, 2)
    one, two = (f"127.0.0.1:{p}" for p in free_ports(2))  # nobody listens there
    client = ControllerClient({1: one, 2: two}, timeout_s=0.3)
    write(path, {"2": {"isolated": True}})
    assert not allowed(2, 1) and not allowed(1, 2) and allowed(1, 3)
    with pytest.raises(BrokerNotAvailableError, match="cut"):
        client._once(one, "DescribeCluster", pb.DescribeClusterRequest(), 0.5)
    # the node's own voter is never cut: the call goes out (and finds nobody listening)
    with pytest.raises(BrokerNotAvailableError) as info:
        client._once(two, "DescribeCluster", pb.DescribeClusterRequest(), 0.5)
    assert "cut" not in str(info.value)
    write(path, {})
    assert allowed(2, 1)
    client.close()


def test_two_nodes_in_one_process_disable_controller_filtering(tmp_path, monkeypatch) -> None:
    path = tmp_path / "faults.json"
    write(path, {"2": {"isolated": True}})
    monkeypatch.setenv(ENV_VAR, str(path))
    faults.link_filter(2)
    links = faults.process_links()
    assert links is not None and links.cut_to(1)
    faults.link_filter(3)
    assert not links.cut_to(1)


def test_a_malformed_file_means_no_faults(tmp_path) -> None:
    with pytest.raises(TypeError):
        FaultSpec.parse(json.dumps({"2": {"isolated": "yes"}}))
    path = tmp_path / "faults.json"
    write(path, {"2": {"isolated": "yes"}})
    spec = faults.FaultFile(path).spec()
    assert not spec.link_cut(1, 2) and not spec.isolated
