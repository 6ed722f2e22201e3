"""A small bytes-topic batch written straight to its Arrow IPC message, with no Arrow arrays.

Why: a record sent at a moderate rate (one every few hundred microseconds or slower) finds
pyarrow's code cold: in a 2-core VM, building a one-record batch (``bytes_batch``) and
serialising it (``ipc_message``) took 47 us in a loop but 137 us after a 0.5 ms pause and
290 us after 2 ms, on the produce-to-consume latency path of every such record.  The same
message written here with ``struct`` and ``lz4`` costs a fraction of that, warm or cold
(issue 19; ``tests/unit/test_bytes_message.py`` times neither, it checks the bytes).

What: ``encode(keys, values, timestamps, codec)`` returns the encapsulated IPC record-batch
message (``ipc_message``'s output: continuation marker, metadata length, the flatbuffer
metadata, the body) of the batch ``bytes_batch(keys, values, None, timestamps)`` -- the
bytes topics' schema (``BYTES_SCHEMA``: key, value, headers, timestamp) with no headers --
**byte for byte what pyarrow writes** for that batch, or None when it does not apply (more
than ``MAX_RECORDS`` records or ``MAX_BYTES`` bytes of keys and values, an item that is not
``bytes`` or None, a codec other than none and LZ4), and the caller builds it with pyarrow.

How: the metadata's layout depends only on the schema and the codec, not on the data (its
vectors of field nodes and buffers are fixed-size structs, and every scalar it writes is
non-zero for a non-empty batch).  The first call per codec has pyarrow write a one-record
batch and finds, with a minimal flatbuffer reader, where the body length, the record count,
the 7 field nodes and the 17 buffer descriptions sit; every later message is that template
with those values replaced.  Layout rules followed (Arrow's IPC writer): a validity bitmap
only for a column with nulls (all-null keys too: a zeroed bitmap), offsets as int32, every
buffer padded to 8 bytes; with LZ4 each non-empty buffer is its uncompressed length
(int64) followed by one LZ4 frame (no content size, 64 KiB blocks, as Arrow's codec writes).

Thread-safety: pure functions; the template cache is filled once per codec (a race builds
it twice, identically).
"""
from __future__ import annotations

import struct
from array import array
from itertools import accumulate
from typing import Any, Sequence

import lz4.frame  # type: ignore[import-untyped]
import pyarrow as pa

from .arrays import binary_array, timestamp_ms_array
from .frame import Codec, ipc_message
from .schemas import BYTES_SCHEMA, HEADERS_TYPE

__all__ = ["encode", "MAX_RECORDS", "MAX_BYTES"]

MAX_RECORDS = 256  # beyond this pyarrow's vectorised builders win
MAX_BYTES = 1 << 20  # keys and values together; well inside int32 offsets and one LZ4 block chain

_CONTINUATION = b"\xff\xff\xff\xff"
_I64 = struct.Struct("<q")
_PAIR = struct.Struct("<qq")
_NODES = 7  # key, value, headers (list), its struct, the struct's key and value, timestamp
_BUFFERS = 17
_ZERO_PAD = bytes(8)


class _Template:
    """Where the varying values sit in a codec's metadata (module docstring)."""

    __slots__ = ("metadata", "body_length_at", "length_at", "nodes_at", "buffers_at")

    def __init__(self, metadata: bytes, body_length_at: int, length_at: int, nodes_at: int, buffers_at: int) -> None:
        self.metadata = metadata
        self.body_length_at = body_length_at
        self.length_at = length_at
        self.nodes_at = nodes_at
        self.buffers_at = buffers_at


_TEMPLATES: dict[Codec, _Template] = {}


def _u32(buf: bytes, at: int) -> int:
    return int.from_bytes(buf[at: at + 4], "little")


