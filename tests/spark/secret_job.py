"""A Spark job that carries a planted password through every secured path, for the grep of
``test_security.py``.  Run in its own process (its logs are the test's to search):

    PLANTED_USER=u PLANTED_PASSWORD=p python -m tests.spark.secret_job RUN_DIR BOOTSTRAP CA_FILE SOURCE SINK [--leak]

With the password in the Kafka-named options (``kafka.sasl.jaas.config`` for the stream,
``kafka.sasl.password`` for the batch read): a streaming query SOURCE -> SINK
(Trigger.AvailableNow, checkpoint under RUN_DIR/checkpoints), a batch read of SINK (prints
``sink rows: N``), and a query that fails authentication with the password (another user
name), whose error is printed.  Python logging (DEBUG for spark-log's loggers) goes to
RUN_DIR/job.log, Spark's event log to RUN_DIR/events; the caller sends stdout and stderr to
RUN_DIR too.

``--leak`` is the grep's control: it prints the password, logs it, writes it into a
checkpoint-like file and prints an error holding it, without starting Spark.
"""
from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path


def _options(bootstrap: str, ca_file: str, user: str, password: str, *, jaas: bool) -> dict[str, str]:
    options = {"bootstrap": bootstrap, "kafka.security.protocol": "SASL_SSL",
               "kafka.ssl.truststore.location": ca_file, "kafka.sasl.mechanism": "SCRAM-SHA-256"}
    if jaas:
        options["kafka.sasl.jaas.config"] = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                                             f'username="{user}" password="{password}";')
    else:
        options["kafka.sasl.username"], options["kafka.sasl.password"] = user, password
    return options


def _leak(run_dir: Path, password: str) -> None:
    print(f"the password is {password}")
    logging.getLogger("secret_job").error("logging the password %s", password)
    checkpoint = run_dir / "checkpoints" / "leak" / "offsets"
    checkpoint.mkdir(parents=True)
    (checkpoint / "0").write_text('{"options": {"kafka.sasl.password": "%s"}}\n' % password)
    try:
        raise RuntimeError(f"authentication failed with password {password}")
    except RuntimeError:
        traceback.print_exc()


def main(argv: list[str]) -> int:
    run_dir, bootstrap, ca_file, source, sink = Path(argv[0]), argv[1], argv[2], argv[3], argv[4]
    user, password = os.environ["PLANTED_USER"], os.environ["PLANTED_PASSWORD"]
    run_dir.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=run_dir / "job.log", level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ("spark_log", "connectors", "brokers"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    if "--leak" in argv:
        _leak(run_dir, password)
        return 0
    from connectors.session import local_session

    (run_dir / "events").mkdir(exist_ok=True)
    spark = local_session(None, app_name="spark-log-secret-job", connector="python", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "512m",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": str(run_dir / "events"),
        "spark.eventLog.compress": "false",  # the grep reads plain text
        "spark.sql.warehouse.dir": str(run_dir / "warehouse"),
        "spark.sql.streaming.stopTimeout": "10s",
    })
    stream_options = _options(bootstrap, ca_file, user, password, jaas=True)
    query = (spark.readStream.format("spark-log").options(**stream_options)
             .option("subscribe", source).option("startingOffsets", "earliest").load()
             .selectExpr("key", "value")
             .writeStream.format("spark-log").options(**stream_options).option("topic", sink)
             .option("checkpointLocation", str(run_dir / "checkpoints" / "stream"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    batch = _options(bootstrap, ca_file, user, password, jaas=False)
    rows = spark.read.format("spark-log").options(**batch).option("subscribe", sink).load().count()
    print(f"sink rows: {rows}")
    wrong = _options(bootstrap, ca_file, "no-such-user", password, jaas=True)
    try:
        spark.read.format("spark-log").options(**wrong).option("subscribe", sink).load().count()
        print("the wrong user was not refused")
        return 1
    except Exception:  # noqa: BLE001 - printed for the grep, as an application would log it
        traceback.print_exc()
        print("wrong user refused")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
