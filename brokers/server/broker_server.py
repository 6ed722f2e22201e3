"""``BrokerServer``: the broker part of a node, and ``register(host)``, its service registrar.

Assembly: a ``PartitionManager`` (hosted replicas, fed by the node's metadata listener as a
publisher), the replication threads (``ReplicaManager``: fetchers, ISR updater), the log
cleaner (``BrokerCleaner``: compaction threads), the ``Broker``, ``Admin`` and
``Compaction`` and ``Tiering`` gRPC services on the node's server, and the handlers behind them
(the leader's answer to follower fetches among them), and the group coordinator
(``brokers.groups``: its ``GroupCoordinator`` service; it follows the partitions of
``__consumer_offsets`` this broker leads through a reconcile listener).  Registration and heartbeats with the
controller are the node's; admin requests use the node's ``ControllerClient``.

``register`` takes a ``BrokerHost``: the narrow part of a node the broker needs (its gRPC
server, metadata listener, controller client, clock, data directory, config, broker epoch
and metadata floor).  ``brokers.node.Node`` is one; this package never imports the node.

Lifecycle: ``add_to_server`` before the server starts, ``start`` (manager thread and
metadata subscription), ``stop`` (wakes long polls, closes every ``PartitionLog`` cleanly).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable, Mapping, Protocol

import grpc

from brokers.controller.client import ControllerClient
from brokers.groups import GroupConfig, GroupCoordinator, GroupServicer, InternalTopicSpec
from brokers.log import files
from brokers.metadata.publisher import MetadataListener
from brokers.metrics import BrokerCounters, NodeMetrics
from brokers.metrics.collectors import BrokerCollector, TransactionCollector
from brokers.net.channels import PLAINTEXT, Channels
from brokers.net.faults import FetchFaults
from brokers.net.peers import PeerCalls
from brokers.replica.manager import ReplicaManager
from brokers.transactions.offsets import GroupOffsetsLink
from brokers.transactions import (
    MarkerHandler,
    MarkerSender,
    MarkerServicer,
    TransactionCoordinator,
    TxnConfig,
    TxnServicer,
    TxnVerifier,
)
from spark_log.clock import Clock, SystemClock
from spark_log.config import BrokerConfig
from spark_log.proto import data_listener_pb2 as dpb

from .admin import AdminHandler
from .compaction import BrokerCleaner, CompactionHandler, CompactionServicer
from .tier_fetch import TierFetchHandler
from .tiering import TieringHandler, TieringServicer
from .data_listener import DataListener, check_config, describe_handler
from .leader_fetch import LeaderFetchHandler
from .metadata import MetadataBuilder
from .partition_manager import PartitionManager
from .service import AdminServicer, BrokerServicer
from .tier_offsets import TierTimestamps
from .topic_defaults import AutoCreator, TopicDefaults
from .wire import broker_handler

__all__ = ["BrokerServer", "BrokerHost", "register"]

log = logging.getLogger(__name__)


class BrokerHost(Protocol):
    """What the broker part needs from the process hosting it (``brokers.node.Node``),
    once the host has its server, metadata listener and controller client."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def server(self) -> grpc.Server | None: ...
    @property
    def data_dir(self) -> Path: ...
    @property
    def metadata(self) -> MetadataListener: ...
    @property
    def controller_client(self) -> ControllerClient | None: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def metrics(self) -> NodeMetrics:
        """The node's Prometheus registry (the broker adds its collectors)."""
        ...
    @property
    def channels(self) -> Channels:
        """How the host opens channels to other nodes (TLS when its listener uses it)."""
        ...

    def broker_epoch(self) -> int:
        """This broker's registration epoch, -1 until registered."""
        ...

    def metadata_floor(self) -> int | None:
        """The controller's metadata offset at the first heartbeat answer; None until then."""
        ...


