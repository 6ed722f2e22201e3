"""kill -9 at each named point of a clean (``brokers/log/crash_points.py``), then recovery:
the log holds either its old segments or the cleaned ones, never a mix, never a lost record.

The crash-test harness of ``test_log_crash.py``: a subprocess (``python -m
tests.fault.test_compaction_crash DIR``) hosts a partition (the broker's ``Partition`` and
cleaner code, leader of a one-replica partition), writes a deterministic keyed history
over two segments, asks for a clean and runs it; ``SPARK_LOG_CLEANER_CRASH_AT`` makes it
SIGKILL itself at that point after noting the point in a marker file.  The test asserts
the process died by SIGKILL *at that point*, reopens the directory and checks the records:
exactly the history (old) or exactly the model of the plan in the log (new), per point;
then the reopened replica finishes the clean and holds the new records.

Run the writer by hand with ``python -m tests.fault.test_compaction_crash DIR``.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from brokers.log.append import check_frames
from brokers.log.cleaner.records import KeySpec
from brokers.log.cleaner.throttle import Throttler
from brokers.log.crash_points import POINTS
from brokers.partition import LeaderAndIsr, Partition
from spark_log.clock import ManualClock
from spark_log.config import TopicConfig
from spark_log.schemas import BYTES_SCHEMA
from tests.support.compaction import Record, collect, expected, keyed_frame, log_records

pytestmark = pytest.mark.fault

REPO = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000_000
SPEC = KeySpec("bytes", (), "", lambda schema_id: BYTES_SCHEMA if schema_id == 0 else None)
CONFIG = TopicConfig(segment_bytes=16 * 1024, cleanup_policy="compact", delete_retention_ms=1_000,
                     index_interval_bytes=1024, min_cleanable_dirty_ratio=1.0)
# what recovery leaves after a kill at each point: the old segments, or the cleaned ones
# (the history spans several groups: the first rename does not commit the clean yet)
AFTER = {"cleaned-written": "old", "swap-renamed": "old", "swaps-committed": "new", "old-deleted": "new",
         "swap-completed": "new", "before-checkpoint": "new"}


def history() -> list[tuple[list[bytes], list[bytes | None], int]]:
    """The writer's frames: (keys, values, timestamp); tombstones every so often."""
    frames = []
    for i in range(90):
        keys = [f"key-{(i * 5 + j) % 17}".encode() for j in range(4)]
        values: list[bytes | None] = [None if (i * 4 + j) % 13 == 0 else f"value {i}.{j} ".encode() * 6
                                      for j in range(4)]
        frames.append((keys, values, NOW + i))
    return frames


def open_partition(directory: Path, clock: ManualClock, epoch: int) -> Partition:
    partition = Partition(topic="t", partition=0, topic_id="t-id", directory=directory, config=CONFIG, broker_id=1,
                          clock=clock)
    partition.become(LeaderAndIsr(leader_id=1, leader_epoch=epoch, partition_epoch=epoch, replicas=(1,), isr=(1,)),
                     config=CONFIG)
    return partition


def clean(partition: Partition) -> list[str]:
    throttle = Throttler(0, clock=ManualClock(), wait=lambda s: False)
    done = []
    while (outcome := partition.clean(SPEC, throttle=throttle, budget_bytes=1 << 24, stop=lambda: False)) is not None:
        done.append(outcome)
    return done


def writer(directory: str) -> None:
    """Write the history, ask for a clean and run it (dies at the crash point, if one is set)."""
    clock = ManualClock(monotonic_ms=0, wall_ms=NOW + 10_000)
    partition = open_partition(Path(directory), clock, 1)
    for i, (keys, values, stamp) in enumerate(history()):
        frame = keyed_frame(keys, values, timestamp=stamp, producer_id=9, producer_epoch=0, base_sequence=4 * i)
        partition.append_as_leader(check_frames(frame, max_message_bytes=1 << 20))
    partition.request_compaction()
    print("\n".join(clean(partition)), flush=True)
    partition.close()


def written() -> list[Record]:
    return [Record(4 * i + j, k, v, stamp) for i, (keys, values, stamp) in enumerate(history())
            for j, (k, v) in enumerate(zip(keys, values))]


