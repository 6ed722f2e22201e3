"""The Delta tier on an object store: a 3-broker cluster whose ``tier_location`` is
``s3://bucket/prefix`` on a real S3-compatible server (moto's, a subprocess on 127.0.0.1), with
the endpoint and credentials in ``tier_storage_options``.  Tiering, local deletion, the union
read (Consumer) and FETCH_TIER, tier retention, a job killed before its Delta commit, and the
typed, bounded errors of a wrong endpoint or a missing bucket."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from brokers.launcher.local import LocalCluster
from jobs.tier import consumer_reader, tier_topic
from spark_log import Admin
from spark_log.errors import TierStorageError
from spark_log.tier import TierTable, tier_filesystem
from tests.support.cluster import local_cluster
from tests.support.ports import free_port
from tests.support.tiering import create_tiered, produce, read_all, tier_rows, wait_local_start
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BUCKET = "spark-log-tier"
SECRET = "s3cr3t-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A moto S3 server (its own process: deltalake's calls hold the GIL, so an in-process
    server thread would never answer them) with the tier's bucket; its storage options."""
    import boto3

    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return server.poll() is not None   # ended: the assertion below says so

    try:
        wait_until(up, timeout=30, message="moto server never listened")
        assert server.poll() is None, "moto server ended"
        options = {"aws_endpoint_url": endpoint, "aws_access_key_id": "spark-log", "aws_secret_access_key": SECRET,
                   "aws_region": "us-east-1", "aws_allow_http": "true"}
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="spark-log", aws_secret_access_key=SECRET,
                     region_name="us-east-1").create_bucket(Bucket=BUCKET)
        # the brokers hand out the options without the keys: this process and the jobs it
        # starts bring their own, as every S3 client does (spark_log.tier.public_options)
        saved = {name: os.environ.get(name) for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        os.environ.update(AWS_ACCESS_KEY_ID="spark-log", AWS_SECRET_ACCESS_KEY=SECRET)
        try:
            yield options
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, s3: dict[str, str]) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("tier-s3"), brokers=3,
                       extra_config={"tier_location": f"s3://{BUCKET}/clusters/a/", "tier_storage_options": s3}) as running:
        yield running


def _objects(s3: dict[str, str], prefix: str) -> list[str]:
    import boto3

    client = boto3.client("s3", endpoint_url=s3["aws_endpoint_url"], aws_access_key_id="spark-log",
                          aws_secret_access_key=SECRET, region_name="us-east-1")
    return [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])]


def test_tier_to_s3_delete_locally_read_back_through_consumer_and_fetch_tier(cluster: LocalCluster,
                                                                            s3: dict[str, str]) -> None:
    from spark_log.frame import decode_batch, iter_frames, record_offsets
    from spark_log.schemas import BYTES_SCHEMA
    from tests.support.data_client import DataClient, describe

    bootstrap, topic = cluster.bootstrap, f"s3-{uuid.uuid4().hex[:8]}"
    create_tiered(bootstrap, topic, config={"retention.ms": "3600000"})
    produced = produce(bootstrap, topic, 400)
    with Admin(bootstrap) as admin:
        result = tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        tiers = admin.describe_tier(topic)
    assert tiers.location == f"s3://{BUCKET}/clusters/a"
    assert tiers.storage_options == {k: v for k, v in s3.items() if k not in ("aws_access_key_id",
                                                                            "aws_secret_access_key")}
    assert SECRET not in repr(tiers) and SECRET not in str(tiers.storage_options)  # never handed to a client
    assert set(result.tiered) == {0, 1} and all(s == 0 and e > 100 for s, e in result.tiered.values())
    keys = _objects(s3, f"clusters/a/{topic}/")
    assert any(k.endswith(".parquet") for k in keys) and any("/_delta_log/" in k for k in keys)
    assert tier_rows(tiers.location, topic, s3) == sorted(
        (p, o) for p, (s, e) in result.tiered.items() for o in range(s, e))     # once, no gap
    for p in (0, 1):
        wait_local_start(bootstrap, topic, p, 1)                                # local segments deleted
    assert read_all(bootstrap, topic) == produced                              # Consumer: S3 tier, then brokers

    # FETCH_TIER on the data listener (the JVM connector's union read), served from S3
    end = result.tiered[0][1]
    info = describe(bootstrap.split(",")[0])
    with DataClient(info.host, info.port) as any_broker:
        brokers, topics = any_broker.metadata([topic])
    leader = brokers[topics[topic].partitions[0].leader]
    with DataClient(leader[1], leader[2]) as client:
        rows, position = [], 0
        while position < end:
            code, message, hw, next_offset, frames = client.fetch(topic, 0, position, api=8, max_bytes=4096)
            assert code == 0 and hw == end, message
            for at, header in iter_frames(frames):
                view = memoryview(frames)[at: at + header.frame_length]
                batch = decode_batch(view, BYTES_SCHEMA)
                rows.extend(zip(record_offsets(view, header).tolist(), batch.column("value").to_pylist()))
            position = next_offset
    assert rows == [(o, v) for p, o, _, v in produced if p == 0 and o < end]

    # tier retention on S3: two hours on, every tiered file is past retention.ms and deleted
    with Admin(bootstrap) as admin:
        later = tier_topic(admin, topic, reader=consumer_reader(bootstrap),
                           now_ms=int(time.time() * 1000) + 2 * 3_600_000)
        assert later.retention_starts and all(later.retention_starts[p] > 0 for p in later.retention_starts)
        after = admin.describe_tier(topic)
    for p, start in later.retention_starts.items():
        assert after.partitions[(topic, p)].tier_start == start                 # the brokers were told
        assert all(o >= start for q, o in tier_rows(tiers.location, topic, s3) if q == p)


