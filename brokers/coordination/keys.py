"""Which partition of an internal topic holds a key (pure)."""
from __future__ import annotations

import zlib

__all__ = ["partition_for"]


def partition_for(key: str, partitions: int) -> int:
    """The partition of the internal topic holding ``key`` (a group id, a transactional id;
    its coordinator is that partition's leader): CRC-32 of its UTF-8 bytes modulo the
    partition count.  Stable across processes and versions (never Python's salted hash)."""
    return zlib.crc32(key.encode("utf-8")) % partitions
