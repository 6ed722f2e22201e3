"""Seeds for the simulation tests: ``seed`` is parametrised and shows in the test id.

Default: each test's ``@pytest.mark.sim_seeds(n)``; ``--sim-seeds N`` overrides the
count, ``--sim-seed S`` replays a single seed (options: ``tests/sim/plugin.py``).
"""
from __future__ import annotations

import pytest


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "seed" not in metafunc.fixturenames:
        return
    config = metafunc.config
    one = config.getoption("--sim-seed")
    if one is not None:
        seeds = [one]
    else:
        marker = metafunc.definition.get_closest_marker("sim_seeds")
        count = config.getoption("--sim-seeds")
        if count is None:
            count = int(marker.args[0]) if marker else 50
        start = config.getoption("--sim-seed-start")
        seeds = list(range(start, start + count))
    metafunc.parametrize("seed", seeds, ids=[f"seed={s}" for s in seeds])


@pytest.fixture
def replay(request: pytest.FixtureRequest, seed: int) -> str:
    """The one-line command that replays this test with this seed."""
    from .nemesis import replay_command

    return replay_command(request.node.nodeid, seed)
