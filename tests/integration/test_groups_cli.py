"""``spark-log groups ...`` and ``spark-log consume --group`` against the shared cluster.

Most commands run ``spark_log.cli.main`` in this process (output captured); the member and
the one-line error run as real subprocesses.  Adds about 8 s.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from spark_log import Admin, Consumer, Producer
from spark_log.cli import main
from tests.support.wait import wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _run(capsys: pytest.CaptureFixture[str], bootstrap: str, *args: str) -> tuple[int, str, str]:
    code = main(["--bootstrap", bootstrap, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_groups_list_describe_reset_delete(bootstrap: str, topic_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    group = f"cli-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=2, replication_factor=3)
    with Producer(bootstrap) as producer:
        for n in range(30):
            producer.send(topic_name, f"line {n}".encode(), partition=n % 2)
        producer.flush()
    env = dict(os.environ, PYTHONPATH=str(REPO), SPARK_LOG_BOOTSTRAP=bootstrap)
    consumed = subprocess.run([sys.executable, "-m", "spark_log.cli", "consume", topic_name, "--group", group,
                               "--from-beginning", "--max-records", "20"], capture_output=True, text=True, env=env,
                              timeout=120, cwd=REPO)
    assert consumed.returncode == 0, consumed.stderr
    assert len(consumed.stdout.splitlines()) == 20
    code, out, _ = _run(capsys, bootstrap, "groups", "describe", group, "--json")
    described = json.loads(out)
    assert code == 0 and described["state"] == "Empty" and described["total_lag"] == 10  # it committed what it printed
    assert {p["partition"]: p["log_end_offset"] for p in described["partitions"]} == {0: 15, 1: 15}
    code, out, _ = _run(capsys, bootstrap, "groups", "describe", group)
    assert code == 0 and "CURRENT-OFFSET  LOG-END-OFFSET  LAG" in out and "total lag 10" in out
    code, out, _ = _run(capsys, bootstrap, "groups", "list")
    assert code == 0 and f"{group}\tEmpty\t0 members" in out.splitlines()

    code, out, _ = _run(capsys, bootstrap, "groups", "reset-offsets", group, "--topic", topic_name, "--to-earliest")
    assert code == 0 and "dry run" in out
    assert json.loads(_run(capsys, bootstrap, "groups", "describe", group, "--json")[1])["total_lag"] == 10
    code, out, _ = _run(capsys, bootstrap, "groups", "reset-offsets", group, "--topic", topic_name, "--shift-by", "-3",
                        "--partitions", "0", "--execute", "--json")
    plan = json.loads(out)
    assert code == 0 and plan["executed"] and len(plan["offsets"]) == 1
    code, _, _ = _run(capsys, bootstrap, "groups", "reset-offsets", group, "--topic", topic_name, "--to-datetime",
                      "2000-01-01T00:00:00", "--partitions", "1", "--execute")
    assert code == 0
    offsets = {p["partition"]: p["committed_offset"]
               for p in json.loads(_run(capsys, bootstrap, "groups", "describe", group, "--json")[1])["partitions"]}
    assert offsets[1] == 0 and offsets[0] == plan["offsets"][0]["new_offset"]

    # a live member: resets and deletes are refused with one line and exit code 1
    with Consumer(bootstrap, group_id=group, session_timeout_ms=5000) as member:
        member.subscribe([topic_name])
        wait_until(lambda: member.poll(0.1) is not None and member.assignment(), timeout=30, message="join")
        code, _, err = _run(capsys, bootstrap, "groups", "reset-offsets", group, "--topic", topic_name, "--to-latest",
                            "--execute")
        assert code == 1 and err.startswith("spark-log: NON_EMPTY_GROUP") and err.count("\n") == 1
        code, _, err = _run(capsys, bootstrap, "groups", "delete", group)
        assert code == 1 and "NON_EMPTY_GROUP" in err
        code, out, _ = _run(capsys, bootstrap, "groups", "describe", group)
        assert code == 0 and member._group.membership.member_id in out  # type: ignore[union-attr]
    code, out, _ = _run(capsys, bootstrap, "groups", "delete-offsets", group, "--topic", topic_name, "--partitions", "0")
    assert code == 0 and "deleted 1 committed offset" in out
    code, out, _ = _run(capsys, bootstrap, "groups", "delete", group)
    assert code == 0 and f"deleted group {group}" in out
    code, _, err = _run(capsys, bootstrap, "groups", "describe", group)
    assert code == 1 and "GROUP_ID_NOT_FOUND" in err


def test_cli_refuses_contradictions(bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, bootstrap, "consume", "t", "--group", "g", "--partition", "0", "--offset", "1")
    assert code == 1 and "--group" in err
    code, _, err = _run(capsys, bootstrap, "groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "soon")
    assert code == 1 and "ISO 8601" in err
    with pytest.raises(SystemExit):  # argparse: exactly one target
        main(["--bootstrap", bootstrap, "groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"])


def test_delete_offsets_refuses_missing_partitions_and_counts_only_commits(
        bootstrap: str, topic_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A partition the topic does not have is refused as reset-offsets refuses it (nothing
    deleted); of those it has, only the ones the group committed count as deleted."""
    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=2)
    group = f"cli-{uuid.uuid4().hex[:8]}"
    with Consumer(bootstrap, group_id=group, enable_auto_commit=False) as consumer:
        consumer.assign([(topic_name, 0)])
        consumer.commit({(topic_name, 0): 0})
    code, out, err = _run(capsys, bootstrap, "groups", "delete-offsets", group, "--topic", topic_name,
                          "--partitions", "0,9")
    assert code == 1 and out == "" and err.count("\n") == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err, (out, err)
    with Admin(bootstrap) as admin:
        assert set(admin.list_group_offsets(group)) == {(topic_name, 0)}
    code, out, _ = _run(capsys, bootstrap, "groups", "delete-offsets", group, "--topic", topic_name,
                        "--partitions", "0,1")
    assert code == 0 and "deleted 1 committed offset of" in out, out
