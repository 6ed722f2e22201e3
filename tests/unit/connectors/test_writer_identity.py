"""The writer's idempotence key: stable, distinct, and fits the frame header."""
from __future__ import annotations

from connectors.writer import producer_identity


def test_identity_is_stable_and_distinct() -> None:
    assert producer_identity("q", 3, 7) == producer_identity("q", 3, 7)
    ids = {producer_identity(q, p, 7)[0] for q in ("q1", "q2") for p in range(50)}
    assert len(ids) == 100
    assert producer_identity("q", 3, 7)[1] == 7


def test_epoch_fits_16_bits_and_the_id_moves_on_when_it_wraps() -> None:
    pid, epoch = producer_identity("q", 0, 32767)
    pid2, epoch2 = producer_identity("q", 0, 32768)
    assert (epoch, epoch2) == (32767, 0)
    assert pid != pid2
    assert 0 <= pid < 2**63 and 0 <= pid2 < 2**63


def test_identity_is_the_same_in_every_process() -> None:
    """A restarted Spark task runs in another Python worker: the identity must not depend
    on anything per-process (``hash()`` of a str is salted by PYTHONHASHSEED)."""
    import os
    import subprocess
    import sys

    script = "from connectors.writer import producer_identity; print(producer_identity('q', 3, 7))"
    seed = "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"   # a salt unlike this process's
    env = dict(os.environ, PYTHONHASHSEED=seed)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                          check=True)
    assert done.stdout.strip() == str(producer_identity("q", 3, 7))
