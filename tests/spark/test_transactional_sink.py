"""The transactional sink (``transactional=true``, issue 14): every micro-batch is one
transaction across all its tasks and partitions, committed by the driver.

- In one session: a stream of files written transactionally reads back exactly once under
  ``read_committed`` (Spark's own source and the Consumer), the coordinator records the last
  batch as committed, and a batch ``df.write`` is atomic too.
- Kill -9 of the writing query's process group at named points (a task half way through a
  batch; every task done but the driver's commit not sent; the commit done but not in
  Spark's checkpoint), each asserted reached, then restarted from the checkpoint, while a
  ``read_committed`` consumer reads beside it: it never sees a row of a batch that is not
  committed (a killed attempt's rows stay invisible for good), never a duplicate, and in
  the end every input row once.  Both sinks, every point.
"""
from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.spark.job_process import kill_job, start_job
from tests.spark.kill_job import finish_in_session, write_input_files, write_query
from tests.support.wait import wait_until

pytestmark = [pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
ROWS_PER_FILE = 400


def _inputs(folder: Path, files: int, *, value_bytes: int = 16) -> None:
    write_input_files(folder, files, ROWS_PER_FILE, value_bytes=value_bytes)  # file k is micro-batch k


def _committed_keys(bootstrap: str, topic: str, partitions: int) -> list[int]:
    from spark_log import Admin, Consumer

    with Admin(bootstrap) as admin:
        ends = admin.list_offsets(topic, "latest", isolation_level="read_committed")
    keys: list[int] = []
    with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        wait_until(lambda: keys.extend(int(r.key) for r in consumer.poll(0.2)) or
                   all(consumer.position(topic, p) >= ends[p] for p in range(partitions)), timeout=60,
                   message="could not read the topic to its last stable offset")
    return keys


def test_a_transactional_stream_reads_back_once_and_batch_writes_are_atomic(
        spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Path, fmt: str) -> None:
    """Both sinks (the JVM one: tasks join over gRPC, frames go through the data listener's
    PRODUCE_TXN, the driver's StreamingWrite.commit ends the transaction)."""
    topic = topic_name()
    admin.create_topic(topic, partitions=3, replication_factor=3)
    _inputs(tmp_path / "in", 3)
    query = (spark.readStream.schema("id long, value string").option("maxFilesPerTrigger", "1")
             .parquet(str(tmp_path / "in")).selectExpr("cast(id as string) as key", "value")
             .writeStream.format(fmt).option("bootstrap", log_cluster.bootstrap).option("topic", topic)
             .option("transactional", "true")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    query.awaitTermination(240)
    assert query.exception() is None
    keys = _committed_keys(log_cluster.bootstrap, topic, 3)
    assert sorted(keys) == list(range(3 * ROWS_PER_FILE))
    described = admin.describe_transaction(f"spark-sink-{query.id}")
    assert described["committed_label"] == 2 and described["state"] == "CompleteCommit"
    stable = admin.list_offsets(topic, "latest", isolation_level="read_committed")
    assert stable == admin.list_offsets(topic, "latest")  # every transaction decided
    read = (spark.read.format("spark-log").option("subscribe", topic).option("isolationLevel", "read_committed")
            .load().selectExpr("cast(key as string) as key"))
    assert sorted(int(r.key) for r in read.collect()) == list(range(3 * ROWS_PER_FILE))
    # a read_committed stream in small micro-batches crosses the offsets the markers take
    streamed = (spark.readStream.format("spark-log").option("subscribe", topic).option("startingOffsets", "earliest")
                .option("isolationLevel", "read_committed").option("maxOffsetsPerTrigger", "150").load()
                .selectExpr("cast(key as string) as key").writeStream.format("memory").queryName("txn_read_back")
                .option("checkpointLocation", str(tmp_path / "ck-read")).trigger(availableNow=True).start())
    streamed.awaitTermination(240)
    assert streamed.exception() is None
    rows = [int(r.key) for r in spark.sql("select key from txn_read_back").collect()]
    assert sorted(rows) == list(range(3 * ROWS_PER_FILE)) and len(streamed.recentProgress) > 3

    other = topic_name()
    admin.create_topic(other, partitions=2, replication_factor=3)
    (spark.range(0, 1000).selectExpr("cast(id as string) as key", "cast(id as string) as value").repartition(4)
     .write.format(fmt).option("bootstrap", log_cluster.bootstrap).option("topic", other).option("transactional", "true")
     .mode("append").save())
    assert sorted(_committed_keys(log_cluster.bootstrap, other, 2)) == list(range(1000))


def test_a_failed_transactional_write_leaves_nothing_visible(
        spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], fmt: str) -> None:
    """A batch write whose task fails after sending rows (100-row chunks) is aborted by the
    driver: read_committed sees none of it, and the partitions' stable offsets reach their end."""
    topic = topic_name()
    admin.create_topic(topic, partitions=2, replication_factor=3)
    before = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        df = spark.range(0, 1000, numPartitions=1).selectExpr(
            "cast(id as string) as key", "if(id = 900, raise_error('planted failure'), cast(id as string)) as value")
        with pytest.raises(Exception, match="planted failure"):
            (df.write.format(fmt).option("bootstrap", log_cluster.bootstrap).option("topic", topic)
             .option("transactional", "true").mode("append").save())
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", before)
    if fmt != "spark-log":  # the JVM sink sends each 100-row chunk as it fills: the rows before the failure went out
        assert sum(admin.list_offsets(topic, "latest").values()) >= 900
    wait_until(lambda: admin.list_offsets(topic, "latest", isolation_level="read_committed")
               == admin.list_offsets(topic, "latest"), timeout=60, message="the aborted transaction stays open")
    assert _committed_keys(log_cluster.bootstrap, topic, 2) == []


def test_transactional_option_checks(spark: Any, topic_name: Callable[[], str], admin: Any) -> None:
    from connectors.options import WriterOptions
    from spark_log.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError):
        WriterOptions.parse({"topic": "t", "transactional": "yes"})
    with pytest.raises(InvalidConfigError):
        WriterOptions.parse({"topic": "t", "transactional": "true", "acks": "1"})
    with pytest.raises(InvalidConfigError):
        WriterOptions.parse({"topic": "t", "transactionTimeoutMs": "5000"})
    parsed = WriterOptions.parse({"topic": "t", "transactional": "true", "transactionTimeoutMs": "5000"})
    assert parsed.transactional and parsed.transaction_timeout_ms == 5000


