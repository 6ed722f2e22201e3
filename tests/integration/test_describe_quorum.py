"""DescribeQuorum (``Admin.describe_quorum``, ``spark-log cluster quorum``) on real node
processes: three broker+controller voters and one broker-only observer on 127.0.0.1.

One cluster for the module; the tests run in file order and the last one kills the leader
(kill -9) and restarts it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import grpc
import pytest

from spark_log import Admin, QuorumDescription, errors
from spark_log.cli import main as cli
from spark_log.proto import quorum_pb2 as pb
from spark_log.proto import quorum_pb2_grpc as pb_grpc
from tests.support.node_cluster import NodeCluster
from tests.support.wait import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OBSERVER = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    root: Path = tmp_path_factory.mktemp("describe-quorum")
    with NodeCluster(root, size=3) as nodes:
        nodes.add_observer(OBSERVER)
        every = [*nodes.ids, OBSERVER]
        for i in every:
            nodes.start(i, wait=False)
        for i in every:
            wait_until(lambda: (nodes.data_dir(i) / "broker.port").exists(), timeout=120,
                       message=lambda: f"node {i} did not start:\n{nodes.log_tail(i)}")
        yield nodes


def _admin(cluster: NodeCluster, *nodes: int) -> Admin:
    return Admin(",".join(cluster.addresses[i] for i in nodes), request_timeout_ms=20_000)


def _epoch(cluster: NodeCluster, leader: int) -> int:
    return cluster.client.describe_cluster(cluster.addresses[leader]).controller_epoch


def _settled(admin: Admin, leader: int | None) -> QuorumDescription | None:
    """The description once ``leader`` (None: any node) leads and every voter and the
    observer fetched up to the leader's log end (lag 0): the idle quorum converged."""
    d = admin.describe_quorum()
    caught_up = (leader in (None, d.leader_id) and len(d.voters) == 3 and [o.node_id for o in d.observers] == [OBSERVER]
                 and all(r.lag == 0 for r in d.replicas))
    return d if caught_up else None


def test_names_the_leader_and_epoch_and_lags_converge(cluster: NodeCluster) -> None:
    leader = cluster.wait_for_active_controller()
    with _admin(cluster, OBSERVER) as admin:  # the observer forwards to the leader
        d = wait_until(lambda: _settled(admin, leader), timeout=30, interval=0.1,
                       message=lambda: f"the quorum did not settle: {admin.describe_quorum()}")
    assert d.leader_epoch == _epoch(cluster, leader) >= 1
    assert d.leader_address == cluster.addresses[leader]
    assert [v.node_id for v in d.voters][0] == leader and sorted(v.node_id for v in d.voters) == cluster.ids
    assert [(v.node_id, v.role) for v in d.voters] == [(leader, "leader")] + [
        (i, "follower") for i in cluster.ids if i != leader]
    (observer,) = d.observers
    assert (observer.node_id, observer.role) == (OBSERVER, "observer")
    leader_row = d.voters[0]
    assert leader_row.log_end_offset is not None and d.high_watermark <= leader_row.log_end_offset
    assert all(r.log_end_offset == leader_row.log_end_offset for r in d.replicas)
    assert all(r.last_fetch_timestamp_ms is not None and r.last_caught_up_timestamp_ms is not None
               for r in d.replicas)
    assert d.max_lag == 0


def test_every_node_answers_with_the_leaders_view(cluster: NodeCluster) -> None:
    leader = cluster.wait_for_active_controller()
    for node in cluster.ids:
        with _admin(cluster, node) as admin:
            d = admin.describe_quorum()
        assert (d.leader_id, d.leader_epoch) == (leader, _epoch(cluster, leader)), node


