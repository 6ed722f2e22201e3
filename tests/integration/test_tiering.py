"""Tiering to Delta on a real 3-broker cluster (no Spark): the job's rounds, the brokers'
tier frame and local retention, union reads through the Consumer."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from brokers.launcher.local import LocalCluster
from jobs.tier import consumer_reader, tier_topic
from spark_log.tier import TierTable
from spark_log import Admin, Consumer, Producer
from spark_log.errors import InvalidConfigError, OffsetOutOfRangeError, TieringNotEnabledError, TierOffsetInvalidError
from tests.support.wait import wait_until
from tests.support.metrics import scrape, value
from tests.support.tiering import create_tiered, produce, read_all, tier_rows, wait_local_start

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


# ``cluster``: the session's shared 3-node cluster (tests/integration/conftest.py)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_tier_delete_locally_and_read_everything_back(cluster: LocalCluster) -> None:
    bootstrap, topic = cluster.bootstrap, _name("tier")
    create_tiered(bootstrap, topic)
    produced = produce(bootstrap, topic, 400)
    with Admin(bootstrap) as admin:
        result = tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        location = admin.describe_tier(topic).location
    assert set(result.tiered) == {0, 1} and result.rows > 0
    for p, (start, end) in result.tiered.items():
        assert start == 0 and end > 100            # closed segments of 200 records
        assert result.reported[p] == (0, end)
    # local retention (local.retention.ms=0) deletes what the tier holds, and nothing more
    for p, (_, end) in result.tiered.items():
        info = wait_local_start(bootstrap, topic, p, 1)
        assert 0 < info.log_start_offset <= end and info.tier_start == 0 and info.tiered_end == end
        # tiering progress on the leader's /metrics (issue 18): the tiered end, and what is left to tier
        url = cluster.metrics_url(info.broker_id) or ""
        labels = {"topic": topic, "partition": str(p)}
        assert value(scrape(url), "spark_log_tier_tiered_end_offset", **labels) == end
        assert value(scrape(url), "spark_log_tier_lag_offsets", **labels) == max(0, info.tierable_end - end)
    with Admin(bootstrap) as admin:
        assert admin.list_offsets(topic, "earliest") == {0: 0, 1: 0}    # KIP-405: the tier's start
    held = tier_rows(location, topic)
    assert held == sorted((p, o) for p, (s, e) in result.tiered.items() for o in range(s, e))  # once, no gap
    assert read_all(bootstrap, topic) == produced                      # union read: tier, then brokers
    # a second round tiers only what is new
    more = produce(bootstrap, topic, 100, start=400)
    with Admin(bootstrap) as admin:
        again = tier_topic(admin, topic, reader=consumer_reader(bootstrap))
    for p, (start, _) in again.tiered.items():
        assert start == result.tiered[p][1]
    assert tier_rows(location, topic) == sorted(set(tier_rows(location, topic)))
    assert read_all(bootstrap, topic) == sorted(produced + more)
    # a position below everything is still out of range
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        assert consumer.position(topic, 0) == 0


def test_refusals(cluster: LocalCluster) -> None:
    bootstrap, plain, tiered = cluster.bootstrap, _name("plain"), _name("tiered")
    with Admin(bootstrap) as admin:
        admin.create_topic(plain, partitions=1, replication_factor=3)
        with pytest.raises(TieringNotEnabledError):
            tier_topic(admin, plain, reader=consumer_reader(bootstrap))
        with pytest.raises(TieringNotEnabledError):
            admin.commit_tiered(plain, 0, start=0, end=0)
    create_tiered(bootstrap, tiered, partitions=1)
    produce(bootstrap, tiered, 10, partitions=1)
    with Admin(bootstrap) as admin:
        with pytest.raises(TierOffsetInvalidError, match="holds nothing"):
            admin.commit_tiered(tiered, 0, start=0, end=5)      # the Delta table does not hold it
        tier_topic(admin, tiered, reader=consumer_reader(bootstrap))
        end = admin.describe_tier(tiered).partitions[(tiered, 0)].tiered_end
        assert end > 4
        with pytest.raises(TierOffsetInvalidError):
            admin.commit_tiered(tiered, 0, start=0, end=end + 1)  # past what the table holds
        admin.commit_tiered(tiered, 0, start=0, end=end)        # the same range again: nothing appended
        with pytest.raises(TierOffsetInvalidError):
            admin.commit_tiered(tiered, 0, start=0, end=4)      # going back
        info = admin.describe_tier(tiered).partitions[(tiered, 0)]
        assert (info.tier_start, info.tiered_end) == (0, end)


def test_a_position_gone_from_both_is_out_of_range(cluster: LocalCluster) -> None:
    bootstrap, topic = cluster.bootstrap, _name("gone")
    create_tiered(bootstrap, topic, partitions=1, config={"retention.ms": "60000", "local.retention.ms": "0"})
    produce(bootstrap, topic, 200, partitions=1)
    with Admin(bootstrap) as admin:
        first = tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        end = first.tiered[0][1]
        # tier retention by time: everything tiered is older than 60 s at "now + 1 h"
        import time

        later = tier_topic(admin, topic, reader=consumer_reader(bootstrap), now_ms=int(time.time() * 1000) + 3_600_000)
        assert later.retention_starts[0] > 0
        wait_local_start(bootstrap, topic, 0, 1)
        info = admin.describe_tier(topic).partitions[(topic, 0)]
        assert (info.tier_start, info.tiered_end) == later.reported[0]
        assert info.tier_start == later.retention_starts[0] and info.tiered_end >= end
        assert admin.list_offsets(topic, "earliest")[0] == min(info.tier_start, info.log_start_offset)
    with Consumer(bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek(topic, 0, 0)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(50):
                consumer.poll(0.2)


def _cli(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOG_BOOTSTRAP=cluster.bootstrap)
    return subprocess.run([sys.executable, "-m", "spark_log.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=REPO)


def test_cli_tier_wait_and_describe(cluster: LocalCluster) -> None:
    bootstrap, topic, plain = cluster.bootstrap, _name("cli"), _name("cli-plain")
    create_tiered(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, 150, partitions=1)
    done = _cli(cluster, "topics", "tier", topic, "--wait", "--progress")
    assert done.returncode == 0, done.stdout + done.stderr
    with Admin(bootstrap) as admin:
        info = admin.describe_tier(topic).partitions[(topic, 0)]
        admin.create_topic(plain, partitions=1, replication_factor=1)
    assert info.tier_start == 0 and info.tiered_end > 0
    # the bar (stderr) ends at the offsets the brokers recorded as tiered, out of those tierable
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.stderr)
    assert f"tiering {topic}" in shown and re.search(rf"\b{info.tiered_end}/\d+", shown), shown[-2000:]
    assert f"[0, {info.tiered_end})" in done.stdout
    described = _cli(cluster, "topics", "describe", topic)
    assert described.returncode == 0 and f"[0, {info.tiered_end})" in described.stdout and "tier:" in described.stdout
    from spark_log._cli_tier import describe_json   # what `topics describe --json` adds, in-process

    with Admin(bootstrap) as admin:
        as_json = describe_json(admin, topic, {"remote.storage.enable": "true"})
    assert as_json is not None and as_json["partitions"][0]["tiered_end"] == info.tiered_end
    assert json.dumps(as_json)
    refused = _cli(cluster, "topics", "tier", plain, "--wait")
    assert refused.returncode == 1 and "remote.storage.enable" in refused.stderr


def test_read_committed_tier_leaves_aborted_records_and_markers_out(cluster: LocalCluster) -> None:
    import pyarrow as pa

    from spark_log import Producer

    bootstrap, topic = cluster.bootstrap, _name("txn")
    create_tiered(bootstrap, topic, partitions=1)
    committed: list[bytes] = []
    with Producer(bootstrap, transactional_id=_name("tid"), batch_size=600) as producer:
        producer.init_transactions()
        for round_ in range(6):
            producer.begin_transaction()
            values = [f"r{round_}-{i:03d}-".encode() + b"x" * 40 for i in range(40)]
            producer.send_batch(topic, pa.table({"key": [b"k"] * 40, "value": values}), partition=0)
            if round_ % 3 == 1:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
                committed.extend(values)
    with Admin(bootstrap) as admin:
        result = tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        location = admin.describe_tier(topic).location
    assert result.tiered[0][1] > 0
    wait_local_start(bootstrap, topic, 0, 1)
    tiered = TierTable(location, topic).load().to_pyarrow_table(columns=["value"])["value"].to_pylist()
    assert tiered == committed[:len(tiered)] and len(tiered) > 40      # committed only, in order, no marker
    for level in ("read_committed", "read_uncommitted"):                # the tier holds no aborted record
        got = [v for _, _, _, v in read_all(bootstrap, topic, partitions=1, isolation_level=level)]
        if level == "read_committed":
            assert got == committed
        else:
            assert got[:len(tiered)] == tiered


def test_list_offsets_by_timestamp_finds_tiered_records(cluster: LocalCluster) -> None:
    """KIP-405: ListOffsets by timestamp searches the Delta tier too (it answered the local
    log start, so a reader starting from a time skipped the tiered records it wanted)."""
    bootstrap, topic = cluster.bootstrap, _name("bytime")
    create_tiered(bootstrap, topic, partitions=1)
    base = int(time.time() * 1000) - 3_600_000
    with Producer(bootstrap, linger_ms=1, batch_size=600) as producer:
        futures = [producer.send(topic, b"x" * 60, key=f"k{i}".encode(), partition=0, timestamp=base + i * 1000)
                   for i in range(100)]
        offsets = [f.result(timeout=60)[1] for f in futures]
    with Admin(bootstrap) as admin:
        tier_topic(admin, topic, reader=consumer_reader(bootstrap))
    start = wait_local_start(bootstrap, topic, 0, 6).log_start_offset
    with Admin(bootstrap) as admin:
        assert admin.list_offsets(topic, base + 5 * 1000)[0] == offsets[5], f"local log start {start}"
        assert admin.list_offsets(topic, base + 5 * 1000 - 1)[0] == offsets[5]   # between two records
        assert admin.list_offsets(topic, base + 99 * 1000)[0] == offsets[99]   # in the local log
        assert admin.list_offsets(topic, base + 100 * 1000) == admin.list_offsets(topic, "latest")   # none: the end


def test_a_tiered_topic_cannot_be_compacted(cluster: LocalCluster) -> None:
    """The Delta tier is never compacted: a key tombstoned and compacted away on the brokers
    would come back from it.  The combination is refused at create and at alter, either way
    round, as Kafka does (``LogConfig.validateNoRemoteStorageForCompactedTopic``)."""
    bootstrap, refused, tiered, compacted = cluster.bootstrap, _name("refused"), _name("tiered"), _name("compacted")
    with pytest.raises(InvalidConfigError, match="cannot be compacted"):
        create_tiered(bootstrap, refused, partitions=1, config={"cleanup.policy": "compact"})
    create_tiered(bootstrap, tiered, partitions=1)
    with Admin(bootstrap) as admin:
        assert refused not in admin.list_topics()
        with pytest.raises(InvalidConfigError, match="cannot be compacted"):
            admin.alter_configs(tiered, set={"cleanup.policy": "compact,delete"})
        admin.create_topic(compacted, partitions=1, replication_factor=3, config={"cleanup.policy": "compact"})
        with pytest.raises(InvalidConfigError, match="cannot be compacted"):
            admin.alter_configs(compacted, set={"remote.storage.enable": "true"})
        assert admin.describe_topic(tiered).config["cleanup.policy"] == "delete"
        assert admin.describe_topic(compacted).config.get("remote.storage.enable", "false") == "false"


def test_a_recreated_topic_does_not_take_the_old_topics_table(cluster: LocalCluster) -> None:
    bootstrap, topic = cluster.bootstrap, _name("again")
    create_tiered(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, 150, partitions=1)
    with Admin(bootstrap) as admin:
        tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        admin.delete_topic(topic)
    wait_until(lambda: create_tiered(bootstrap, topic, partitions=1) is None, timeout=30,
               message="the topic was never created again")   # TopicAlreadyExists until the deletion is applied
    produce(bootstrap, topic, 150, partitions=1)
    with Admin(bootstrap) as admin:
        with pytest.raises(TierOffsetInvalidError, match="earlier topic"):
            tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        assert not admin.describe_tier(topic).partitions[(topic, 0)].tiered
    assert len(read_all(bootstrap, topic, partitions=1)) == 150


def test_typed_topic_tiers_its_columns_follows_schema_evolution_and_projects(cluster: LocalCluster) -> None:
    import pyarrow as pa

    from spark_log import Producer

    bootstrap, topic = cluster.bootstrap, _name("typed")
    v0 = pa.schema([("user", pa.string()), ("n", pa.int64())])
    v1 = pa.schema([("user", pa.string()), ("n", pa.int64()), ("note", pa.string())])
    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions=1, replication_factor=3, schema=v0,
                           config={"remote.storage.enable": "true", "segment.bytes": "1024", "local.retention.ms": "0"})
    with Producer(bootstrap, batch_size=300) as producer:
        for i in range(0, 200, 10):
            for f in producer.send_batch(topic, pa.table({"user": [f"u{j}" for j in range(i, i + 10)],
                                                          "n": list(range(i, i + 10))}, schema=v0), partition=0):
                f.result(timeout=60)
    with Admin(bootstrap) as admin:
        first = tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        admin.register_schema(topic, v1)            # a nullable column added at the end
    with Producer(bootstrap, batch_size=300) as producer:
        for i in range(200, 400, 10):
            for f in producer.send_batch(topic, pa.table({"user": [f"u{j}" for j in range(i, i + 10)],
                                                          "n": list(range(i, i + 10)),
                                                          "note": [f"x{j}" for j in range(i, i + 10)]}, schema=v1),
                                         partition=0):
                f.result(timeout=60)
    with Admin(bootstrap) as admin:
        second = tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        location = admin.describe_tier(topic).location
    assert first.tiered[0][1] > 0 and second.tiered[0][0] == first.tiered[0][1]
    start = wait_local_start(bootstrap, topic, 0, second.tiered[0][1] - 40).log_start_offset
    table = TierTable(location, topic).load().to_pyarrow_table()
    assert {"user", "n", "note", "timestamp", "partition", "offset"} <= set(table.column_names)
    with Admin(bootstrap) as admin:
        end = admin.list_offsets(topic, "latest")[0]
    for columns in (None, ["n", "note"]):
        rows: list[dict[str, object]] = []
        with Consumer(bootstrap, auto_offset_reset="none", columns=columns,
                      row_filter=[("n", ">=", 5)] if columns else None) as consumer:
            consumer.assign([(topic, 0)])
            consumer.seek(topic, 0, 0, end=end)
            for _ in range(200):
                for batch in consumer.poll_arrow(0.2):
                    rows.extend(batch.to_pylist())
                if consumer.position(topic, 0) >= end:
                    break
        numbers = [r["n"] for r in rows]
        assert numbers == list(range(5 if columns else 0, 400)), numbers[:20]
        assert any(r["offset"] < start for r in rows) and any(r["offset"] >= start for r in rows)
        assert all(set(r) == set(rows[0]) for r in rows)          # tier rows shaped as the brokers' rows
        if columns:
            assert set(rows[0]) == {"n", "note", "timestamp", "topic", "partition", "offset"}
        assert [r["note"] for r in rows if r["n"] == 250] == ["x250"] and rows[0]["note"] is None


def test_retention_bytes_governs_tier_and_brokers_together(cluster: LocalCluster) -> None:
    import pyarrow as pa

    bootstrap, topic = cluster.bootstrap, _name("bytes")
    create_tiered(bootstrap, topic, partitions=1, config={"retention.bytes": "1000000", "local.retention.bytes": "4000",
                                                          "local.retention.ms": "-1"})
    produce(bootstrap, topic, 300, partitions=1)
    with Admin(bootstrap) as admin:
        first = tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        assert first.tiered[0][0] == 0 and not first.retention_starts
        local = wait_local_start(bootstrap, topic, 0, 1)
        assert local.local_bytes <= 4000 + 2048               # local.retention.bytes, whole segments kept
        tiers = admin.describe_tier(topic)
        files = pa.table(TierTable(tiers.location, topic).load().get_add_actions(flatten=True))
        tier_bytes = sum(files.column("size_bytes").to_pylist())
        # room for what is there now and a little more, not for a second round's file
        admin.alter_configs(topic, set={"retention.bytes": str(tier_bytes + local.local_bytes + 2000)})
        produce(bootstrap, topic, 300, start=300, partitions=1)
        second = tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        assert second.retention_starts[0] == first.tiered[0][1]   # the oldest file left Delta
        tiers = admin.describe_tier(topic)
        info = tiers.partitions[(topic, 0)]
        assert (info.tier_start, info.tiered_end) == (first.tiered[0][1], second.tiered[0][1])
        assert admin.list_offsets(topic, "earliest")[0] == min(info.tier_start, info.log_start_offset)
    assert tier_rows(tiers.location, topic)[0][1] >= first.tiered[0][1]


def test_a_missing_tier_table_is_an_error_not_a_gap(cluster: LocalCluster) -> None:
    import shutil

    from spark_log.errors import TierUnavailableError

    bootstrap, topic = cluster.bootstrap, _name("broken")
    create_tiered(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, 150, partitions=1)
    with Admin(bootstrap) as admin:
        tier_topic(admin, topic, reader=consumer_reader(bootstrap))
        location = admin.describe_tier(topic).location
    wait_local_start(bootstrap, topic, 0, 1)
    shutil.rmtree(f"{location}/{topic}")                # someone deleted the table by hand
    with Consumer(bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek(topic, 0, 0)
        with pytest.raises(TierUnavailableError, match="holds"):
            for _ in range(50):
                consumer.poll(0.2)


def test_fetch_tier_serves_the_tiers_records_on_the_data_listener(cluster: LocalCluster) -> None:
    """The data listener's FETCH_TIER (the JVM connector's union read): the tier's records of a
    range as version-2 frames, the tier's range in the answer, out of range outside it."""
    from spark_log.frame import decode_batch, iter_frames, record_offsets
    from spark_log.schemas import BYTES_SCHEMA
    from tests.support.data_client import DataClient, describe

    bootstrap, topic, plain = cluster.bootstrap, _name("fetch-tier"), _name("plain")
    create_tiered(bootstrap, topic, partitions=1)
    produced = produce(bootstrap, topic, 150, partitions=1)
    with Admin(bootstrap) as admin:
        admin.create_topic(plain, partitions=1, replication_factor=3)
        start, end = tier_topic(admin, topic, reader=consumer_reader(bootstrap)).tiered[0]
    assert start == 0 and end > 20
    local_start = wait_local_start(bootstrap, topic, 0, 1).log_start_offset
    info = describe(bootstrap.split(",")[0])
    with DataClient(info.host, info.port) as any_broker:
        brokers, topics = any_broker.metadata([topic, plain])
    leaders = {name: brokers[topics[name].partitions[0].leader] for name in (topic, plain)}
    with DataClient(leaders[topic][1], leaders[topic][2]) as client:
        code, message, *_ = client.fetch(topic, 0, 0)
        assert code == 11, message                                   # FETCH: below the brokers' local log start
        rows, position = [], 3
        while position < end:
            code, message, hw, next_offset, frames = client.fetch(topic, 0, position, api=8, max_bytes=2048)
            assert code == 0, message
            assert (client.last_start, hw) == (0, end) and next_offset > position and client.last_aborted == []
            for at, header in iter_frames(frames):                  # CRCs verify
                view = memoryview(frames)[at: at + header.frame_length]
                batch = decode_batch(view, BYTES_SCHEMA)
                rows.extend(zip(record_offsets(view, header).tolist(), batch.column("key").to_pylist(),
                                batch.column("value").to_pylist()))
            position = next_offset
        assert position == end and rows == [(o, k, v) for _, o, k, v in produced if 3 <= o < end]
        code, _message, _hw, next_offset, frames = client.fetch(topic, 0, 5, api=8, max_offset=9)
        assert code == 0 and next_offset == 9 and len(frames) > 0   # bounded by max offset
        code, _message, hw, _next, frames = client.fetch(topic, 0, end, api=8)
        assert code == 11 and (client.last_start, hw) == (0, end) and frames == b""   # the brokers hold it
        assert local_start <= end
    with DataClient(leaders[plain][1], leaders[plain][2]) as client:
        code, _message, hw, _next, _frames = client.fetch(plain, 0, 0, api=8)
        assert code == 11 and (client.last_start, hw) == (0, 0)     # a topic without a tier
