"""Fault injection on a node's links to other nodes (tests only; off by default).

``SPARK_LOG_REPLICA_FAULTS`` names a JSON file that the test may rewrite at any time; it
is re-read whenever it changes (inode, size or modification time; looked at on every
check), keyed by broker id, so one file serves every node of a local cluster::

    {"3": {"delay_ms": 300,     # broker 3's follower fetches wait this long before each request
           "blocked": [1]},     # and never reach broker 1, while broker 3, as leader, refuses
                                # fetches from broker 1 (the replica link is cut both ways)
     "2": {"isolated": true},   # a network partition: every link between 2 and any other node
                                # is cut, both ways
     "4": {"cut": [1, 5]}}      # the links 4-1 and 4-5 are cut, both ways; the others stay

``delay_ms`` and ``blocked`` act on the replica fetch path only.  A link cut by
``isolated`` or ``cut`` is cut on every node-to-node path, and each process evaluates the
whole file, so both ends of a link refuse it:

- Raft messages (``brokers.raft.transport``: voters' fetches, votes, BeginQuorumEpoch, and
  a broker-only node's metadata fetches as an observer): not sent, refused on arrival;
- ``ControllerClient`` calls to a voter (registration, heartbeats, AlterPartition, Admin
  requests a broker forwards, describes): ``BrokerNotAvailableError`` at once, without
  touching the network;
- replica fetches, both ways (``fetcher``, ``leader_fetch``).

Clients (producers, consumers, Admin) are never filtered: an isolated broker stays
reachable from 127.0.0.1 and keeps answering with what it believes, as a broker on the
wrong side of a real partition does.  The controller-client filter needs the process's
own node id: the Raft transport binds it (``link_filter``); a process that hosts nodes
with two different ids (in-process tests) gets no controller-client filtering.

Cost when the variable is unset: ``link_filter``/``process_links`` return None, so each
call site pays one ``is None`` check.  A missing file means no faults; a file that does
not parse is ignored (no faults) and logged.  Thread-safety: any thread may check; each
check sees one consistent ``FaultSpec`` (an immutable snapshot swapped atomically).
"""
from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

__all__ = ["ENV_VAR", "FaultFile", "FaultSpec", "FetchFaults", "ProcessLinks", "link_filter", "process_links"]

log = logging.getLogger(__name__)

