"""Producer bookkeeping without I/O: open batches, shipments, row routing and framing.

``split_rows`` routes the rows of an Arrow table to partitions without a per-row Python
loop (explicit ``partition`` column, else the key hash, else the sticky partition) and
``cut_frames`` slices each partition's rows into frames of about ``target_bytes``, in input
order; both are deterministic for the same input (idempotent replays rely on it).
"""
from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import pyarrow as pa

from .arrays import to_numpy
from ._client import TopicInfo
from ._futures import FutureGroup
from ._partitioner import key_array, partitions_for_keys
from .errors import SchemaMismatchError, UnknownTopicOrPartitionError

__all__ = ["OpenBatch", "Shipment", "check_headers", "split_rows", "cut_frames"]


@dataclass(slots=True)
class OpenBatch:
    """Records of one partition waiting to ship (from ``send``), as column lists.

    ``keys`` and ``headers`` stay None while every record so far has none (the common
    case costs one append per record for the value and one for the timestamp)."""

    created: float
    address: str | None = None  # its leader when it was opened (None: unknown, ships by linger)
    keys: list[bytes | None] | None = None
    values: list[Any] = field(default_factory=list)
    headers: list[Any] | None = None
    timestamps: list[int] = field(default_factory=list)
    size: int = 0
    sticky: bool = False
    seq: int = -1  # first sequence, reserved when the batch is closed (under the producer lock)
    pid: int = -1  # the producer id the sequence was reserved under
    group: FutureGroup = field(default_factory=FutureGroup)
    attempts: int = 0  # times it was put back after a retriable error on the way to the wire


@dataclass(slots=True)
class Shipment:
    """One frame on its way to one partition; retried as is (same sequence)."""

    topic: str
    partition: int
    frame: bytes
    count: int
    deadline: float
    done: FutureGroup | Future  # type: ignore[type-arg]
    seq: int = 0  # issue order, for retries
    attempts: int = 0
    maybe_written: bool = False  # some attempt may have appended it (see Producer._failed)
    pid: int = -1  # the producer id its frame carries
    first_seq: int = -1  # and the sequence of its first record

    def resolve(self, base_offset: int) -> None:
        partition = self.partition
        if isinstance(self.done, FutureGroup):
            self.done.resolve(lambda i: (partition, base_offset + i if base_offset >= 0 else -1))
        elif not self.done.done():
            self.done.set_result((partition, base_offset))

    def fail(self, exc: BaseException) -> None:
        if isinstance(self.done, FutureGroup):
            self.done.fail(exc)
        elif not self.done.done():
            self.done.set_exception(exc)


def check_headers(headers: Any) -> list[tuple[str, bytes]]:
    """Headers as ``[(str, bytes)]``; ``SchemaMismatchError`` for anything else."""
    try:
        items = headers.items() if isinstance(headers, Mapping) else headers
        out = []
        for name, value in items:
            if isinstance(value, str):
                value = value.encode()
            if not isinstance(name, str) or not isinstance(value, (bytes, bytearray)):
                raise TypeError
            out.append((name, bytes(value)))
        return out
    except (TypeError, ValueError):
        raise SchemaMismatchError("headers must be a mapping or pairs of str -> bytes/str") from None


def split_rows(topic: str, info: TopicInfo, table: pa.Table, routing: Any,
               sticky_next: Callable[[], int]) -> list[tuple[int, pa.Table]]:
    """``[(partition, rows)]`` for ``table``: by the ``routing`` (partition) column if given,
    else by key hash; rows without either go to ``sticky_next()``."""
    n = info.num_partitions
    if routing is not None:
        parts = np.asarray(to_numpy(routing), dtype=np.float64)
        missing = np.isnan(parts)
        parts = np.where(missing, -1, parts).astype(np.int64)
        bad = parts[(~missing) & ((parts < 0) | (parts >= n))]
        if bad.size:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {int(bad[0])} (it has {n})")
        has_key = ~missing
    else:
        key_columns = ["key"] if info.kind == "bytes" else list(info.key_columns)
        if not key_columns:
            return [(sticky_next(), table)]
        keys, has_key = key_array(table, key_columns)
        if not has_key.any():
            return [(sticky_next(), table)]
        parts = partitions_for_keys(keys, n).astype(np.int64)
    if not has_key.all():
        parts = np.where(has_key, parts, sticky_next())
    if n == 1 or (parts == parts[0]).all():
        return [(int(parts[0]), table)]
    order = np.argsort(parts, kind="stable")
    sorted_parts = parts[order]
    bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [len(order)]])
    taken = table.take(order)
    return [(int(sorted_parts[s]), taken.slice(int(s), int(e - s))) for s, e in zip(starts, ends)]


def cut_frames(table: pa.Table, schema_id: int, target_bytes: int) -> list[tuple[pa.RecordBatch, int]]:
    """Consecutive slices of about ``target_bytes`` each, as ``(batch, schema_id)``."""
    rows_per_frame = max(1, int(target_bytes * table.num_rows / max(1, table.nbytes)))
    out = []
    for start in range(0, table.num_rows, rows_per_frame):
        chunk = table.slice(start, rows_per_frame).combine_chunks()
        for batch in chunk.to_batches():
            out.append((batch, schema_id))
    return out
