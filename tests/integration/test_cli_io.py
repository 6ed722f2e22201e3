"""``spark-log produce --file`` (parquet, csv, jsonl; progress bar), ``consume --format
table|json|csv`` and ``topics compact --wait --progress``, run as subprocesses."""
from __future__ import annotations

import base64
import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.integration.test_cli import _cli

pytestmark = pytest.mark.integration

ROWS = 120


def test_produce_a_parquet_file_to_a_typed_topic_and_consume_it_in_each_format(bootstrap: str, topic_name: str,
                                                                                tmp_path: Path) -> None:
    path = tmp_path / "orders.parquet"
    pq.write_table(pa.table({"order_id": list(range(ROWS)), "amount": [i * 1.5 for i in range(ROWS)],
                             "city": [f"city-{i % 4}" for i in range(ROWS)]}), path)
    assert _cli("topics", "create", topic_name, "--typed", "--key-columns", "order_id", "--partitions", "2",
                bootstrap=bootstrap).returncode == 0
    produced = _cli("produce", topic_name, "--file", str(path), "--chunk-rows", "50", "--progress", bootstrap=bootstrap)
    assert produced.returncode == 0, produced.stderr
    assert f"sent {ROWS} records" in produced.stderr
    assert f"producing {topic_name}" in produced.stderr and f"{ROWS}/{ROWS}" in produced.stderr and "100%" in produced.stderr

    common = ("consume", topic_name, "--from-beginning", "--max-records", str(ROWS))
    as_json = _cli(*common, "--format", "json", bootstrap=bootstrap)
    assert as_json.returncode == 0, as_json.stderr
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert sorted(r["order_id"] for r in rows) == list(range(ROWS))
    assert all(r["amount"] == r["order_id"] * 1.5 and r["topic"] == topic_name for r in rows)
    assert {"partition", "offset", "timestamp"} <= set(rows[0])

    as_csv = _cli(*common, "--format", "csv", bootstrap=bootstrap)
    table = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert len(table) == ROWS and sorted(int(r["order_id"]) for r in table) == list(range(ROWS))
    assert list(table[0]) == ["topic", "partition", "offset", "timestamp", "order_id", "amount", "city"]

    as_table = _cli(*common, "--format", "table", bootstrap=bootstrap)
    lines = as_table.stdout.splitlines()
    header = next(line for line in lines if "order_id" in line)
    assert "amount" in header and "city" in header
    assert sum(1 for line in lines if f"{topic_name}" in line) == ROWS  # one table row a record


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_produce_a_csv_or_jsonl_file_to_a_bytes_topic(bootstrap: str, topic_name: str, tmp_path: Path, fmt: str) -> None:
    rows = [{"user": f"u{i % 5}", "event": f"click-{i}"} for i in range(30)]
    path = tmp_path / f"events.{fmt}"
    if fmt == "csv":
        path.write_text("user,event\n" + "".join(f"{r['user']},{r['event']}\n" for r in rows))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _cli("topics", "create", topic_name, bootstrap=bootstrap).returncode == 0
    produced = _cli("produce", topic_name, "--file", str(path), "--key-column", "user", "--no-progress",
                    bootstrap=bootstrap)
    assert produced.returncode == 0 and "sent 30 records" in produced.stderr, produced.stderr
    assert "producing" not in produced.stderr  # --no-progress
    consumed = _cli("consume", topic_name, "--from-beginning", "--max-records", "30", "--format", "json",
                    bootstrap=bootstrap)
    got = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert [json.loads(r["value"]) for r in got] == rows  # one partition: file order
    assert [r["key"] for r in got] == [r["user"] for r in rows]


def test_a_file_that_cannot_be_read_is_one_line(bootstrap: str, topic_name: str, tmp_path: Path) -> None:
    bad = tmp_path / "data.txt"
    bad.write_text("x")
    result = _cli("produce", topic_name, "--file", str(bad), bootstrap=bootstrap)
    assert result.returncode == 1 and "cannot tell the format" in result.stderr and "Traceback" not in result.stderr