ENV_VAR = "SPARK_LOG_REPLICA_FAULTS"


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """One parsed fault file (empty: no faults)."""

    delays_ms: dict[int, int] = field(default_factory=dict)
    blocked: dict[int, frozenset[int]] = field(default_factory=dict)
    isolated: frozenset[int] = frozenset()
    cut: dict[int, frozenset[int]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> FaultSpec:
        """Raises ``ValueError``/``TypeError``/``AttributeError`` on a malformed file."""
        raw = json.loads(text or "{}")
        if not isinstance(raw, dict):
            raise TypeError("the fault file must hold a JSON object keyed by broker id")
        delays, blocked, isolated, cut = {}, {}, set(), {}
        for key, spec in raw.items():
            node = int(key)
            delays[node] = max(0, int(spec.get("delay_ms", 0)))
            blocked[node] = frozenset(int(b) for b in spec.get("blocked", ()))
            flag = spec.get("isolated", False)
            if not isinstance(flag, bool):
                raise TypeError(f"broker {node}: 'isolated' must be true or false, got {flag!r}")
            if flag:
                isolated.add(node)
            cut[node] = frozenset(int(b) for b in spec.get("cut", ()))
        return cls(delays_ms=delays, blocked=blocked, isolated=frozenset(isolated), cut=cut)

    def link_cut(self, a: int, b: int) -> bool:
        """Whether the link between nodes ``a`` and ``b`` is cut (symmetric; never a-a)."""
        if a == b:
            return False
        return (a in self.isolated or b in self.isolated or b in self.cut.get(a, ())
                or a in self.cut.get(b, ()))

    def fetch_blocked(self, node: int, peer: int) -> bool:
        """Whether replica fetches between ``node`` and ``peer`` fail, as ``node`` sees it."""
        return peer in self.blocked.get(node, ()) or self.link_cut(node, peer)


_EMPTY = FaultSpec()


class FaultFile:
    """The fault file at ``path``, parsed again whenever it changes (one per path per process)."""

    _shared: ClassVar[dict[Path, FaultFile]] = {}
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.path = path
        self._state: tuple[tuple[int, int, int] | None, FaultSpec] = (None, _EMPTY)  # (file stamp, spec)

    @classmethod
    def shared(cls, path: Path) -> FaultFile:
        with cls._shared_lock:
            file = cls._shared.get(path)
            if file is None:
                file = cls._shared[path] = cls(path)
            return file

    def spec(self) -> FaultSpec:
        """The current faults (re-read if the file changed since the last call)."""
        try:
            st = self.path.stat()
        except OSError:
            self._state = (None, _EMPTY)
            return _EMPTY
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        known, spec = self._state
        if stamp == known:
            return spec
        try:
            spec = FaultSpec.parse(self.path.read_text())
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            log.warning("ignoring fault file %s: %s", self.path, exc)
            spec = _EMPTY
        self._state = (stamp, spec)
        return spec


def _env_file() -> FaultFile | None:
    value = os.environ.get(ENV_VAR)
    return FaultFile.shared(Path(value)) if value else None


class FetchFaults:
    """Broker ``broker_id``'s view, for the replica fetch path: ``refresh()`` once per round,
    then ``delay_ms`` and ``blocked(peer)`` (``blocked`` includes cut links)."""

    def __init__(self, path: Path | None, broker_id: int) -> None:
        self.path = path
        self.broker_id = broker_id
        self._file = FaultFile.shared(path) if path is not None else None
        self._spec = _EMPTY

    @classmethod
    def from_env(cls, broker_id: int) -> FetchFaults:
        value = os.environ.get(ENV_VAR)
        return cls(Path(value) if value else None, broker_id)

    def refresh(self) -> None:
        if self._file is not None:
            self._spec = self._file.spec()

    @property
    def delay_ms(self) -> int:
        return self._spec.delays_ms.get(self.broker_id, 0)

    def blocked(self, broker_id: int) -> bool:
        return self._spec.fetch_blocked(self.broker_id, broker_id)


class ProcessLinks:
    """This process's node-to-node links under the fault file (see the module docstring)."""

    def __init__(self, file: FaultFile) -> None:
        self.file = file
        self.local_id: int | None = None
        self._ambiguous = False
        self._lock = threading.Lock()

    def bind(self, node_id: int) -> None:
        """Record the node this process runs; a second, different id disables ``cut_to``."""
        with self._lock:
            if self.local_id is None and not self._ambiguous:
                self.local_id = node_id
            elif self.local_id != node_id:
                log.warning("fault hook: nodes %s and %d in one process; controller-client links not filtered",
                            self.local_id, node_id)
                self.local_id, self._ambiguous = None, True

    def allowed(self, src: int, dst: int) -> bool:
        """Whether a message may travel from node ``src`` to node ``dst``."""
        return not self.file.spec().link_cut(src, dst)

    def cut_to(self, peer: int | None) -> bool:
        """Whether this process's node cannot reach node ``peer`` (False if either is unknown)."""
        local = self.local_id
        return local is not None and peer is not None and self.file.spec().link_cut(local, peer)


_process_links: ProcessLinks | None = None
_process_lock = threading.Lock()


def process_links() -> ProcessLinks | None:
    """The process's ``ProcessLinks`` when ``SPARK_LOG_REPLICA_FAULTS`` is set, else None."""
    global _process_links
    file = _env_file()
    if file is None:
        return None
    with _process_lock:
        if _process_links is None or _process_links.file is not file:
            _process_links = ProcessLinks(file)
        return _process_links


def link_filter(node_id: int) -> Callable[[int, int], bool] | None:
    """``allowed(src, dst)`` for node ``node_id``'s Raft transport (binding ``node_id`` as
    this process's node), or None when the fault hook is off."""
    links = process_links()
    if links is None:
        return None
    links.bind(node_id)
    return links.allowed