class BrokerServer:
    def __init__(self, *, broker_id: int, data_dir: Path, metadata: MetadataListener, controller: ControllerClient,
                 clock: Clock | None = None, broker_epoch: Callable[[], int] = lambda: -1,
                 replica_lag_time_max_ms: int = 10_000, replica_fetch_wait_max_ms: int = 200,
                 metadata_floor: Callable[[], int | None] | None = None, channels: Channels = PLAINTEXT,
                 group_config: GroupConfig | None = None,
                 offsets_topic: InternalTopicSpec | None = None, offsets_commit_timeout_ms: int = 10_000,
                 config: BrokerConfig | None = None) -> None:
        self.metadata = metadata
        self.manager = PartitionManager(broker_id=broker_id, data_dir=data_dir, clock=clock or SystemClock(),
                                        metadata_floor=metadata_floor)
        settings = config if config is not None else BrokerConfig(broker_id=broker_id)
        self.cleaner = BrokerCleaner(self.manager, settings, self.manager.clock)
        self.compaction_servicer = CompactionServicer(CompactionHandler(
            self.manager, self.cleaner, max_map_bytes=settings.log_cleaner_dedupe_buffer_bytes))
        settings_for_tier = settings if config is not None else BrokerConfig(broker_id=broker_id, data_dir=str(data_dir))
        self.tiering_servicer = TieringServicer(TieringHandler(
            self.manager, location=settings_for_tier.resolved_tier_location(),
            storage_options=settings_for_tier.tier_storage_options))
        self.broker_servicer_tier = TierTimestamps(location=settings_for_tier.resolved_tier_location(),
                                                   storage_options=settings_for_tier.tier_storage_options)
        faults = FetchFaults.from_env(broker_id)
        self.replicas = ReplicaManager(broker_id=broker_id, hosted=self.manager.hosted, faults=faults,
                                       broker_epoch=broker_epoch, alter_partition=controller.alter_partition,
                                       lag_time_max_ms=replica_lag_time_max_ms,
                                       # an idle round per fifth of the lag bound at least, so a
                                       # follower of an idle partition stays in the ISR on a busy machine
                                       fetch_wait_max_ms=min(replica_fetch_wait_max_ms,
                                                             max(50, replica_lag_time_max_ms // 5)),
                                       idle_wait_max_ms=min(2 * replica_fetch_wait_max_ms,
                                                            max(50, replica_lag_time_max_ms // 5)),
                                       channels=channels,
                                       alter_partitions=controller.alter_partitions)
        self.counters = BrokerCounters(broker_id)
        self.builder = MetadataBuilder()

        def create_topic(name: str, partitions: int, replication_factor: int, config: Mapping[str, str]) -> None:
            controller.create_topic(name, partitions=partitions, replication_factor=replication_factor, config=config)

        self.groups = GroupCoordinator(broker_id=broker_id, partitions=self.manager, create_topic=create_topic,
                                       config=group_config, topic=offsets_topic, clock=clock,
                                       commit_timeout_ms=offsets_commit_timeout_ms)
        self.group_servicer = GroupServicer(self.groups)
        manager = self.manager
        self.peers = PeerCalls(channels)  # this broker's calls to other brokers, one channel per peer
        self.marker_handler = MarkerHandler(lambda topic, index: manager.get(topic, index), manager.wake_all)
        self.transactions = TransactionCoordinator(
            broker_id=broker_id, partitions=manager, create_topic=create_topic, clock=clock,
            config=txn_config(settings), commit_timeout_ms=offsets_commit_timeout_ms,
            markers=MarkerSender(broker_id=broker_id, image=lambda: manager.image, local=self.marker_handler,
                                 peers=self.peers),
            offsets=GroupOffsetsLink(broker_id=broker_id, groups=self.groups, peers=self.peers))
        self.verifier = TxnVerifier(broker_id=broker_id, image=lambda: manager.image, local=self.transactions,
                                    peers=self.peers)
        follower_fetches = LeaderFetchHandler(manager=self.manager, faults=faults, on_expandable=self.replicas.isr.poke)
        defaults = TopicDefaults(settings.default_partitions, settings.default_replication_factor)
        wait_for = lambda predicate, timeout_s: metadata.wait_for(predicate, timeout_s=timeout_s)  # noqa: E731
        auto_create = AutoCreator(
            enabled=settings.auto_create_topics, defaults=defaults, wait_for=wait_for,
            create=lambda name, partitions, replication_factor: controller.create_topic(
                name, partitions=partitions, replication_factor=replication_factor, kind="bytes"))
        self.broker_servicer = BrokerServicer(manager=self.manager, builder=self.builder,
                                              controller_id=lambda: metadata.leader_id,
                                              follower_fetches=follower_fetches, verifier=self.verifier,
                                              counters=self.counters, auto_create=auto_create)
        self.broker_servicer.list_offsets.tier = self.broker_servicer_tier  # by timestamp: the tier first
        self.admin_servicer = AdminServicer(AdminHandler(
            controller=controller, image=lambda: metadata.image, wait_for=wait_for, builder=self.builder,
            defaults=defaults, topic_config=settings.topic_defaults))
        self.txn_servicer = TxnServicer(self.transactions)
        self.marker_servicer = MarkerServicer(self.marker_handler)
        self.collector = BrokerCollector(partitions=self.manager, isr=self.replicas.isr, groups=self.groups,
                                         cleaner=self.cleaner.pool)
        self.txn_collector = TransactionCollector(coordinator=self.transactions, markers=self.marker_handler)

    def add_to_server(self, server: grpc.Server) -> None:
        server.add_generic_rpc_handlers((broker_handler(self.broker_servicer), self.admin_servicer.rpc_handler(),
                                         self.group_servicer.rpc_handler(), self.compaction_servicer.rpc_handler(),
                                         self.txn_servicer.rpc_handler(), self.marker_servicer.rpc_handler(),
                                         self.tiering_servicer.rpc_handler()))

    def start(self) -> None:
        self.manager.add_reconcile_listener(self.replicas.on_reconciled)
        self.manager.add_reconcile_listener(self.groups.on_reconciled)
        self.manager.add_reconcile_listener(self.transactions.on_reconciled)
        self.replicas.start()
        self.groups.start()
        self.transactions.start()
        self.manager.start()
        self.metadata.add_publisher(self.manager.publish)
        self.cleaner.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop replication, then the replicas (closed, flushed); threads are joined within
        ``timeout_s`` in all (``Node.stop`` bounds the whole process)."""
        deadline = time.monotonic() + timeout_s
        self.metadata.remove_publisher(self.manager.publish)
        self.groups.stop()
        self.transactions.stop()
        self.peers.close()
        self.cleaner.stop()
        self.replicas.stop(timeout_s / 2)
        self.manager.stop(max(0.0, deadline - time.monotonic()))


def register(host: BrokerHost) -> Callable[[], None]:
    """The broker part's service registrar: adds the broker services to ``host.server``,
    starts them and returns ``stop``."""
    if host.server is None or host.controller_client is None:
        raise RuntimeError("register the broker part once the host has its gRPC server and controller client")
    config = host.config
    files.use_fault_file(config.broker_id)   # SPARK_LOG_DISK_FAULTS (tests): a slow disk through the file layer
    server = BrokerServer(broker_id=config.broker_id, data_dir=host.data_dir, metadata=host.metadata,
                          controller=host.controller_client, clock=host.clock, broker_epoch=host.broker_epoch,
                          metadata_floor=host.metadata_floor, config=config,
                          replica_lag_time_max_ms=config.replica_lag_time_max_ms,
                          replica_fetch_wait_max_ms=config.replica_fetch_wait_max_ms, channels=host.channels,
                          group_config=group_config(config), offsets_topic=InternalTopicSpec(
                              partitions=config.offsets_topic_num_partitions,
                              replication_factor=config.offsets_topic_replication_factor,
                              segment_bytes=config.offsets_topic_segment_bytes),
                          offsets_commit_timeout_ms=config.offsets_commit_timeout_ms)
    refusal = check_config(config.data_listener, config)  # InvalidConfigError: "on" with security
    servicer = server.broker_servicer
    listener = DataListener(manager=server.manager, builder=server.builder, fetch=servicer.fetch,
                            produce=servicer.produce, list_offsets=servicer.list_offsets, host=config.host,
                            port=config.data_port, data_dir=host.data_dir, channels=host.channels,
                            tier_fetch=TierFetchHandler(server.manager, location=server.tiering_servicer.handler.location,
                                                        storage_options=server.tiering_servicer.handler.storage_options,
                                                        counters=server.counters))
    if config.replica_fetch_transport == "auto":
        server.replicas.use_data_listener(listener.peers)  # followers fetch over the leaders' data listeners
    node_security = getattr(host, "security", None)  # brokers.node.Node: its NodeSecurity (TLS, SCRAM, ACLs, quotas)
    if node_security is not None:
        listener.attach_security(node_security)
    elif config.security.security_protocol != "PLAINTEXT" or config.security.authorizer_enabled:
        refusal = refusal or "the host offers no node security to the data listener"

    def data_listener_info() -> dpb.DataListenerInfo:
        info = listener.info()
        if not info.port:
            info.reason = refusal or "the data listener is not running"
        return info

    server.add_to_server(host.server)
    host.metrics.register(server.counters)
    host.metrics.register(server.collector)
    host.metrics.register(server.txn_collector)
    host.server.add_generic_rpc_handlers((describe_handler(data_listener_info),))
    server.start()
    if refusal is None:
        listener.start()
    elif config.data_listener == "auto":
        log.warning("broker %d: no data listener (the JVM Spark connector cannot reach this broker): %s",
                    config.broker_id, refusal)
    budget_s = config.shutdown_timeout_ms / 1000 / 2   # half of the node's bound; Node.stop runs the rest

    def stop() -> None:
        host.metrics.unregister(server.txn_collector)
        host.metrics.unregister(server.collector)
        host.metrics.unregister(server.counters)
        listener.stop(min(5.0, budget_s / 4))
        server.stop(budget_s)

    return stop


def group_config(config: BrokerConfig) -> GroupConfig:
    """The group coordinator's settings from the broker's ``group_*`` / ``offset*`` keys."""
    return GroupConfig(heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
                       min_session_timeout_ms=config.group_consumer_min_session_timeout_ms,
                       max_session_timeout_ms=config.group_consumer_max_session_timeout_ms,
                       default_session_timeout_ms=config.group_consumer_session_timeout_ms,
                       assignors=tuple(config.group_consumer_assignors),
                       offset_metadata_max_bytes=config.offset_metadata_max_bytes)


def txn_config(config: BrokerConfig) -> TxnConfig:
    """The transaction coordinator's settings from the broker's ``transaction_*`` keys."""
    return TxnConfig(max_timeout_ms=config.transaction_max_timeout_ms,
                     default_timeout_ms=min(60_000, config.transaction_max_timeout_ms),
                     partitions=config.transaction_state_log_num_partitions,
                     replication_factor=config.transaction_state_log_replication_factor,
                     segment_bytes=config.transaction_state_log_segment_bytes)
