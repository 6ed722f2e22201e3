"""A file-backed stand-in for spark_log's Admin/Consumer/Producer, for connector tests
that must run without broker processes (selected with SPARK_LOG_CONNECTOR_CLIENTS).

The log lives under ``$SPARK_LOG_FAKE_DIR``: ``<topic>/meta.json`` and one Arrow IPC file
per appended frame, ``<topic>/<partition>/<base_offset>.arrow``; a per-partition lock
file serialises appends across processes.  Idempotence mirrors the brokers': per
producer id the epoch and the next sequence; a frame whose sequences were appended is
acknowledged without appending; a lower epoch is fenced.
"""
from __future__ import annotations

import fcntl
import json
import os
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from spark_log.errors import FencedEpochError, OffsetOutOfRangeError, UnknownTopicOrPartitionError

HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
BYTES_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("headers", HEADERS), ("timestamp", pa.timestamp("ms"))])


def _root() -> Path:
    return Path(os.environ["SPARK_LOG_FAKE_DIR"])


def _meta(topic: str) -> dict[str, Any]:
    path = _root() / topic / "meta.json"
    if not path.exists():
        raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
    return json.loads(path.read_text())


def _schema(meta: dict[str, Any]) -> pa.Schema | None:
    if meta["kind"] == "bytes":
        return BYTES_SCHEMA
    if not meta.get("schema"):
        return None
    return pa.ipc.read_schema(pa.py_buffer(bytes.fromhex(meta["schema"])))


def _frames(topic: str, partition: int) -> list[tuple[int, Path]]:
    d = _root() / topic / str(partition)
    return sorted((int(p.stem), p) for p in d.glob("*.arrow"))


def _end(topic: str, partition: int) -> int:
    frames = _frames(topic, partition)
    if not frames:
        return int(_meta(topic).get("start", {}).get(str(partition), 0))
    base, path = frames[-1]
    with pa.memory_map(str(path)) as source:
        return base + pa.ipc.open_file(source).read_all().num_rows


class Admin:
    def __init__(self, bootstrap: Any = None, **_: Any) -> None:
        pass

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1, schema: pa.Schema | None = None,
                     key_columns: Any = None, config: Any = None) -> None:
        d = _root() / name
        d.mkdir(parents=True)
        for p in range(partitions):
            (d / str(p)).mkdir()
        meta = {"kind": "typed" if schema is not None else "bytes", "partitions": partitions,
                "schema": schema.serialize().to_pybytes().hex() if schema is not None else "",
                "key_columns": list(key_columns or ()), "config": {k: str(v) for k, v in (config or {}).items()}}
        (d / "meta.json").write_text(json.dumps(meta))

    def list_topics(self) -> list[str]:
        return sorted(p.name for p in _root().iterdir() if (p / "meta.json").exists())

    def describe_topic(self, name: str) -> Any:
        meta = _meta(name)
        return SimpleNamespace(name=name, kind=meta["kind"], num_partitions=meta["partitions"], schema=_schema(meta),
                               key_columns=tuple(meta["key_columns"]), config=meta["config"])

    def register_schema(self, name: str, schema: pa.Schema) -> int:
        meta = _meta(name)
        meta["kind"], meta["schema"] = "typed", schema.serialize().to_pybytes().hex()
        (_root() / name / "meta.json").write_text(json.dumps(meta))
        return 1

    def list_offsets(self, topic: str, spec: Any = "latest", *, isolation_level: str = "read_uncommitted") -> dict[int, int]:
        meta = _meta(topic)
        out = {}
        for p in range(meta["partitions"]):
            if spec == "earliest":
                frames = _frames(topic, p)
                out[p] = frames[0][0] if frames else _end(topic, p)
            elif spec == "latest":
                out[p] = _end(topic, p)
            else:
                out[p] = _end(topic, p)
                for base, path in _frames(topic, p):
                    batch = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
                    hits = pc.indices_nonzero(pc.greater_equal(batch.column("timestamp").cast(pa.int64()), int(spec)))
                    if len(hits):
                        out[p] = base + hits[0].as_py()
                        break
        return out

    def delete_records(self, topic: str, partition: int, before: int) -> None:
        for base, path in _frames(topic, partition):
            if base < before:
                path.unlink()

    def close(self) -> None:
        pass


