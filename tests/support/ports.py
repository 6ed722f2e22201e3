"""Free TCP ports on 127.0.0.1 for test processes: ``brokers.launcher.ports`` (outside the
kernel's ephemeral range, so no other socket's port 0 takes one before its process binds it)."""
from __future__ import annotations

from brokers.launcher.ports import unused_port, unused_ports


def free_port() -> int:
    return unused_port()


def free_ports(count: int) -> list[int]:
    return unused_ports(count)
