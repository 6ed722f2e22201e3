"""The Spark-free parts of ``jobs.spark_cluster``: files and identity, the hosting task's
checks, the child supervisor (restarts, give-up, death with its parent), option parsing."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from jobs.spark_cluster.__main__ import _pairs, _strip_option
from jobs.spark_cluster.application import HostingConfig, _reason
from jobs.spark_cluster.broker_host import BrokerSpec, _identity, _lock, write_node_config
from jobs.spark_cluster.layout import BrokerMeta, ClusterState
from jobs.spark_cluster.supervisor import ChildFailedError, Supervisor
from spark_log.config import BrokerConfig, load_toml
from tests.support.wait import wait_until

REPO = Path(__file__).resolve().parents[3]


def _spec(tmp_path: Path, **overrides: object) -> BrokerSpec:
    values: dict[str, object] = dict(cluster_id="c1", broker_id=2, data_root=str(tmp_path),
                                     voters=("1001@127.0.0.1:9093",))
    values.update(overrides)
    return BrokerSpec(**values)  # type: ignore[arg-type]


def test_identity_is_written_once_then_kept(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    first = _identity(spec, tmp_path / "broker-2", "127.0.0.1")
    again = _identity(spec, tmp_path / "broker-2", "127.0.0.1")
    assert first == again == BrokerMeta.load(tmp_path / "broker-2")
    assert first.broker_id == 2 and first.port > 0


def test_a_directory_of_another_cluster_or_broker_is_refused(tmp_path: Path) -> None:
    _identity(_spec(tmp_path), tmp_path / "broker-2", "127.0.0.1")
    with pytest.raises(ValueError, match="refusing to reuse it"):
        _identity(_spec(tmp_path, cluster_id="c2"), tmp_path / "broker-2", "127.0.0.1")
    with pytest.raises(ValueError, match="refusing to reuse it"):
        _identity(_spec(tmp_path, broker_id=3), tmp_path / "broker-2", "127.0.0.1")


def test_a_known_broker_is_not_started_empty_on_another_host(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="data lives on 10.0.0.1"):
        _identity(_spec(tmp_path, home_host="10.0.0.1"), tmp_path / "broker-2", "10.0.0.2")
    kept = _identity(_spec(tmp_path, home_host="10.0.0.2", port=9092), tmp_path / "broker-2", "10.0.0.2")
    assert (kept.host, kept.port) == ("10.0.0.2", 9092)


def test_node_config_is_a_valid_broker_only_config(tmp_path: Path) -> None:
    spec = _spec(tmp_path, config={"session_timeout_ms": 3000, "raft": {"tick_ms": 20}})
    meta = _identity(spec, tmp_path / "broker-2", "127.0.0.1")
    config = load_toml(BrokerConfig, write_node_config(spec, tmp_path / "broker-2", meta))
    assert config.broker_id == 2 and config.port == meta.port and config.process_roles == ("broker",)
    assert config.voters() == {1001: "127.0.0.1:9093"} and config.session_timeout_ms == 3000
    assert config.raft.tick_ms == 20


def test_one_host_at_a_time_holds_a_broker_directory(tmp_path: Path) -> None:
    fd = _lock(tmp_path / "broker-2", timeout_s=1)
    try:
        with pytest.raises(TimeoutError, match="still locked"):
            _lock(tmp_path / "broker-2", timeout_s=0.3)
    finally:
        os.close(fd)
    os.close(_lock(tmp_path / "broker-2", timeout_s=1))


def test_cluster_state_round_trips(tmp_path: Path) -> None:
    state = ClusterState(cluster_id="c", brokers=3, voters=["1001@h:1", "1002@h:2"], app_pid=7, state="ready")
    state.save(tmp_path)
    assert ClusterState.load(tmp_path) == state and state.voter_addresses() == ["h:1", "h:2"]
    assert ClusterState.load(tmp_path / "absent") is None


def test_hosting_config_is_validated() -> None:
    with pytest.raises(ValueError, match="data_dir"):
        HostingConfig(master="local[2]", brokers=1, data_dir="relative")
    with pytest.raises(ValueError, match="brokers"):
        HostingConfig(master="local[2]", brokers=0, data_dir="/abs")
    with pytest.raises(ValueError, match="controllers"):
        HostingConfig(master="local[2]", brokers=1, data_dir="/abs", controllers=0)


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO))


def test_supervisor_restarts_a_dying_child_then_gives_up(tmp_path: Path) -> None:
    supervisor = Supervisor([sys.executable, "-c", "import sys; sys.exit(3)"], log_path=tmp_path / "child.log",
                            env=_env(), max_restarts=2, restart_backoff_s=0.01)
    with pytest.raises(ChildFailedError, match="exited 3 times"):
        supervisor.run(threading.Event())
    assert supervisor.restarts == 2


def test_supervisor_stops_its_child_on_request(tmp_path: Path) -> None:
    supervisor = Supervisor([sys.executable, "-c", "import time; time.sleep(120)"], log_path=tmp_path / "child.log",
                            env=_env(), stop_timeout_s=5)
    stop = threading.Event()
    thread = threading.Thread(target=supervisor.run, args=(stop,))
    thread.start()
    try:
        pid = wait_until(lambda: supervisor.pid, timeout=30, message="child not started")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive() and supervisor.pid is None
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_supervisor_kills_a_child_that_ignores_sigterm_within_its_bound(tmp_path: Path) -> None:
    """The Spark-hosted supervisor's stop is bounded whatever the child does: SIGTERM, then
    SIGKILL after ``stop_timeout_s`` (the child here ignores SIGTERM)."""
    ignore = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"
    supervisor = Supervisor([sys.executable, "-c", ignore], log_path=tmp_path / "child.log", env=_env(),
                            stop_timeout_s=0.5)
    stop = threading.Event()
    thread = threading.Thread(target=supervisor.run, args=(stop,))
    thread.start()
    try:
        pid = wait_until(lambda: supervisor.pid if "ready" in _read(tmp_path / "child.log") else None, timeout=30,
                         message="child not started")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive() and supervisor.pid is None
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


PARENT = """
import sys, threading
from pathlib import Path
from jobs.spark_cluster.supervisor import Supervisor
s = Supervisor([sys.executable, "-c", "import time; time.sleep(120)"], log_path=Path(sys.argv[1]),
               on_start=lambda pid: print(pid, flush=True))
s.run(threading.Event())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_the_child_dies_with_its_parent(tmp_path: Path) -> None:
    """What ties a broker to its Spark task: kill -9 the parent, the child gets SIGTERM."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "child.log")], env=_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        wait_until(lambda: "time.sleep" in Path(f"/proc/{child}/cmdline").read_text(errors="replace"),
                   timeout=30, message="child did not exec")
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)

        def gone() -> bool:
            try:
                return Path(f"/proc/{child}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
            except FileNotFoundError:
                return True

        wait_until(gone, timeout=30, message="the child outlived its parent")
    finally:
        parent.kill()
        parent.wait(timeout=10)


def test_option_helpers() -> None:
    assert _pairs(["a=1", "b=x", "c=[\"y\"]"], "--conf") == {"a": 1, "b": "x", "c": ["y"]}
    with pytest.raises(ValueError, match="key=value"):
        _pairs(["novalue"], "--conf")
    args = ["--master", "m", "--data-dir", "/d", "--timeout=5", "--brokers", "2"]
    assert _strip_option(_strip_option(args, "--data-dir"), "--timeout") == ["--master", "m", "--brokers", "2"]
    error = Exception("An exception was thrown from the Python worker:\nTraceback...\nValueError: boom\n")
    assert _reason(error) == "ValueError: boom"