class Consumer:
    def __init__(self, bootstrap: Any = None, *, columns: Any = None, row_filter: Any = None, auto_offset_reset: str = "latest", **_: Any) -> None:
        self._columns = columns
        self._filter = row_filter
        self._positions: dict[tuple[str, int], int] = {}

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def assign(self, tps: Iterable[tuple[str, int]]) -> None:
        self._positions = {(t, p): 0 for t, p in tps}

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._positions[(topic, partition)] = offset

    def seek_to_beginning(self, tps: Iterable[tuple[str, int]]) -> None:
        for t, p in tps:
            frames = _frames(t, p)
            self._positions[(t, p)] = frames[0][0] if frames else _end(t, p)

    def position(self, topic: str, partition: int) -> int:
        return self._positions[(topic, partition)]

    def poll_arrow(self, timeout: float = 1.0) -> list[pa.RecordBatch]:
        out = []
        for (t, p), pos in list(self._positions.items()):
            frames = _frames(t, p)
            if frames and pos < frames[0][0]:
                raise OffsetOutOfRangeError(f"{t}-{p}: {pos} < log start {frames[0][0]}")
            for base, path in frames:
                table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
                if base + table.num_rows <= pos:
                    continue
                table = table.slice(pos - base)
                n = table.num_rows
                offsets = pa.array(range(pos, pos + n), pa.int64())
                data = table if self._columns is None else table.select([c for c in self._columns])
                names = list(data.column_names)
                arrays = [data.column(c) for c in names]
                if "timestamp" not in names:
                    names.append("timestamp")
                    arrays.append(table.column("timestamp") if "timestamp" in table.column_names else pa.array([0] * n, pa.timestamp("ms")))
                full = pa.Table.from_arrays(arrays + [pa.array([t] * n), pa.array([p] * n, pa.int32()), offsets],
                                            names=names + ["topic", "partition", "offset"])
                if self._filter is not None:
                    full = full.filter(self._filter)
                out.extend(full.combine_chunks().to_batches())
                self._positions[(t, p)] = pos + n
                break
        return out

    def close(self) -> None:
        pass


class Producer:
    def __init__(self, bootstrap: Any = None, *, producer_id: int | None = None, producer_epoch: int = 0, **_: Any) -> None:
        self._pid = producer_id if producer_id is not None else int.from_bytes(os.urandom(7), "big")
        self._epoch = producer_epoch
        self._seq: dict[tuple[str, int], int] = {}

    def send_batch(self, topic: str, data: pa.RecordBatch, partition: int | None = None) -> list[Future]:
        meta = _meta(topic)
        schema = _schema(meta)
        table = pa.Table.from_batches([data])
        if meta["kind"] == "bytes":
            n = table.num_rows
            cols = {}
            for f in BYTES_SCHEMA:
                if f.name in table.column_names:
                    cols[f.name] = table.column(f.name).cast(f.type)
                elif f.name == "timestamp":
                    cols[f.name] = pa.array([1_700_000_000_000] * n, pa.timestamp("ms"))
                else:
                    cols[f.name] = pa.nulls(n, f.type)
            table = pa.Table.from_pydict(cols, schema=BYTES_SCHEMA)
        else:
            table = table.select(schema.names).cast(schema)
        part = partition or 0
        seq = self._seq.get((topic, part), 0)
        self._seq[(topic, part)] = seq + table.num_rows
        future: Future = Future()
        d = _root() / topic / str(part)
        with open(d / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state_path = d / f".producer-{self._pid}.json"
            state = json.loads(state_path.read_text()) if state_path.exists() else {"epoch": -1, "next": 0}
            if self._epoch < state["epoch"]:
                raise FencedEpochError(f"producer {self._pid} epoch {self._epoch} < {state['epoch']}")
            if self._epoch > state["epoch"]:
                state = {"epoch": self._epoch, "next": 0}
            if seq + table.num_rows <= state["next"]:
                future.set_result((part, -1))  # duplicate
                return [future]
            base = _end(topic, part)
            with pa.OSFile(str(d / f"{base:020d}.arrow"), "wb") as sink:
                with pa.ipc.new_file(sink, table.schema) as writer:
                    writer.write_table(table)
            state["next"] = seq + table.num_rows
            state_path.write_text(json.dumps(state))
        future.set_result((part, base))
        return [future]

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float | None = None) -> None:
        pass


def _delete_topic(self: Admin, name: str) -> None:
    import shutil

    shutil.rmtree(_root() / name)


Admin.delete_topic = _delete_topic  # type: ignore[attr-defined]
