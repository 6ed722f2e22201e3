"""A broker whose disk is full answers STORAGE_ERROR, logs it and counts it (issue 18:
before, it answered and wrote nothing to its log).  One in-process node (broker and
controller); the partition's segment file refuses writes with ENOSPC through the storage
file layer (``brokers.log.files``), everything else (the metadata log) writes as usual."""
from __future__ import annotations

import errno
import logging
import os
import urllib.request
from pathlib import Path
from typing import Sequence

import pytest

from brokers.log import files
from brokers.node import Node
from brokers.server import register
from spark_log import Admin, Producer
from spark_log.config import BrokerConfig, RaftConfig
from spark_log.errors import StorageError
from tests.support.metrics import scrape, value
from tests.support.wait import wait_until


class FullDisk(files.OsFiles):
    """Writes to files under ``directory`` fail with ENOSPC (a full disk)."""

    def __init__(self, directory: Path) -> None:
        self.directory = str(directory)

    def _full(self, fd: int) -> bool:
        return os.readlink(f"/proc/self/fd/{fd}").startswith(self.directory)

    def pwrite(self, fd: int, data: files.Buffer, position: int) -> int:
        if self._full(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().pwrite(fd, data, position)

    def pwritev(self, fd: int, buffers: Sequence[files.Buffer], position: int) -> int:
        if self._full(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().pwritev(fd, buffers, position)


def test_a_full_disk_is_answered_logged_and_counted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = BrokerConfig(broker_id=1, data_dir=str(tmp_path / "n1"), raft=RaftConfig(tick_ms=10, election_ticks=5, fetch_wait_ticks=2),
                          heartbeat_interval_ms=100, session_timeout_ms=1000)
    node = Node(config, registrars=[register])
    node.start()
    previous = files.current()
    try:
        url = f"http://127.0.0.1:{node.metrics.port}/metrics"
        assert int((tmp_path / "n1" / "metrics.port").read_text()) == node.metrics.port

        def serving() -> bool:  # registered, unfenced and caught up with the metadata log
            floor, image = node.metadata_floor(), node.metadata.image
            return floor is not None and image.offset >= floor and 1 in image.brokers and not image.brokers[1].fenced

        wait_until(serving, timeout=20, message="the broker does not serve")
        with Admin(node.address) as admin:
            admin.create_topic("full", partitions=1, replication_factor=1)
        with Producer(node.address, linger_ms=0) as producer:
            producer.send("full", b"fits").result(timeout=20)
            files.use(FullDisk(tmp_path / "n1" / "full-0"))
            caplog.set_level(logging.ERROR, logger="brokers.metrics.counters")
            with pytest.raises(StorageError):
                producer.send("full", b"does not fit").result(timeout=20)
        assert value(scrape(url), "spark_log_storage_errors_total", operation="produce") >= 1
        logged = [r.getMessage() for r in caplog.records if "storage error" in r.getMessage()]
        assert logged and "full-0" in logged[0] and "No space left on device" in logged[0], logged
        with urllib.request.urlopen(url) as answer:  # the records that fit are counted, the refused one is not
            text = answer.read().decode()
        assert 'spark_log_topic_records_in_total{topic="full"} 1.0' in text
    finally:
        files.use(previous)
        node.stop()
    assert not (tmp_path / "n1" / "metrics.port").exists()