# -- kill -9 at named points ------------------------------------------------------------------

_start = start_job
_kill = kill_job


#: Where the writing query is killed, in the order one checkpoint meets them: ``task-stalled``
#: (a write task stalls half way through batch 1, its rows before the stall in the log and
#: uncommitted; the test kills the process group), then the driver's named crash points
#: ``before-commit`` (every task of the batch wrote, the driver has not asked the coordinator to
#: commit) and ``during-commit`` (the coordinator committed, Spark's checkpoint has not recorded
#: the batch).  After the last one, the query runs to its end from the checkpoint.
KILL_POINTS = ("task-stalled", "before-commit", "during-commit")


def _kill_stalled_task(log: Path, impl: dict[str, str], bootstrap: str, admin: Any, inputs: Path, topic: str,
                       checkpoint: Path) -> None:
    """``task-stalled``: reached when the topic holds more records than read_committed sees (a
    half-written batch) while the query is still running; then its process group is killed."""
    gate = ROWS_PER_FILE + 250
    job = _start(log, impl, "write", bootstrap, str(inputs), topic, str(checkpoint), str(gate), "transactional")
    try:
        wait_until(lambda: job.poll() is not None or sum(admin.list_offsets(topic, "latest").values()) >
                   sum(admin.list_offsets(topic, "latest", isolation_level="read_committed").values()),
                   timeout=300, message=lambda: "no half-written batch:\n" + log.read_text(errors="replace")[-2000:])
        assert job.poll() is None, "the writing query died on its own:\n" + log.read_text(errors="replace")[-2000:]
    finally:
        _kill(job)


def _crash_at(point: str, log: Path, impl: dict[str, str], marker: Path, bootstrap: str, inputs: Path, topic: str,
              checkpoint: Path, jvm: bool) -> None:
    """A driver's named crash point: reached when the sink appended its name to ``marker``."""
    before = marker.read_text().splitlines() if marker.exists() else []
    job = _start(log, {**impl, "SPARK_LOG_SINK_CRASH_AT": point, "SPARK_LOG_SINK_CRASH_MARKER": str(marker)},
                 "write", bootstrap, str(inputs), topic, str(checkpoint), "", "transactional")
    try:
        job.wait(timeout=300)
    finally:
        _kill(job)
    reached = marker.read_text().splitlines() if marker.exists() else []
    assert reached == before + [point], f"crash point {point} not reached:\n" + log.read_text(errors="replace")[-2000:]
    # the JVM sink's point (in the driver's JVM) kills the driver's whole process group; the
    # Python sink's runs in a Spark Python worker outside that group, whose death fails the
    # query instead (the driver exits 1)
    if jvm:
        assert job.returncode == -signal.SIGKILL, f"{point}: exit {job.returncode}"