def _fields(buf: bytes, table: int) -> list[int]:
    """A flatbuffer table's field offsets (0: absent), from its vtable."""
    vtable = table - int.from_bytes(buf[table: table + 4], "little", signed=True)
    size = int.from_bytes(buf[vtable: vtable + 2], "little")
    return [int.from_bytes(buf[vtable + 4 + 2 * i: vtable + 6 + 2 * i], "little") for i in range((size - 4) // 2)]


def _template(codec: Codec) -> _Template:
    found = _TEMPLATES.get(codec)
    if found is not None:
        return found
    one = pa.RecordBatch.from_arrays(  # a one-record batch of the layout, written by pyarrow once per codec
        [binary_array([b"k"]), binary_array([b"v"]), pa.nulls(1, HEADERS_TYPE), timestamp_ms_array([1])],
        schema=BYTES_SCHEMA)
    message = ipc_message(one, codec).to_pybytes()
    length = int.from_bytes(message[4:8], "little", signed=True)
    metadata = message[8: 8 + length]
    root = _u32(metadata, 0)
    msg = _fields(metadata, root)  # Message: version, header_type, header, bodyLength
    batch_at = root + msg[2] + _u32(metadata, root + msg[2])
    batch = _fields(metadata, batch_at)  # RecordBatch: length, nodes, buffers, (compression)
    nodes = batch_at + batch[1] + _u32(metadata, batch_at + batch[1])
    buffers = batch_at + batch[2] + _u32(metadata, batch_at + batch[2])
    if _u32(metadata, nodes) != _NODES or _u32(metadata, buffers) != _BUFFERS or not msg[3] or not batch[0]:
        raise AssertionError(f"unexpected Arrow IPC layout for the bytes schema ({codec.name})")
    found = _Template(metadata, root + msg[3], batch_at + batch[0], nodes + 4, buffers + 4)
    _TEMPLATES[codec] = found
    return found


_SMALL = 64  # buffers up to this size repeat (zeroed bitmaps and offsets of absent keys and headers): cached
_COMPRESSED: dict[bytes, bytes] = {}


def _compressed(data: bytes) -> bytes:
    """A buffer as the IPC body holds it with LZ4: its length, then one LZ4 frame."""
    if len(data) > _SMALL:
        return _I64.pack(len(data)) + bytes(lz4.frame.compress(data, store_size=False))
    found = _COMPRESSED.get(data)
    if found is None:
        if len(_COMPRESSED) >= 1024:
            _COMPRESSED.clear()
        found = _COMPRESSED[data] = _I64.pack(len(data)) + bytes(lz4.frame.compress(data, store_size=False))
    return found


def _bitmap(present: Sequence[Any], n: int) -> bytes:
    bits = 0
    for i, item in enumerate(present):
        if item is not None:
            bits |= 1 << i
    return bits.to_bytes((n + 7) // 8, "little")


def _column(items: Sequence[bytes | None], n: int) -> tuple[int, bytes, bytes, bytes] | None:
    """(null count, validity, offsets, data) of a binary column; None for an item that is
    not bytes or None."""
    nulls = 0
    for item in items:
        if type(item) is not bytes:
            if item is not None:
                return None
            nulls += 1
    present: Sequence[bytes] = [b"" if item is None else item for item in items] if nulls else items  # type: ignore[assignment]
    validity = _bitmap(items, n) if nulls else b""
    offsets = array("i", accumulate(map(len, present), initial=0)).tobytes()
    return nulls, validity, offsets, b"".join(present)


def encode(keys: Sequence[bytes | None] | None, values: Sequence[bytes | None], timestamps: Sequence[int],
           codec: Codec) -> bytes | None:
    """The IPC message of ``bytes_batch(keys, values, None, timestamps)`` compressed with
    ``codec``, or None where this writer does not apply (module docstring)."""
    n = len(values)
    if not 0 < n <= MAX_RECORDS or codec not in (Codec.NONE, Codec.LZ4) or len(timestamps) != n:
        return None
    value_column = _column(values, n)
    if value_column is None:
        return None
    key_column: tuple[int, bytes, bytes, bytes] | None
    if keys is None or keys.count(None) == n:
        key_column = (n, bytes((n + 7) // 8), bytes(4 * (n + 1)), b"")
    elif len(keys) != n:
        return None
    else:
        key_column = _column(keys, n)
    if key_column is None:
        return None
    if len(key_column[3]) + len(value_column[3]) > MAX_BYTES:
        return None
    try:
        stamps = array("q", timestamps).tobytes()
    except (TypeError, OverflowError):
        return None
    template = _template(codec)
    empty = b""
    no_headers = bytes((n + 7) // 8)  # every record's headers: null
    buffers = (key_column[1], key_column[2], key_column[3],
               value_column[1], value_column[2], value_column[3],
               no_headers, bytes(4 * (n + 1)),  # the list: validity, offsets (all 0)
               empty,  # its struct child (length 0): no validity
               empty, b"\0\0\0\0", empty,  # the struct's key (string, length 0)
               empty, b"\0\0\0\0", empty,  # the struct's value (binary, length 0)
               empty, stamps)
    metadata = bytearray(template.metadata)
    body: list[bytes] = []
    position = 0
    at = template.buffers_at
    for data in buffers:
        if data and codec == Codec.LZ4:
            data = _compressed(data)
        size = len(data)
        _PAIR.pack_into(metadata, at, position, size)
        at += 16
        if size:
            body.append(data)
            pad = -size % 8
            if pad:
                body.append(_ZERO_PAD[:pad])
            position += size + pad
    at = template.nodes_at
    for length, nulls in ((n, key_column[0]), (n, value_column[0]), (n, n), (0, 0), (0, 0), (0, 0), (n, 0)):
        _PAIR.pack_into(metadata, at, length, nulls)
        at += 16
    _I64.pack_into(metadata, template.length_at, n)
    _I64.pack_into(metadata, template.body_length_at, position)
    return b"".join((_CONTINUATION, len(metadata).to_bytes(4, "little"), metadata, *body))
