"""Broker registration and heartbeats: validation and the records they produce (pure).

- ``register(image, broker_id, incarnation, address, rack)``: the same incarnation again
  is a retry and changes nothing (or unfences it if it was fenced); a new incarnation
  replaces the previous registration: the old one is fenced first (its leaderships
  move, it leaves ISRs), then the new registration gets ``broker_epoch = old + 1`` and
  is unfenced, taking over offline partitions it can lead (see ``election.py``).
- ``heartbeat_records(image, broker_id, broker_epoch)``: ``FencedEpochError`` for an
  unknown broker or a stale epoch (the broker must register again); the unfencing
  records when the broker was fenced; nothing otherwise.

Both return ``(records, broker_epoch)``.  Lease bookkeeping lives in ``leases.py``.
"""
from __future__ import annotations

from brokers.metadata.delta import MetadataDelta
from brokers.metadata.image import MetadataImage
from brokers.metadata.records import (
    FenceBrokerRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)
from spark_log.errors import FencedEpochError, InvalidRequestError

from .election import fence_changes, unfence_changes

__all__ = ["register", "heartbeat_records", "fence_records", "unfence_records"]


def _check_address(address: str) -> None:
    host, colon, port = address.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidRequestError(f"broker address {address!r} is not host:port")


def fence_records(image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
    """Fence ``broker_id`` (registered, unfenced) and move its leaderships."""
    info = image.brokers[broker_id]
    records: list[MetadataRecord] = [FenceBrokerRecord(broker_id=broker_id, broker_epoch=info.broker_epoch)]
    records.extend(fence_changes(image, broker_id))
    return records


def unfence_records(image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
    """Unfence ``broker_id`` (registered, fenced) and give it offline partitions."""
    info = image.brokers[broker_id]
    records: list[MetadataRecord] = [UnfenceBrokerRecord(broker_id=broker_id, broker_epoch=info.broker_epoch)]
    records.extend(unfence_changes(image, broker_id))
    return records


def register(
    image: MetadataImage, *, broker_id: int, incarnation: str, address: str, rack: str = ""
) -> tuple[list[MetadataRecord], int]:
    if broker_id < 0:
        raise InvalidRequestError(f"broker id must be >= 0, got {broker_id}")
    if not incarnation:
        raise InvalidRequestError("a broker registration needs an incarnation id")
    _check_address(address)
    current = image.brokers.get(broker_id)
    if current is not None and current.incarnation == incarnation:
        if current.address != address or current.rack != rack:
            raise InvalidRequestError(
                f"broker {broker_id} incarnation {incarnation} is already registered at "
                f"{current.address} (rack {current.rack!r}); a new address needs a new incarnation"
            )
        return (unfence_records(image, broker_id) if current.fenced else []), current.broker_epoch
    records: list[MetadataRecord] = []
    if current is not None and not current.fenced:
        records.extend(fence_records(image, broker_id))
    epoch = current.broker_epoch + 1 if current is not None else 1
    records.append(
        RegisterBrokerRecord(
            broker_id=broker_id, incarnation=incarnation, broker_epoch=epoch, address=address, rack=rack, fenced=True
        )
    )
    # the partition changes below see the broker as live; the earlier fencing moved
    # leadership away from the old incarnation, so replay them on the post-fence view
    records.append(UnfenceBrokerRecord(broker_id=broker_id, broker_epoch=epoch))
    records.extend(unfence_changes(_after_fence(image, records), broker_id))
    return records, epoch


def _after_fence(image: MetadataImage, records: list[MetadataRecord]) -> MetadataImage:
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    return delta.apply()


def heartbeat_records(image: MetadataImage, broker_id: int, broker_epoch: int) -> list[MetadataRecord]:
    info = image.brokers.get(broker_id)
    if info is None:
        raise FencedEpochError(f"broker {broker_id} is not registered: register before heartbeating")
    if info.broker_epoch != broker_epoch:
        raise FencedEpochError(
            f"broker {broker_id} heartbeat has epoch {broker_epoch}, but the current registration "
            f"has epoch {info.broker_epoch}: register again"
        )
    return unfence_records(image, broker_id) if info.fenced else []
