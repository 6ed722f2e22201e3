"""Seeded simulation stories for the Raft core (Kafka's RaftEventSimulationTest style).

Each test runs one short scenario per seed: faults for a while, then heal and demand
liveness.  Invariants (``invariants.py``: election safety, epoch/vote monotonicity and
durability, HW monotonicity and majority durability, log matching, leader completeness,
state-machine safety) are checked after every event.  A failure message starts with the
seed and the command that replays it.  ``--sim-seeds N`` widens the sweep.
"""
from __future__ import annotations

import pytest

from spark_log.config import RaftConfig

from .cluster import SimSettings
from .nemesis import Scenario, run_scenario

_FAST = dict(tick_ms=10, election_ticks=5, heartbeat_ticks=1, fetch_wait_ticks=1, fetch_max_entries=8)


@pytest.mark.sim_seeds(250)
def test_mixed_faults(seed: int, replay: str) -> None:
    """Raft paper 5.2-5.4 and KIP-595 under every nemesis: partitions (VOPR's three modes),
    asymmetric cuts, clogged links, leader isolation, crash/restart losing unflushed
    entries, observer wipes, drops, duplicates, reordering; snapshots and snapshot fetch
    (KIP-630) included.  After healing, a new proposal commits."""
    result = run_scenario(seed, Scenario(settings=SimSettings(voters=3, observers=1, snapshot_every=6)), replay)
    assert result.invariants.checks > 0


@pytest.mark.sim_seeds(125)
def test_crash_restart_with_slow_disks(seed: int, replay: str) -> None:
    """Paper figure 2 "persistent state" and 5.1: crashes land while Readies wait on a slow
    disk, so votes, epochs and entries that were never flushed are lost; what was
    acknowledged (sent after a flush) must survive.  Frequent snapshots make restarted
    nodes fetch them (KIP-630)."""
    scenario = Scenario(settings=SimSettings(voters=3, observers=1, snapshot_every=3, disk_delay_ms=(0, 12),
                                             tear_rate=0.5),
                        faults=("crash", "crash", "crash", "heal", "partition"), fault_every_ms=(10, 40))
    run_scenario(seed, scenario, replay)


@pytest.mark.sim_seeds(40)
def test_five_voters_partitions(seed: int, replay: str) -> None:
    """Paper 5.2 with 5 voters: minority partitions never elect, majorities do (KIP-595
    "Leader election"); log matching holds across several leader changes (5.3)."""
    scenario = Scenario(settings=SimSettings(voters=5, observers=0, snapshot_every=0),
                        faults=("partition", "asymmetric", "isolate_leader", "heal", "crash"))
    run_scenario(seed, scenario, replay)


@pytest.mark.sim_seeds(50)
def test_staggered_starts_five_voters(seed: int, replay: str) -> None:
    """Processes start at different times (a slow host), so early epochs leave short,
    uncommitted logs from different leaders on different nodes; later leaders must make
    every follower truncate to a common prefix (KIP-595 DivergingEpoch: the follower stops
    at min(hint, its own end for the hint's epoch)) and every node must catch up."""
    scenario = Scenario(settings=SimSettings(voters=5, observers=0), start_spread_ms=300,
                        faults=("crash", "partition", "heal"))
    run_scenario(seed, scenario, replay)


@pytest.mark.sim_seeds(100)
def test_without_pre_vote_or_check_quorum(seed: int, replay: str) -> None:
    """Plain Raft (paper 5.2, no thesis 9.6 pre-vote, no check-quorum): safety must not
    depend on the optimisations; candidates go straight to epoch + 1."""
    raft = RaftConfig(**_FAST, pre_vote=False, check_quorum=False)
    scenario = Scenario(settings=SimSettings(voters=3, observers=1, raft=raft, snapshot_every=4))
    run_scenario(seed, scenario, replay)


@pytest.mark.sim_seeds(75)
def test_lossy_duplicating_network(seed: int, replay: str) -> None:
    """KIP-595 Fetch under loss, duplication and reordering only: stale and duplicate fetch
    responses are discarded by the echoed (offset, epoch); the leader keeps committing."""
    scenario = Scenario(settings=SimSettings(voters=3, observers=1, snapshot_every=8), faults=(),
                        drop_rate=(0.1, 0.3), duplicate_rate=(0.1, 0.3), delay_ms=(1, 15))
    result = run_scenario(seed, scenario, replay)
    assert result.invariants.committed, f"seed={seed}: nothing committed on a lossy network\n  replay: {replay}"


@pytest.mark.sim_seeds(75)
def test_isolated_leader_resigns_and_is_replaced(seed: int, replay: str) -> None:
    """KIP-595 "check quorum" / thesis 6.2: a leader cut off from every voter resigns
    within 1.5 election timeouts (plus a tick), and the majority elects a new leader in a higher
    epoch meanwhile; after healing the old leader follows (pre-vote keeps it from
    disrupting: thesis 9.6)."""
    from .cluster import SimCluster
    from .invariants import Invariants

    cluster = SimCluster(seed, SimSettings(voters=3, observers=1))
    invariants = Invariants(cluster, replay)
    cluster.start()
    elected = cluster.scheduler.run_until(2000, stop=lambda: bool(cluster.leaders()))
    assert elected, f"seed={seed}: no leader within 2s\n  replay: {replay}"
    old = cluster.leaders()[0]
    old_epoch = old.core.epoch if old.core else 0
    cluster.network.isolate(old.node_id, cluster.all_ids)
    election_ms = cluster.settings.raft.election_ticks * cluster.settings.raft.tick_ms
    now = cluster.clock.now_ms

    def replaced() -> bool:
        return any(n.core is not None and n.core.is_leader and n.core.epoch > old_epoch for n in cluster.nodes.values())

    resigned = cluster.scheduler.run_until(now + 2 * election_ms, stop=lambda: not (old.core and old.core.is_leader))
    assert resigned, f"seed={seed}: isolated leader {old.node_id} did not resign\n  replay: {replay}"
    assert cluster.scheduler.run_until(now + 10 * election_ms, stop=replaced), (
        f"seed={seed}: majority did not elect a new leader\n  replay: {replay}")
    cluster.network.heal()
    assert cluster.scheduler.run_until(
        cluster.clock.now_ms + 10 * election_ms,
        stop=lambda: old.core is not None and old.core.leader_id is not None and not old.core.is_leader
        and old.core.epoch > old_epoch,
    ), f"seed={seed}: old leader did not rejoin as follower\n  replay: {replay}"
    invariants.validate_end()