def test_job_killed_before_its_commit_on_s3_then_restarted(cluster: LocalCluster, s3: dict[str, str],
                                                          tmp_path: Path) -> None:
    bootstrap, topic = cluster.bootstrap, f"s3-crash-{uuid.uuid4().hex[:6]}"
    create_tiered(bootstrap, topic)
    produced = produce(bootstrap, topic, 300)
    marker = tmp_path / "reached"

    def job(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "jobs.tier", "--bootstrap", bootstrap, "--topic", topic, "--once"],
                              capture_output=True, text=True, timeout=120, cwd=REPO, start_new_session=True,
                              env=dict(os.environ, PYTHONPATH=str(REPO), **env))

    crashed = job({"SPARK_LOG_TIER_CRASH_AT": "before-commit", "SPARK_LOG_TIER_CRASH_MARKER": str(marker)})
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    assert marker.read_text().split() == ["before-commit"]
    with Admin(bootstrap) as admin:
        location = admin.describe_tier(topic).location
    table = TierTable(location, topic, storage_options=s3)
    assert table.range(0).empty and table.range(1).empty                      # nothing committed
    assert any(k.endswith(".parquet") for k in _objects(s3, f"clusters/a/{topic}/"))   # files, never committed
    again = job({})
    assert again.returncode == 0, again.stdout + again.stderr
    assert SECRET not in again.stdout + again.stderr
    rows = tier_rows(location, topic, s3)
    assert len(rows) == len(set(rows)) and {p for p, _ in rows} == {0, 1}
    for p in (0, 1):
        held = table.range(p)
        assert held.start == 0 and [o for q, o in rows if q == p] == list(range(held.end))
        wait_local_start(bootstrap, topic, p, 1)
    assert read_all(bootstrap, topic) == produced


@pytest.mark.parametrize("case", ["wrong-endpoint", "missing-bucket"])
def test_a_wrong_endpoint_or_a_missing_bucket_is_a_typed_bounded_error(s3: dict[str, str], case: str) -> None:
    if case == "wrong-endpoint":
        location, options = f"s3://{BUCKET}/x", {**s3, "aws_endpoint_url": f"http://127.0.0.1:{free_port()}"}
    else:
        location, options = "s3://no-such-bucket-here/x", s3
    began = time.monotonic()
    with pytest.raises(TierStorageError, match=location) as raised:
        TierTable(location, "t", storage_options=options).range(0)
    assert SECRET not in str(raised.value)
    with pytest.raises(OSError):   # the job's writes: through the same bounded client (tier_topic: TierStorageError)
        filesystem = tier_filesystem(f"{location}/t", options)
        with filesystem.open_output_stream("probe") as out:
            out.write(b"x")
    assert time.monotonic() - began < 30                                        # bounded, never a hang


def test_the_spark_engine_refuses_an_s3_tier(cluster: LocalCluster) -> None:
    from jobs.tier import SparkEngine
    from spark_log.errors import InvalidConfigError

    bootstrap, topic = cluster.bootstrap, f"s3-spark-{uuid.uuid4().hex[:6]}"
    create_tiered(bootstrap, topic, partitions=1)
    with Admin(bootstrap) as admin, pytest.raises(InvalidConfigError, match="--engine local"):
        tier_topic(admin, topic, reader=SparkEngine(None, bootstrap))   # refused before any Spark work
