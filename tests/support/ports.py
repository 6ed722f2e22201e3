"""Free TCP ports on 127.0.0.1 for test processes: ``brokers.launcher.ports`` (outside the
kernel's ephemeral range, so no other socket's port 0 takes one before its process binds it)."""
from __future__ import annotations

from brokers.launcher.ports import unused_port as free_port
from brokers.launcher.ports import unused_ports as free_ports

__all__ = ["free_port", "free_ports"]
