"""Small checkpoint files written atomically (recovery point, log start, epoch cache).

Text layout, as Kafka's checkpoint files:

    <version>\\n
    <number of lines that follow>\\n
    <line>\\n ...

A write is ``durable.atomic_write`` (``<name>.tmp``, fsync, rename over ``<name>``, fsync of
the directory), so a reader sees the old or the new content, never a mix.  ``read_lines``
returns None for a missing file and raises ``ValueError`` for one that does not parse
(callers treat that as "no checkpoint" and recover more).

Thread-safety: none; caller holds the partition lock.
"""
from __future__ import annotations

from pathlib import Path

from .durable import atomic_write

__all__ = ["write_lines", "read_lines", "write_offset", "read_offset"]

VERSION = 0


def write_lines(path: Path, lines: list[str]) -> None:
    """Durably replace ``path`` by the header and ``lines`` (ASCII, no newlines inside)."""
    text = f"{VERSION}\n{len(lines)}\n" + "".join(f"{line}\n" for line in lines)
    atomic_write(path, text.encode("ascii"))


def read_lines(path: Path) -> list[str] | None:
    try:
        text = path.read_text("ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path.name}: unreadable: {exc}") from None
    if not text.endswith("\n"):
        raise ValueError(f"{path.name}: truncated")
    parts = text.split("\n")[:-1]
    if len(parts) < 2 or parts[0] != str(VERSION) or not parts[1].isdigit():
        raise ValueError(f"{path.name}: bad header")
    count = int(parts[1])
    if len(parts) != count + 2:
        raise ValueError(f"{path.name}: expected {count} lines, found {len(parts) - 2}")
    return parts[2:]


def write_offset(path: Path, offset: int) -> None:
    write_lines(path, [str(offset)])


def read_offset(path: Path) -> int | None:
    """The offset in ``path``; None if missing; ``ValueError`` if it does not parse."""
    lines = read_lines(path)
    if lines is None:
        return None
    if len(lines) != 1 or not lines[0].isdigit():
        raise ValueError(f"{path.name}: not an offset")
    return int(lines[0])
