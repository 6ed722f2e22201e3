"""Fault injection on the follower fetch path (tests only; off by default).

``FetchFaults.from_env(broker_id)`` reads ``SPARK_LOG_REPLICA_FAULTS`` once at start: the
path of a JSON file the test may rewrite at any time (it is re-read when its modification
time changes, checked once per fetch round), keyed by broker id, so one file serves every
node of a local cluster::

    {"3": {"delay_ms": 300,    # broker 3's follower fetches wait this long before each request
           "blocked": [1]}}    # and never reach broker 1, while broker 3, as leader, refuses
                               # fetches from broker 1 (the replica link is cut both ways)

A missing variable or file means no faults; a file that does not parse is ignored (no
faults) and logged once.  Thread-safety: ``refresh`` and the readers may race; each
reader sees one consistent snapshot (a tuple swapped atomically).
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

__all__ = ["FetchFaults", "ENV_VAR"]

log = logging.getLogger(__name__)

ENV_VAR = "SPARK_LOG_REPLICA_FAULTS"


class FetchFaults:
    def __init__(self, path: Path | None, broker_id: int) -> None:
        self.path = path
        self.broker_id = broker_id
        self._mtime: float | None = None
        self._state: tuple[int, frozenset[int]] = (0, frozenset())

    @classmethod
    def from_env(cls, broker_id: int) -> "FetchFaults":
        value = os.environ.get(ENV_VAR)
        return cls(Path(value) if value else None, broker_id)

    def refresh(self) -> None:
        if self.path is None:
            return
        try:
            mtime = self.path.stat().st_mtime_ns
        except OSError:
            self._mtime, self._state = None, (0, frozenset())
            return
        if mtime == self._mtime:
            return
        self._mtime = mtime
        try:
            spec = json.loads(self.path.read_text() or "{}").get(str(self.broker_id), {})
            self._state = (max(0, int(spec.get("delay_ms", 0))), frozenset(int(b) for b in spec.get("blocked", ())))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            log.warning("ignoring fault file %s: %s", self.path, exc)
            self._state = (0, frozenset())

    @property
    def delay_ms(self) -> int:
        return self._state[0]

    def blocked(self, broker_id: int) -> bool:
        return broker_id in self._state[1]
