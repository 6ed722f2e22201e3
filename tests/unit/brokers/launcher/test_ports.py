"""Ports named in advance come from below the kernel's ephemeral range, where no other
socket's port 0 (or outgoing connection) can be handed one before its process binds it."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest

from brokers.launcher import ports


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    span = ports.ephemeral_range()
    assert span is not None and span[0] - 10_000 >= 2_000  # this machine's range leaves room below it
    chosen = ports.unused_ports(12)
    assert len(set(chosen)) == 12
    assert all(10_000 <= p < span[0] for p in chosen)
    assert all(_bindable(p) for p in chosen)


def test_a_port_in_use_is_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = int(taken.getsockname()[1])
    free = ports._kernel_ports(1, "127.0.0.1")[0]
    picks = iter([busy, busy, free])  # the random choices, in turn

    class Picks:
        def randrange(self, low: int, high: int) -> int:
            return next(picks)

    monkeypatch.setattr(ports, "ephemeral_range", lambda: (65_000, 65_535))
    monkeypatch.setattr(ports.random, "SystemRandom", Picks)
    try:
        assert ports.unused_ports(1) == [free]
    finally:
        taken.close()


def test_without_a_readable_range_the_kernel_chooses(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ports, "_RANGE_FILE", tmp_path / "missing")
    assert ports.ephemeral_range() is None
    chosen = ports.unused_ports(3)
    assert len(set(chosen)) == 3 and all(_bindable(p) for p in chosen)
