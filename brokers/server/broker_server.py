"""``BrokerServer``: the broker part of a node, and ``register(node)`` for ``brokers.node``.

Assembly: a ``PartitionManager`` (hosted replicas, fed by the node's metadata listener as a
publisher), the ``Broker`` and ``Admin`` gRPC services on the node's server, and the
handlers behind them.  Registration and heartbeats with the controller are the node's
(``BrokerHeartbeater``); admin requests use the node's ``ControllerClient``.

Lifecycle: ``add_to_server`` before the server starts, ``start`` (manager thread and
metadata subscription), ``stop`` (wakes long polls, closes every ``PartitionLog`` cleanly).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

import grpc

from brokers.controller.client import ControllerClient
from brokers.metadata.publisher import MetadataListener
from spark_log.clock import Clock, SystemClock
from spark_log.proto import broker_pb2_grpc as rpc

from brokers.replica.manager import ReplicaManager

from .admin import AdminHandler
from .errors import to_pb
from .metadata import MetadataBuilder
from .partition_manager import PartitionManager
from .service import AdminServicer, BrokerServicer
from .wire import broker_handler

if TYPE_CHECKING:
    from brokers.node import Node

__all__ = ["BrokerServer", "register"]


class BrokerServer:
    def __init__(self, *, broker_id: int, data_dir: Path, metadata: MetadataListener, controller: ControllerClient,
                 clock: Clock | None = None, broker_epoch: Callable[[], int] = lambda: -1,
                 replica_lag_time_max_ms: int = 10_000, replica_fetch_wait_max_ms: int = 200,
                 metadata_floor: Callable[[], int | None] | None = None) -> None:
        self.metadata = metadata
        self.manager = PartitionManager(broker_id=broker_id, data_dir=data_dir, clock=clock or SystemClock(),
                                        metadata_floor=metadata_floor)
        self.replicas = ReplicaManager(broker_id=broker_id, manager=self.manager, clock=clock or SystemClock(),
                                       broker_epoch=broker_epoch, alter_partition=controller.alter_partition,
                                       to_pb=to_pb, lag_time_max_ms=replica_lag_time_max_ms,
                                       fetch_wait_max_ms=replica_fetch_wait_max_ms)
        self.builder = MetadataBuilder()
        self.broker_servicer = BrokerServicer(manager=self.manager, builder=self.builder,
                                              controller_id=lambda: metadata.leader_id)
        self.broker_servicer.fetch.replica_fetch = self.replicas.handle_fetch
        self.admin_servicer = AdminServicer(AdminHandler(
            controller=controller, image=lambda: metadata.image,
            wait_for=lambda predicate, timeout_s: metadata.wait_for(predicate, timeout_s=timeout_s),
            builder=self.builder))

    def add_to_server(self, server: grpc.Server) -> None:
        server.add_generic_rpc_handlers((broker_handler(self.broker_servicer),))
        rpc.add_AdminServicer_to_server(self.admin_servicer, server)

    def start(self) -> None:
        self.manager.add_reconcile_listener(self.replicas.on_reconciled)
        self.replicas.start()
        self.manager.start()
        self.metadata.add_publisher(self.manager.publish)

    def stop(self) -> None:
        self.metadata.remove_publisher(self.manager.publish)
        self.replicas.stop()
        self.manager.stop()


def register(node: "Node") -> Callable[[], None]:
    """The node's service registrar: adds the broker services and returns ``stop``."""
    assert node.server is not None and node.controller_client is not None
    def broker_epoch() -> int:
        heartbeater = node.heartbeater
        return heartbeater.broker_epoch if heartbeater is not None and heartbeater.broker_epoch is not None else -1

    def metadata_floor() -> int | None:  # None until the first heartbeat was answered
        heartbeater = node.heartbeater
        return heartbeater.first_metadata_offset if heartbeater is not None else None

    server = BrokerServer(broker_id=node.config.broker_id, data_dir=node.data_dir, metadata=node.metadata,
                          controller=node.controller_client, clock=node.clock, broker_epoch=broker_epoch,
                          metadata_floor=metadata_floor,
                          replica_lag_time_max_ms=node.config.replica_lag_time_max_ms,
                          replica_fetch_wait_max_ms=node.config.replica_fetch_wait_max_ms)
    server.add_to_server(node.server)
    server.start()
    node.broker_server = server  # type: ignore[attr-defined]  # for tests and tools
    return server.stop


