"""``REPLICA_FETCH``'s layout on the data listener, the one place both ends take it from: the
follower (``data_fetch.py``) and the leader (``brokers/server/replica_listener.py``, whose
module docstring spells the fields out).

Every integer little-endian.  A request is ``FETCH_HEAD`` then per partition a topic name
(``i32`` length and UTF-8), in the ``_V2`` requests (``REPLICA_FETCH_V2``,
``REPLICA_FETCH_SESSION_V2``) the topic id (the same coding), and ``WANTED``; an answer is
an ``i32`` count then per partition a topic name and either ``PART`` (no error: code 0,
empty message and leader address) or the code, message and leader address one by one
followed by ``OFFSETS``, then the frames.
Topic names (and ids) repeat once per partition on the wire, so both ends decode
(``read_name``) and encode each distinct name once per message.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = ["ReplicaWanted", "FETCH_HEAD", "WANTED", "OFFSETS", "PART", "I16", "I32", "read_name", "name_bytes"]

I16, I32 = struct.Struct("<h"), struct.Struct("<i")
FETCH_HEAD = struct.Struct("<iiiii")  # replica id, max wait ms, min bytes, max bytes, partitions
WANTED = struct.Struct("<iqiiqi")  # partition, fetch offset, leader epoch, last fetched epoch, log start, max bytes
OFFSETS = struct.Struct("<qqqqqiqi")  # hw, lso, log start, leo, next offset, diverging epoch and end, frames length
PART = struct.Struct("<ihii" + OFFSETS.format[1:])  # partition, code, message length, leader length, OFFSETS


class ReplicaWanted(NamedTuple):
    """One partition of a follower fetch, as both wires (and the gRPC ``FetchPartition``)
    carry it; ``partition_max_bytes`` 0: no limit of its own.  ``topic_id``: the follower's
    replica's (KIP-516); the leader answers ``INCONSISTENT_TOPIC_ID`` when its replica of the
    partition has another one (the topic was deleted and created again under the same name);
    empty (an older follower, the ``REPLICA_FETCH`` and ``REPLICA_FETCH_SESSION`` requests):
    not checked."""

    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int = 0
    topic_id: str = ""


def read_name(data: memoryview, at: int, names: dict[bytes, str]) -> tuple[str, int]:
    """The string (a topic name, an error message) at ``at`` and the position after it, decoded once per distinct one
    (``names`` keeps them for one message).  ``ValueError`` (``UnicodeDecodeError`` among them)
    for a length that runs past ``data`` or bytes that are not UTF-8; ``struct.error`` when
    not even the length is there."""
    (size,) = I32.unpack_from(data, at)
    if size < 0 or at + 4 + size > len(data):
        raise ValueError(f"a name of {size} bytes at {at} runs past the message")
    raw = bytes(data[at + 4: at + 4 + size])
    name = names.get(raw)
    if name is None:
        name = names[raw] = raw.decode("utf-8")
    return name, at + 4 + size


def name_bytes(name: str, names: dict[str, bytes]) -> bytes:
    """``name`` as the wire carries it (length and UTF-8), encoded once per message."""
    encoded = names.get(name)
    if encoded is None:
        raw = name.encode("utf-8")
        encoded = names[name] = I32.pack(len(raw)) + raw
    return encoded
