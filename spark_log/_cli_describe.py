"""How ``spark-log topics describe`` prints partitions: a table for people, JSON for machines.

Table columns: (topic,) partition, leader, leader epoch, replicas, ISR, high watermark, the
log end offset of each replica as the leader knows it (``broker:offset``; ``?`` when that
follower has not fetched since the leader was elected), and a status of
``OFFLINE`` (no leader) and/or ``UNDER-REPLICATED`` (ISR smaller than the replica set).
``-`` marks a live value that is unknown because the leader could not be asked.

JSON (``partition_json``): the ``PartitionDescription`` fields, log end offsets keyed by
broker id as a string (JSON object keys), unknown values as ``null``.
"""
from __future__ import annotations

from typing import Any, Sequence

from ._admin import PartitionDescription, TopicDescription

__all__ = ["partition_table", "partition_json", "topic_json", "status_of"]


def status_of(p: PartitionDescription) -> str:
    return " ".join(word for word, on in (("OFFLINE", p.offline), ("UNDER-REPLICATED", p.under_replicated)) if on)


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids) or "-"


def _leos(p: PartitionDescription) -> str:
    if p.log_end_offsets is None:
        return "-"
    return " ".join(f"{b}:{'?' if o is None else o}" for b, o in p.log_end_offsets.items())


def partition_table(rows: Sequence[tuple[str, PartitionDescription]], *, with_topic: bool) -> list[str]:
    """Aligned lines (header first) for ``(topic, partition)`` rows."""
    header = ["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "HW", "LOG END OFFSETS", "STATUS"]
    cells = [[str(p.partition), "-" if p.leader is None else str(p.leader), str(p.leader_epoch), _ids(p.replicas),
              _ids(p.isr), "-" if p.high_watermark is None else str(p.high_watermark), _leos(p), status_of(p)]
             for _, p in rows]
    if with_topic:
        header = ["TOPIC", *header]
        cells = [[topic, *row] for (topic, _), row in zip(rows, cells)]
    widths = [max(len(r[i]) for r in [header, *cells]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *cells]]


def partition_json(p: PartitionDescription, topic: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"topic": topic} if topic is not None else {}
    out.update({
        "partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
        "replicas": list(p.replicas), "isr": list(p.isr), "high_watermark": p.high_watermark,
        "log_start_offset": p.log_start_offset, "last_stable_offset": p.last_stable_offset,
        "log_end_offsets": None if p.log_end_offsets is None else {str(b): o for b, o in p.log_end_offsets.items()},
        "under_replicated": p.under_replicated, "offline": p.offline,
    })
    return out


def topic_json(d: TopicDescription) -> dict[str, Any]:
    return {
        "name": d.name, "topic_id": d.topic_id, "kind": d.kind, "replication_factor": d.replication_factor,
        "key_columns": list(d.key_columns), "config": dict(sorted(d.config.items())),
        "schema": None if d.schema is None else [{"name": f.name, "type": str(f.type)} for f in d.schema],
        "partitions": [partition_json(p) for _, p in sorted(d.partitions.items())],
    }
