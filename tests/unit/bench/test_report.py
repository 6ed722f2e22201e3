"""bench/report.py writes REPORT.md with the tables and PNG plots from a figures dict."""
from __future__ import annotations

from pathlib import Path

from bench.peers import compare
from bench.peers import nats as nats_peer
from bench.peers import redis as redis_peer
from bench.report import elide_stack_frames, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _peer(name: str, pub100: float, pub3: float | None = None) -> dict:
    w = nats_peer.HEADLINE_WINDOW if name.startswith("NATS") else redis_peer.HEADLINE_WINDOW
    publish = [{"mode": "x-pub", "size": 100, "rate": pub100, "window": w, "replicas": 1},
               {"mode": "x-pub", "size": 100, "rate": 1.0, "window": 7, "replicas": 1},  # not the headline window
               {"mode": "x-pub", "size": 1024, "rate": pub100 / 4, "window": w, "replicas": 1}]
    if pub3 is not None:
        publish.append({"mode": "x-pub", "size": 100, "rate": pub3, "window": w, "replicas": 3})
    return {"peer": name, "publish": publish,
            "consume": [{"mode": "x-sub", "size": 100, "rate": 2 * pub100}, {"mode": "x-sub", "size": 1024, "rate": pub100}],
            "latency": {"p50_ms": 0.5, "p99_ms": 2.0, "latency_ms": [0.2, 0.5, 0.9, 2.0]}}


def tiny_figures() -> dict:
    nats, redis = _peer("NATS JetStream", 200_000, 100_000), _peer("Redis Streams", 400_000)
    client = {"send_batch": {100: 1_000_000, 1024: 300_000}, "send": 150_000, "poll_arrow": {100: 2_000_000, 1024: 500_000},
              "p50_ms": 4.0, "p99_ms": 9.0, "latency_ms": [1.0, 3.0, 4.0, 9.0, 12.0],
              "aims": {"send_batch": 2_000_000, "send": 300_000, "poll_arrow": 5_000_000}}
    client["peers"] = {"nats": nats, "redis": redis, "rows": compare.rows_client(client, {"nats": nats, "redis": redis})}
    replication = {"rf1": 1_200_000, "rf3": 600_000, "ratio": 0.5}
    replication["peers"] = {"nats": nats, "redis": redis,
                            "rows": compare.rows_replication(replication, {"nats": nats, "redis": redis})}
    sweep = {"size": {"spark-log": [[100, 1e6], [1024, 3e5], [4096, 9e4]], "NATS JetStream": [[100, 2e5], [1024, 5e4]]},
             "batch": {"spark-log": [[100, 1e5], [1000, 5e5]], "Redis Streams": [[10, 2e4], [1000, 4e5]]}}
    return {"meta": {"commit": "abc1234", "started": "2026-11-26 11:00 UTC", "nproc": 2, "load_start": (1.0, 1.0, 1.0),
                     "load_end": (2.0, 1.0, 1.0), "seconds": 12.0},
            "client": client, "replication": replication, "sweep": sweep,
            "latency": {"spark-log": client["latency_ms"], "NATS JetStream": nats["latency"]["latency_ms"]},
            "benches": [{"name": "bench.storage_bench", "command": "python -m bench.storage_bench --mib 1",
                         "seconds": 3.0, "rc": 0, "output": "storage table here\n"}]}


def test_report_has_the_tables_and_the_plots(tmp_path: Path) -> None:
    path = write_report(tiny_figures(), tmp_path)
    text = path.read_text()
    assert path == tmp_path / "REPORT.md"
    # the peer tables, with spark-log's figure, the peers' and the ratio (1,000,000 / 200,000)
    assert "| publish 100 B: send_batch vs async publish / pipelined XADD | 1,000,000 | 200,000 | 5.00x | 400,000 | 2.50x |" in text
    assert "| publish 100 B, RF=3 acks=all vs JetStream R3 | 600,000 | 100,000 | 6.00x | n/a | n/a |" in text
    # latency: lower is better, so the ratio is peer / spark-log
    assert "| produce->consume latency p99 (ms) at ~2,000 rec/s | 9.00 | 2.00 | 0.22x |" in text
    assert "| spark-log | 1,000,000 | 300,000 | 90,000 |" in text  # the sweep, one row per series
    assert "storage table here" in text and "`python -m bench.storage_bench --mib 1`" in text
    for png in ("report-throughput-size.png", "report-throughput-batch.png", "report-latency-cdf.png"):
        assert f"]({png})" in text
        assert (tmp_path / png).read_bytes()[:8] == PNG_MAGIC


