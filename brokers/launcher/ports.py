"""Ports for processes this machine starts and names in advance (a local cluster's quorum
voters, a broker hosted on Spark, a test's server): chosen outside the kernel's ephemeral
range.

A port found by binding port 0 comes from the ephemeral range (Linux:
``net.ipv4.ip_local_port_range``, 32768-60999 by default) and is free only until the finder
closes it.  Before the process it was found for binds it, any other socket on the machine
that binds port 0 or connects out can be handed the same number: a sibling node's metrics
listener took a quorum voter's port this way ("Address already in use"), and that local
cluster never started.  The kernel hands out no port below the range by itself, so
``unused_ports`` picks at random below it (from 10000), keeping the ones it can bind right
now; only a process that binds that very number on purpose can still take one.  Where the
range cannot be read, or leaves too little room below it, the ports come from binding port
0 as before.

Thread-safety: the functions keep no state.
"""
from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["ephemeral_range", "unused_ports", "unused_port"]

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000  # below this: well-known and registered services' usual ports
_MIN_ROOM = 2_000  # fewer candidates than this below the range: use the kernel's choice
_TRIES_PER_PORT = 50


def ephemeral_range() -> tuple[int, int] | None:
    """The kernel's ephemeral port range ``(low, high)``, or None where it cannot be read."""
    try:
        low, high = (int(part) for part in _RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return None
    return low, high


def unused_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that ``host`` can bind now, outside the ephemeral range where
    there is room (module docstring)."""
    span = ephemeral_range()
    if span is None or span[0] - _LOWEST < _MIN_ROOM:
        return _kernel_ports(count, host)
    rng = random.SystemRandom()
    chosen: list[int] = []
    socks: list[socket.socket] = []
    try:
        for _ in range(count * _TRIES_PER_PORT):
            if len(chosen) == count:
                break
            port = rng.randrange(_LOWEST, span[0])
            if port in chosen:
                continue
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((host, port))
            except OSError:
                sock.close()
                continue
            socks.append(sock)
            chosen.append(port)
        missing = count - len(chosen)
        return chosen + (_kernel_ports(missing, host) if missing else [])
    finally:
        for sock in socks:
            sock.close()


def unused_port(host: str = "127.0.0.1") -> int:
    """One port of ``unused_ports``."""
    return unused_ports(1, host)[0]


def _kernel_ports(count: int, host: str) -> list[int]:
    """``count`` ports the kernel hands out for port 0 (held together, so distinct)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            socks.append(sock)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()
