"""Suite-wide fixtures: a clean environment, loopback only."""
from __future__ import annotations

import os

import pytest

pytest_plugins = ["tests.sim.plugin"]

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees a bootstrap or data dir from the developer's shell."""
    for name in ("SPARK_LOG_BOOTSTRAP", "SPARK_LOG_DATA_DIR", "SPARK_LOG_CLIENT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