class CommittedReader:
    """A read_committed consumer polling beside the writer; checks after every poll that
    each micro-batch it saw part of is committed (its transaction's label reached), that
    no row is seen twice, and keeps every row seen."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, transactional_id: Callable[[], str | None]) -> None:
        from spark_log import Admin, Consumer

        self.topic, self.partitions = topic, partitions
        self.consumer = Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest")
        self.consumer.assign([(topic, p) for p in range(partitions)])
        self.admin = Admin(bootstrap)
        self.transactional_id = transactional_id
        self.seen: list[int] = []
        self.violations: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "CommittedReader":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                got = [int(r.key) for r in self.consumer.poll(0.2)]
            except Exception as exc:  # noqa: BLE001 - a broker hiccup; reported if it persists
                self.violations.append(f"poll failed: {exc!r}")
                continue
            if not got:
                continue
            self.seen.extend(got)
            batches = {key // ROWS_PER_FILE for key in got}
            tid = self.transactional_id()
            state = self.admin.describe_transaction(tid) if tid else {}  # one look: state and label together
            label = state.get("committed_label", -1)
            for batch in batches:
                # a row of batch B is visible only once B's commit was taken: committed, or its markers being written
                if batch > label and not (state.get("state") == "PrepareCommit" and state.get("label") == batch):
                    self.violations.append(f"read a row of batch {batch} before it committed (committed: {label}, "
                                           f"state {state.get('state')} of batch {state.get('label')})")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.consumer.close()
        self.admin.close()


@pytest.mark.slow
@pytest.mark.timeout(1200)  # three Spark sessions started and killed: past 600 s on a loaded 2-core machine
def test_writer_killed_at_each_point_appears_whole_or_not_at_all(
        spark: Any, log_cluster: Any, admin: Any, topic_name: Callable[[], str], tmp_path: Path, fmt: str) -> None:
    """Both sinks, at every point: the JVM one reaches the same named points in its driver
    (CrashPoints.java).  ``make test-jvm-kill`` runs the JVM variant alone."""
    jvm = fmt != "spark-log"
    impl = {"SPARK_LOG_JOB_IMPL": "jvm" if jvm else "python"}
    topic = topic_name()
    admin.create_topic(topic, partitions=3, replication_factor=3)
    inputs, checkpoint, log, marker = tmp_path / "in", tmp_path / "ck", tmp_path / "job.log", tmp_path / "reached"
    files = 5
    # 1 KiB values: an Arrow batch of 100 rows overflows Spark's socket buffer to the Python
    # writer, so the rows before a stalled row really reach the writer
    _inputs(inputs, files, value_bytes=1024)
    query_id: list[str] = []

    def transactional_id() -> str | None:
        if not query_id and (checkpoint / "metadata").exists():
            import json
            query_id.append(json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"])
        return f"spark-sink-{query_id[0]}" if query_id else None

    reader = CommittedReader(log_cluster.bootstrap, topic, 3, transactional_id).start()
    bootstrap = log_cluster.bootstrap
    try:
        for point in KILL_POINTS:
            if point == "task-stalled":
                _kill_stalled_task(log, impl, bootstrap, admin, inputs, topic, checkpoint)
            else:
                _crash_at(point, log, impl, marker, bootstrap, inputs, topic, checkpoint, jvm)
        # the last restart from the checkpoint, which nothing kills, in the test's own session
        finish_in_session(spark, lambda session: write_query(session, fmt, bootstrap, str(inputs), topic,
                                                             str(checkpoint), "", "transactional"))
        total = files * ROWS_PER_FILE
        wait_until(lambda: len(reader.seen) >= total, timeout=60, message=lambda: f"reader saw {len(reader.seen)}")
    finally:
        reader.stop()
    assert not reader.violations, reader.violations[:5]
    assert len(reader.seen) == len(set(reader.seen)), "a row was read twice"
    assert sorted(reader.seen) == list(range(files * ROWS_PER_FILE))
    keys = _committed_keys(log_cluster.bootstrap, topic, 3)
    assert sorted(keys) == list(range(files * ROWS_PER_FILE))
    uncommitted = sum(admin.list_offsets(topic, "latest").values())
    assert uncommitted > files * ROWS_PER_FILE  # the killed attempts' rows are in the log, aborted
    # Spark's sources under read_committed: the Python one, and the JVM one when its jar was built
    from connectors.session import JVM_CLASS, jvm_jar

    for source in ["spark-log"] + ([JVM_CLASS] if jvm_jar() is not None else []):
        read = (spark.read.format(source).option("bootstrap", log_cluster.bootstrap).option("subscribe", topic)
                .option("isolationLevel", "read_committed").load().selectExpr("cast(key as string) as key"))
        assert sorted(int(r.key) for r in read.collect()) == list(range(files * ROWS_PER_FILE)), source
