"""The records of ``__transaction_state``: key ``["txn", id]``, value the whole ``TxnMeta``
as compact JSON (a null value: the id expired).  One frame per coordinator decision."""
from __future__ import annotations

import json
from typing import Any, Sequence

from spark_log.errors import CorruptRecordError
from brokers.groups.records import rows_frame

from .model import GroupOffset, Participant, TxnMeta, TxnState

__all__ = ["encode", "decode", "to_frame"]

_VERSION = 1


def _key(transactional_id: str) -> bytes:
    return json.dumps(["txn", transactional_id], separators=(",", ":")).encode()


def encode(meta: TxnMeta) -> tuple[bytes, bytes]:
    value = {"v": _VERSION, "pid": meta.producer_id, "epoch": meta.producer_epoch, "timeout": meta.timeout_ms,
             "state": meta.state.value, "label": meta.label, "committed": meta.committed_label,
             "parts": [[p.producer_id, p.epoch, sorted([t, i] for t, i in p.partitions)] for p in meta.participants],
             "commit": sorted(meta.commit_pids),
             "offsets": [[o.group_id, o.topic, o.partition, o.offset, o.metadata] for o in meta.offsets],
             "started": meta.started_ms, "prev": meta.prev_epoch, "timed_out": meta.timed_out,
             "updated": meta.updated_ms, "run": meta.run, "prev_pid": meta.prev_producer_id}
    return _key(meta.transactional_id), json.dumps(value, separators=(",", ":")).encode()


def decode(key: bytes, value: bytes | None) -> tuple[str, TxnMeta | None]:
    try:
        kind, transactional_id = json.loads(key)
        if kind != "txn" or not isinstance(transactional_id, str):
            raise ValueError(f"unknown key {key!r}")
        if value is None:
            return transactional_id, None
        v: dict[str, Any] = json.loads(value)
        if v.get("v") != _VERSION:
            raise ValueError(f"unknown record version {v.get('v')!r}")
        return transactional_id, TxnMeta(
            transactional_id=transactional_id, producer_id=int(v["pid"]), producer_epoch=int(v["epoch"]),
            timeout_ms=int(v["timeout"]), state=TxnState(v["state"]), label=int(v["label"]),
            committed_label=int(v["committed"]),
            participants=tuple(Participant(int(pid), int(epoch), frozenset((str(t), int(i)) for t, i in parts))
                               for pid, epoch, parts in v["parts"]),
            commit_pids=frozenset(int(x) for x in v["commit"]),
            offsets=tuple(GroupOffset(str(g), str(t), int(p), int(o), str(m)) for g, t, p, o, m in v["offsets"]),
            started_ms=int(v["started"]), prev_epoch=int(v["prev"]), timed_out=bool(v["timed_out"]),
            updated_ms=int(v["updated"]), run=str(v.get("run", "")), prev_producer_id=int(v.get("prev_pid", -1)))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecordError(f"a {key!r} record of __transaction_state cannot be read: {exc}") from None


def to_frame(metas: Sequence[TxnMeta], *, timestamp_ms: int) -> bytes:
    return rows_frame([encode(m) for m in metas], timestamp_ms=timestamp_ms)