@pytest.mark.parametrize("point", POINTS)
def test_kill_at_each_point_of_a_clean_leaves_old_or_new_segments_never_a_mix(tmp_path: Path, point: str) -> None:
    marker = tmp_path / "reached"
    env = dict(os.environ, SPARK_LOG_CLEANER_CRASH_AT=point, SPARK_LOG_CLEANER_CRASH_MARKER=str(marker))
    proc = subprocess.run([sys.executable, "-m", "tests.fault.test_compaction_crash", str(tmp_path / "p")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, f"the cleaner was not killed at {point}: {proc.returncode}\n{proc.stderr}"
    assert marker.read_text().split() == [point], "the crash point was not the one reached"

    partition = open_partition(tmp_path / "p", ManualClock(monotonic_ms=0, wall_ms=NOW + 20_000), 2)
    try:
        plan = partition._cleaning.state.latest
        assert plan is not None, "the plan frame was appended before the clean began"
        old, new = written(), expected(written(), end=plan.plan.end_offset,
                                       tombstone_horizon_ms=plan.plan.tombstone_horizon_ms)
        assert len(new) < len(old) // 2 and plan.plan.end_offset > 0
        assert len(partition._log.segment_base_offsets) > 3  # several groups
        after = log_records(partition._log)
        assert after == (old if AFTER[point] == "old" else new), f"after a kill at {point}: a mix, or records lost"
        assert bool(partition._log.recovery.swaps) is (point != "before-checkpoint")
        assert not [p.name for p in (tmp_path / "p").iterdir() if p.name.endswith((".cleaned", ".swap"))]
        assert partition.compaction_status().applied_plan_offset == -1  # the checkpoint was never written
        assert any("applied" in line for line in clean(partition))  # the replica finishes the clean
        assert log_records(partition._log) == new
        assert partition.compaction_status().applied_plan_offset == plan.offset
    finally:
        partition.close()


if __name__ == "__main__":
    writer(sys.argv[1])


@pytest.mark.slow  # a broker start and a restart: about 15 s
def test_a_broker_killed_at_the_commit_point_completes_the_clean_when_it_restarts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same at the level of a whole broker process: it dies as its cleaner commits a
    clean (``swaps-committed``); restarted, it serves the cleaned records and finishes."""
    from spark_log import Admin, Consumer, Producer
    from tests.support.cluster import local_cluster
    from tests.support.wait import wait_until

    marker = tmp_path / "reached"
    monkeypatch.setenv("SPARK_LOG_CLEANER_CRASH_AT", "swaps-committed")
    monkeypatch.setenv("SPARK_LOG_CLEANER_CRASH_MARKER", str(marker))
    with local_cluster(tmp_path / "cluster", brokers=1, extra_config={"log_cleaner_backoff_ms": 200}) as cluster:
        sent: list[Record] = []
        with Admin(cluster.bootstrap) as admin:
            admin.create_topic("kv", config={"cleanup.policy": "compact", "segment.bytes": 4096,
                                             "min.cleanable.dirty.ratio": 1.0})
            with Producer(cluster.bootstrap) as producer:
                for i in range(601):
                    key, value = f"k{i % 30}".encode(), f"v{i}".encode()
                    _, offset = producer.send("kv", value, key=key).result(timeout=60)
                    sent.append(Record(offset, key, value, 0))
            admin.compact("kv")
        proc = cluster.procs[cluster.nodes[0].node_id]
        wait_until(lambda: proc.poll() is not None, timeout=60, message="the broker did not die at the crash point")
        assert proc.returncode == -signal.SIGKILL and marker.read_text().split() == ["swaps-committed"]
        monkeypatch.delenv("SPARK_LOG_CLEANER_CRASH_AT")
        cluster.up(timeout_s=90)
        with Admin(cluster.bootstrap) as admin:
            state = admin.wait_for_compaction("kv", timeout_s=90)[0][0]
        assert state.plan is not None and state.applied_plan_offset == state.plan.offset
        with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([("kv", 0)])
            consumer.seek("kv", 0, 0, end=601)
            got: list[Record] = []
            wait_until(lambda: collect(got, (Record(r.offset, r.key, r.value, 0) for r in consumer.poll(0.2))) and
                       consumer.position("kv", 0) >= 601, timeout=60, message="the restarted broker did not serve")
        assert got == expected(sent, end=state.plan.end_offset, tombstone_horizon_ms=state.plan.tombstone_horizon_ms)
