"""Messages of the data-plane simulation (every one has ``src`` and ``dst`` for ``SimNetwork``).

Node ids: the controller is 0, brokers 1..N, clients 100 and up.  A request carries
``call`` (the caller's id for the call) and the answer echoes it; the caller drops answers
to calls it has given up on (a gRPC deadline), as a real client does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from brokers.metadata.image import MetadataImage

from .simlog import SimFrame

CONTROLLER = 0


@dataclass(frozen=True, slots=True)
class Produce:
    src: int
    dst: int
    call: int
    partition: int
    frames: tuple[SimFrame, ...]
    acks_all: bool
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class ProduceAnswer:
    src: int
    dst: int
    call: int
    error: Exception | None
    base_offset: int  # >= 0 when the records were appended (also with an error after the append)


@dataclass(frozen=True, slots=True)
class ReplicaFetch:
    src: int
    dst: int
    call: int
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int


@dataclass(frozen=True, slots=True)
class ReplicaFetchAnswer:
    src: int
    dst: int
    call: int
    partition: int
    error: Exception | None = None
    diverging: tuple[int, int] | None = None
    frames: tuple[SimFrame, ...] = ()
    high_watermark: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerFetch:
    src: int
    dst: int
    call: int
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class ConsumerFetchAnswer:
    src: int
    dst: int
    call: int
    partition: int
    error: Exception | None = None
    records: tuple[tuple[int, bytes], ...] = ()
    next_offset: int = 0


@dataclass(frozen=True, slots=True)
class ListOffsets:
    src: int
    dst: int
    call: int
    partition: int


@dataclass(frozen=True, slots=True)
class ListOffsetsAnswer:
    src: int
    dst: int
    call: int
    partition: int
    error: Exception | None = None
    offset: int = -1


@dataclass(frozen=True, slots=True)
class Metadata:
    """A client asks a broker which broker leads each partition (its served image)."""

    src: int
    dst: int
    call: int


@dataclass(frozen=True, slots=True)
class MetadataAnswer:
    src: int
    dst: int
    call: int
    error: Exception | None = None
    leaders: dict[int, int | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MetadataFetch:
    """A broker fetches the metadata log from the controller (images newer than ``offset``)."""

    src: int
    dst: int
    offset: int


@dataclass(frozen=True, slots=True)
class MetadataFetchAnswer:
    src: int
    dst: int
    image: MetadataImage | None


@dataclass(frozen=True, slots=True)
class Register:
    src: int
    dst: int
    incarnation: str


@dataclass(frozen=True, slots=True)
class Heartbeat:
    src: int
    dst: int
    incarnation: str
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class ControllerAnswer:
    """To Register / Heartbeat: the broker epoch and the controller's metadata offset."""

    src: int
    dst: int
    incarnation: str
    error: Exception | None = None
    broker_epoch: int = -1
    metadata_offset: int = -1
    extra: Any = None