def test_report_without_figures_writes_no_plots(tmp_path: Path) -> None:
    path = write_report({"meta": {}}, tmp_path)
    assert "# spark-log benchmark report" in path.read_text()
    assert not list(tmp_path.glob("*.png"))


def test_java_stack_frames_are_cut_to_one_line_and_the_error_stays(tmp_path: Path) -> None:
    trace = ("26/11/28 15:25:07 ERROR Utils: Aborting task\njava.io.InterruptedIOException: interrupted\n"
             "\tat org.apache.hadoop.util.Shell.runCommand(Shell.java:1074)\n\tat org.apache.hadoop.util.Shell.run(Shell.java:960)\n"
             "Caused by: java.lang.InterruptedException\n\t... 39 more\n")
    assert elide_stack_frames(trace) == (
        "26/11/28 15:25:07 ERROR Utils: Aborting task\njava.io.InterruptedIOException: interrupted\n"
        "\t[2 stack frame lines elided]\nCaused by: java.lang.InterruptedException\n\t[1 stack frame lines elided]\n")
    figures = tiny_figures()
    figures["benches"][0]["output"] = "rate 5 rows/s\n" + trace + "ratio 1.2x\n"
    text = write_report(figures, tmp_path).read_text()
    assert "rate 5 rows/s" in text and "ratio 1.2x" in text and "ERROR Utils: Aborting task" in text
    assert "Shell.java" not in text


def _without_plots(figures: dict) -> dict:
    """The figures without what the plots draw (matplotlib costs seconds): for table tests."""
    figures.pop("sweep", None)
    figures.pop("latency", None)
    return figures


def test_replication_in_both_memory_states_against_the_aims(tmp_path: Path) -> None:
    figures = _without_plots(tiny_figures())
    figures["replication"]["means"] = {"rf1 default": 3_000_000.0, "rf3 default": 1_200_000.0}
    figures["replication_steady"] = {"means": {"rf1 default": 5_500_000.0, "rf3 default": 2_400_000.0},
                                     "memory_limit_mib": 4096}
    text = write_report(figures, tmp_path).read_text()
    assert "a 4,096 MiB memory cgroup" in text
    assert "| RF=1 acks=1 | default | 3,000,000 | 5,500,000 | 5,000,000 | 0.60x | 1.10x |" in text
    assert "| RF=3 acks=all | default | 1,200,000 | 2,400,000 | 3,000,000 | 0.40x | 0.80x |" in text
    # the steady state alone (``--only replication-steady``) still gets its section
    del figures["replication"]
    text = write_report(figures, tmp_path).read_text()
    assert "## Replication: 3 brokers" in text and "| RF=1 acks=1 | default | n/a | 5,500,000 |" in text


def test_every_client_row_in_both_memory_states(tmp_path: Path) -> None:
    figures = _without_plots(tiny_figures())
    figures["client"]["rows"] = [("send_batch 100 B", "default", 2_400_000.0), ("send() 100 B", "default", 200_000.0)]
    figures["client_steady"] = {"rows": [("send_batch 100 B", "default", 6_000_000.0),
                                         ("poll_arrow 100 B", "tuned", 4_000_000.0)],
                                "aims": figures["client"]["aims"], "memory_limit_mib": 4096}
    text = write_report(figures, tmp_path).read_text()
    assert "Every client row in two memory states" in text and "a 4,096 MiB memory cgroup" in text
    assert "| send_batch 100 B | default | 2,400,000 | 6,000,000 | 2,000,000 | 1.20x | 3.00x |" in text
    assert "| send() 100 B | default | 200,000 | n/a | 300,000 | 0.67x | n/a |" in text
    assert "| poll_arrow 100 B | tuned | n/a | 4,000,000 | 5,000,000 | n/a | 0.80x |" in text