def test_compact_wait_shows_progress(bootstrap: str, topic_name: str) -> None:
    assert _cli("topics", "create", topic_name, "--partitions", "2", "--config", "cleanup.policy=compact",
                bootstrap=bootstrap).returncode == 0
    lines = "".join(f"k{i % 3}:v{i}\n" for i in range(40))
    assert _cli("produce", topic_name, "--key-separator", ":", stdin=lines, bootstrap=bootstrap).returncode == 0
    result = _cli("topics", "compact", topic_name, "--wait", "--progress", bootstrap=bootstrap)
    assert result.returncode == 0, result.stderr
    assert f"compacting {topic_name}" in result.stderr and "2/2" in result.stderr and "100%" in result.stderr
    assert f"compacted {topic_name}" in result.stdout and "CLEANED OFFSET" in result.stdout


def test_consume_never_alters_bytes(bootstrap: str, topic_name: str) -> None:
    """``text`` writes keys and values as they are (as Kafka's console consumer); ``json``
    and ``csv`` give those that are not UTF-8 in base64 and say so."""
    from spark_log import Admin, Producer

    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1)
    with Producer(bootstrap) as producer:
        producer.send(topic_name, b"\xff\x00\x80A", key=b"k\xff", partition=0)
        producer.send(topic_name, "text \u00e9".encode(), partition=0)
        producer.flush()
    common = ("consume", topic_name, "--from-beginning", "--max-records", "2")
    as_text = _cli(*common, "--print-key", bootstrap=bootstrap, binary=True)
    assert as_text.returncode == 0, as_text.stderr
    assert as_text.stdout == b"k\xff\t\xff\x00\x80A\nnull\ttext \xc3\xa9\n"

    as_json = _cli(*common, "--format", "json", bootstrap=bootstrap)
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(r["key"], r.get("key_encoding"), r["value"], r.get("value_encoding")) for r in rows] == [
        (base64.b64encode(b"k\xff").decode(), "base64", base64.b64encode(b"\xff\x00\x80A").decode(), "base64"),
        (None, None, "text \u00e9", None)]

    as_csv = _cli(*common, "--format", "csv", bootstrap=bootstrap)
    table = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [(r["key"], r["key_encoding"], r["value"], r["value_encoding"]) for r in table] == [
        (base64.b64encode(b"k\xff").decode(), "base64", base64.b64encode(b"\xff\x00\x80A").decode(), "base64"),
        ("", "", "text \u00e9", "")]


@pytest.mark.parametrize(("kind", "source", "flags", "needle"), [
    ("bytes", "stdin", ("--format", "csv"), "--format applies to --file"),
    ("bytes", "stdin", ("--key-column", "id"), "--key-column applies to --file"),
    ("bytes", "stdin", ("--chunk-rows", "5"), "--chunk-rows applies to --file"),
    ("bytes", "stdin", ("--progress",), "--progress applies to --file"),
    ("bytes", "stdin", ("--no-progress",), "--progress applies to --file"),
    ("bytes", "stdin", ("--key-separator", ""), "--key-separator must not be empty"),
    ("bytes", "file", ("--key-separator", ":"), "--key-separator"),
    ("bytes", "file", ("--key-column", "id"), "--key-column applies to a file without a value column"),
    ("typed", "stdin", ("--key-separator", "|"), "--key-separator applies to bytes topics"),
    ("typed", "file", ("--key-column", "a"), "--key-column applies to bytes topics"),
])
def test_produce_refuses_flags_it_would_ignore(bootstrap: str, topic_name: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                               kind: str, source: str, flags: tuple[str, ...], needle: str) -> None:
    """A flag ``produce`` would not apply (file-only flags on stdin, --key-separator with
    --file or on a typed topic, --key-column where the rows have their key) is refused with
    one line naming it, before anything is sent.  Runs ``main`` in this process."""
    from spark_log import Admin
    from spark_log.cli import main

    with Admin(bootstrap) as admin:
        admin.create_topic(topic_name, partitions=1, kind="typed" if kind == "typed" else None)
        if kind == "typed":
            admin.register_schema(topic_name, pa.schema([("a", pa.int64())]))
    line = b'{"a": 1, "id": 2, "value": "x:y"}\n'
    args = ["--bootstrap", bootstrap, "produce", topic_name, *flags]
    if source == "file":
        (tmp_path / "rows.jsonl").write_bytes(line if kind == "bytes" else b'{"a": 1}\n')
        args += ["--file", str(tmp_path / "rows.jsonl")]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(line if kind == "typed" else b"id,value\n1,a\n")))
    code = main(args)
    _, err = capsys.readouterr()
    assert code == 1 and err.count("\n") == 1 and needle in err, err
    with Admin(bootstrap) as admin:
        assert admin.list_offsets(topic_name) == {0: 0}  # nothing sent