def test_the_controller_service_is_for_the_leader_only(cluster: NodeCluster) -> None:
    """QuorumController on a follower voter refuses with NOT_CONTROLLER naming the leader;
    the observer does not serve it at all (it has no voter state to describe)."""
    leader = cluster.wait_for_active_controller()
    follower = next(i for i in cluster.ids if i != leader)
    with grpc.insecure_channel(cluster.addresses[follower]) as channel:
        with pytest.raises(grpc.RpcError) as info:
            pb_grpc.QuorumControllerStub(channel).DescribeQuorum(pb.DescribeQuorumRequest(), timeout=5)
    error = errors.from_rpc_error(info.value)
    assert isinstance(error, errors.NotControllerError) and error.leader_address == cluster.addresses[leader]
    with grpc.insecure_channel(cluster.addresses[OBSERVER]) as channel:
        with pytest.raises(grpc.RpcError) as unimplemented:
            pb_grpc.QuorumControllerStub(channel).DescribeQuorum(pb.DescribeQuorumRequest(), timeout=5)
    assert unimplemented.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_cli_status_replication_and_json(cluster: NodeCluster, capsys: pytest.CaptureFixture[str]) -> None:
    leader = cluster.wait_for_active_controller()
    bootstrap = cluster.addresses[OBSERVER]
    assert cli(["--bootstrap", bootstrap, "cluster", "quorum"]) == 0
    status = dict(line.split(":", 1) for line in capsys.readouterr().out.splitlines())
    assert status["LeaderId"].strip() == str(leader)
    assert status["LeaderEpoch"].strip() == str(_epoch(cluster, leader))
    assert status["CurrentObservers"].strip() == f"[{OBSERVER}]"
    assert status["CurrentVoters"].strip() == "[" + ",".join(map(str, cluster.ids)) + "]"
    assert status["HighWatermark"].strip().isdigit() and status["MaxFollowerLag"].strip().isdigit()

    assert cli(["--bootstrap", bootstrap, "cluster", "quorum", "--replication"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["NodeId", "LogEndOffset", "Lag", "LastFetch", "LastCaughtUp", "Status"]
    roles = {int(r.split()[0]): r.split()[-1] for r in rows}
    assert roles == {**{i: "Follower" for i in cluster.ids if i != leader}, leader: "Leader", OBSERVER: "Observer"}

    assert cli(["--bootstrap", bootstrap, "cluster", "quorum", "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["leader_id"] == leader and [o["node_id"] for o in described["observers"]] == [OBSERVER]

    # bad input: the two views at once are refused by the parser (exit code 2), nothing asked
    with pytest.raises(SystemExit) as refused:
        cli(["--bootstrap", bootstrap, "cluster", "quorum", "--status", "--replication"])
    assert refused.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_a_new_leader_with_a_higher_epoch_after_kill_9(cluster: NodeCluster) -> None:
    old = cluster.wait_for_active_controller()
    old_epoch = _epoch(cluster, old)
    cluster.kill(old)
    survivors = [i for i in cluster.ids if i != old]
    with _admin(cluster, *survivors, OBSERVER) as admin:
        def new_leader() -> QuorumDescription | None:
            try:
                d = admin.describe_quorum()
            except errors.SparkLogError:
                return None  # between leaders
            return d if d.leader_id != old and d.leader_epoch > old_epoch else None

        d = wait_until(new_leader, timeout=30, interval=0.05, message="no new leader in a higher epoch")
        assert d.leader_id in survivors
        assert d.leader_epoch == _epoch(cluster, d.leader_id)
        dead = next(v for v in d.voters if v.node_id == old)
        assert dead.role == "follower" and dead.log_end_offset is None and dead.lag is None  # no fetch this epoch

        cluster.start(old)  # it returns as a follower and catches up
        d2 = wait_until(lambda: _settled(admin, None), timeout=60, interval=0.1,
                        message=lambda: f"the restarted voter did not catch up: {admin.describe_quorum()}")
        assert d2.leader_epoch >= d.leader_epoch and d2.leader_epoch == _epoch(cluster, d2.leader_id)
        assert next(v for v in d2.voters if v.node_id == old).log_end_offset == d2.voters[0].log_end_offset
