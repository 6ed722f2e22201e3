"""``AlterIsr``: one partition leader's ISR change request, as the controller's batched
AlterPartitions takes it (isr.proto): shared by the leader's ``IsrUpdater``
(``brokers.replica``) and the controller (``brokers.controller``), which may not import
each other."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AlterIsr"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterIsr:
    """Broker ``broker_id`` (registered with ``broker_epoch``), leader of ``topic``-``partition``
    in ``leader_epoch`` at ``partition_epoch``, asks for the ISR ``new_isr``."""

    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
