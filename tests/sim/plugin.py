"""pytest plugin for the Raft simulation: ``--sim-seeds N`` and ``--sim-seed S``.

Registered from ``tests/conftest.py`` (``pytest_plugins``) because ``pytest_addoption``
only works in the rootdir conftest or in plugins.  The parametrisation itself lives in
``tests/sim/conftest.py``.
"""
from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sim", "deterministic Raft simulation (tests/sim)")
    group.addoption("--sim-seeds", type=int, default=None, metavar="N",
                    help="run every seeded simulation test with seeds 0..N-1 (default: sized for CI)")
    group.addoption("--sim-seed", type=int, default=None, metavar="S",
                    help="replay one seed of every seeded simulation test")
    group.addoption("--sim-seed-start", type=int, default=0, metavar="S0",
                    help="first seed of the range (sweeps: --sim-seed-start 10000 --sim-seeds 10000)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sim_seeds(n): default number of seeds for a seeded simulation test")
