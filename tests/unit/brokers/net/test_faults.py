"""The follower fetch fault hook: per-broker spec, re-read on change, off by default."""
from __future__ import annotations

import json
import os

from brokers.net.faults import ENV_VAR, FetchFaults


def test_off_by_default(monkeypatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    faults = FetchFaults.from_env(1)
    faults.refresh()
    assert faults.delay_ms == 0 and not faults.blocked(2)


def test_per_broker_spec_reread_when_changed(tmp_path, monkeypatch) -> None:
    path = tmp_path / "faults.json"
    monkeypatch.setenv(ENV_VAR, str(path))
    faults = FetchFaults.from_env(3)
    path.write_text(json.dumps({"3": {"delay_ms": 250, "blocked": [1]}, "2": {"delay_ms": 9}}))
    faults.refresh()
    assert faults.delay_ms == 250 and faults.blocked(1) and not faults.blocked(2)
    path.write_text(json.dumps({}))
    os.utime(path, ns=(1, 1))
    faults.refresh()
    assert faults.delay_ms == 0 and not faults.blocked(1)
    path.write_text("not json")
    os.utime(path, ns=(2, 2))
    faults.refresh()
    assert faults.delay_ms == 0
    path.unlink()
    faults.refresh()
    assert not faults.blocked(1)
