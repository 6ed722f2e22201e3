"""The spark-log process: ``Node(config)``, and ``python -m brokers.node --config FILE``.

One process = one gRPC server on ``host:port`` carrying every service of the node:

- ``RaftService`` of a ``RaftNode``: a voter when ``"controller"`` is in
  ``process_roles`` (the node must then be in ``controller_quorum_voters``), else an
  observer that only fetches the metadata log;
- ``ControllerService`` on voters, backed by the ``QuorumController`` state machine;
- the broker's services when ``"broker"`` is in ``process_roles``: added by *service
  registrars* (below); ``main`` (``python -m brokers.node``) passes the broker part's
  (``brokers.server.register``);
- for brokers, a ``BrokerHeartbeater`` that registers the broker with the active
  controller (a new incarnation per process start) and keeps its lease;
- on every node the ``Security`` service, and on voters ``SecurityController``;
- on every node the ``Quorum`` service (DescribeQuorum: the Raft state as the leader sees
  it, forwarded to the leader), and on voters ``QuorumController``
  (``brokers.raft.quorum_service``).

Security (``brokers.security``, the ``[security]`` config): the listener is TLS or
plaintext as configured (``NodeSecurity.bind``); every RPC of the server, whoever
registered it, passes the ``SecurityInterceptor`` (authentication, the authorizer, quotas);
every channel this node opens to other nodes (Raft, controller client, replica fetchers)
comes from ``security.channels``, so internal traffic is as secure as the listener.

Service registrars.  A registrar is ``fn(node) -> stop | None``: it is called once in
``start()``, after the metadata listener, Raft node and controller client exist and
before the server starts, so it can add gRPC services to ``node.server`` and publishers
to ``node.metadata``; the returned callable (if any) runs first in ``stop()``.
Registrars are given explicitly: ``Node(config, registrars=[...])`` or
``Node.add_service_registrar(fn)``.  The node itself knows no broker part; the entry point
(``main``) wires it: ``brokers.server.register`` on broker nodes, which takes the node as a
``brokers.server.BrokerHost`` (so the dependency points one way: node -> server).

Useful attributes once started: ``server`` (a ``RecordingServer``: ``server.services``
names every service it serves), ``port``, ``address`` ("host:port"), ``security``
(``NodeSecurity``; ``channels`` for links to other nodes),
``metadata`` (``MetadataListener``: ``image``, ``add_publisher``, ``wait_for``),
``raft``, ``controller`` (voters only, else None), ``controller_client``
(``ControllerClient`` over the voters), ``heartbeater`` (brokers only: ``broker_epoch``,
``incarnation``), ``data_dir`` (the metadata log lives in ``data_dir/metadata``);
``broker_epoch()`` and ``metadata_floor()`` read the heartbeater (-1 / None before it answered);
``metrics`` (``brokers.metrics.NodeMetrics``: the node's Prometheus registry, served on
``metrics_port`` and written to ``<data_dir>/metrics.port``; its interceptor counts every RPC).

Voters: ``controller_quorum_voters`` as "id@host:port"; empty means a single-node quorum
of this node at its own address.  A voter listens on its voter entry's port when
``port`` is 0.  The bound port is written atomically to ``<data_dir>/broker.port``
once the server is serving; a clean ``stop()`` removes it.  ``kill -USR1`` dumps every
thread's stack to stderr (diagnosing a stuck node).

Stopping is bounded (``shutdown_timeout_ms``, default 10 s): SIGTERM makes ``main`` run
``stop()``, whose every join and wait gets what is left of the bound and whose outgoing
calls are cancelled by closing their channels first; then the process exits at once (0),
without the interpreter's unbounded teardown.  Past the bound a watchdog prints every
thread's stack and exits 1.
"""
from __future__ import annotations

if __name__ == "__main__":  # python -m brokers.node: before any import can load pandas
    from brokers.net.without_pandas import refuse_pandas

    refuse_pandas()

import argparse
import faulthandler
import gc
import logging
import os
import random
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

import grpc

from brokers.controller import isr_service as isr_controller_service
from brokers.raft import quorum_service
from brokers.controller import security_service as security_controller_service
from brokers.controller import service as controller_service
from brokers.controller.client import ControllerClient
from brokers.controller.controller import QuorumController
from brokers.controller.heartbeater import BrokerHeartbeater
from brokers.metadata.publisher import MetadataListener
from brokers.metrics import NodeMetrics
from brokers.metrics.server import MetricsTls
from brokers.metrics.collectors import NodeCollector
from brokers.raft.driver import RaftNode
from brokers.net.channels import SERVER_OPTIONS, Channels
from brokers.net.registry import RecordingServer
from brokers.security.node_security import NodeSecurity
from brokers.net.stop_signal import on_stop_signals, wait_for_signal
from brokers.server import register as register_broker_part
from spark_log.clock import Clock, SystemClock
from spark_log.config import BrokerConfig, load_toml
from spark_log.errors import InvalidConfigError, SparkLogError
from spark_log.proto import quorum_pb2

__all__ = ["Node", "ServiceRegistrar", "main"]

log = logging.getLogger(__name__)

ServiceRegistrar = Callable[["Node"], "Callable[[], None] | None"]
PORT_FILE = "broker.port"


def _warm_up_arrow() -> None:
    """Pay pyarrow's lazy start-up costs here, not on the Raft thread.

    The first ``pa.array(...)`` from Python objects asks pyarrow's pandas shim about pandas:
    where pandas can be imported that imports it (seconds on a busy machine), and in a
    fresh process that first happens on the Raft thread at its first leader append or
    follower decode, stalling elections and the first failover.  ``python -m brokers.node``
    refuses pandas (``brokers.net.without_pandas``), so there the shim's answer costs nothing;
    a process that runs ``Node`` as a library pays it here, once."""
    import pyarrow as pa

    pa.array([b""], type=pa.binary())


class Node:
    """One spark-log process (see the module docstring).  ``start``/``stop`` from one thread."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        transport_filter: Callable[[int, int], bool] | None = None,
        registrars: Sequence[ServiceRegistrar] = (),
    ) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self._rng = rng
        self._transport_filter = transport_filter
        self.data_dir = Path(config.data_dir)
        self.is_broker = "broker" in config.process_roles
        self.is_voter = "controller" in config.process_roles
        configured = config.voters()
        if self.is_voter and configured and config.broker_id not in configured:
            raise InvalidConfigError(
                f"broker {config.broker_id} has the controller role but is not in controller_quorum_voters "
                f"({', '.join(config.controller_quorum_voters)})",
                key="controller_quorum_voters",
            )
        if not self.is_voter and (not configured or config.broker_id in configured):
            raise InvalidConfigError(
                "a broker-only node needs controller_quorum_voters that do not include itself",
                key="controller_quorum_voters",
            )
        self.security = NodeSecurity(config, clock=self.clock)  # InvalidConfigError: unreadable TLS files
        self._registrars: list[ServiceRegistrar] = list(registrars)
        self._closers: list[Callable[[], None]] = []
        self.server: RecordingServer | None = None
        self.port: int | None = None
        self.address = ""
        self.voters: dict[int, str] = dict(configured)
        self.controller: QuorumController | None = None
        self.metadata = MetadataListener()
        self.raft: RaftNode | None = None
        self.controller_client: ControllerClient | None = None
        self.heartbeater: BrokerHeartbeater | None = None
        self.metrics = NodeMetrics()
        self._started = False

    def add_service_registrar(self, registrar: ServiceRegistrar) -> None:
        """Add ``registrar(node) -> stop | None`` to run in ``start()`` (see module doc)."""
        if self._started:
            raise RuntimeError("add service registrars before Node.start()")
        self._registrars.append(registrar)

    def broker_epoch(self) -> int:
        """This broker's registration epoch; -1 until the controller registered it."""
        heartbeater = self.heartbeater
        epoch = heartbeater.broker_epoch if heartbeater is not None else None
        return epoch if epoch is not None else -1

    def metadata_floor(self) -> int | None:
        """The controller's metadata offset in this process's first heartbeat answer; None
        until it came (a restarted broker serves nothing below it)."""
        heartbeater = self.heartbeater
        return heartbeater.first_metadata_offset if heartbeater is not None else None

    @property
    def channels(self) -> Channels:
        """How this node opens channels to other nodes (its listener's security)."""
        return self.security.channels

    @property
    def port_file(self) -> Path:
        return self.data_dir / PORT_FILE

    def start(self) -> None:
        """Bind, assemble and start everything; returns once the server is serving."""
        if self._started:
            raise RuntimeError("node already started")
        self._started = True
        config = self.config
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _warm_up_arrow()
        bind_port = config.port
        if bind_port == 0 and config.broker_id in self.voters:
            bind_port = int(self.voters[config.broker_id].rpartition(":")[2])
        workers = config.num_io_threads + 8 * max(1, len(self.voters)) + 16  # long polls hold workers
        self.server = RecordingServer(grpc.server(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grpc"),
                                                  options=SERVER_OPTIONS,
                                                  interceptors=[self.metrics.interceptor, self.security.interceptor]))
        self.port = self.security.bind(self.server, f"{config.host}:{bind_port}")
        if not self.port:
            raise OSError(f"cannot listen on {config.host}:{bind_port}")
        self.address = f"{config.host}:{self.port}"
        if not self.voters:
            self.voters = {config.broker_id: self.address}

        if self.is_voter:
            self.controller = QuorumController.from_config(config, clock=self.clock)
            self.metadata = self.controller.metadata
        state_machine = self.controller if self.controller is not None else self.metadata
        self.raft = RaftNode(
            node_id=config.broker_id,
            voters=self.voters,
            data_dir=self.data_dir / "metadata",
            config=config.raft,
            state_machine=state_machine,
            observer=not self.is_voter,
            rng=self._rng,
            transport_filter=self._transport_filter,
            clock=self.clock,
            channels=self.security.channels,
        )
        self.raft.add_to_server(self.server)
        if self.controller is not None:
            self.controller.attach(self.raft)
            controller_service.add_to_server(self.controller, self.server)
            security_controller_service.add_to_server(self.controller, self.server)
            isr_controller_service.add_to_server(self.controller, self.server)
        self.controller_client = ControllerClient(self.voters, channels=self.security.channels)
        quorum_service.add_to_server(self.server, self.raft, self.clock, voter=self.is_voter,
                                     forward=self._forward_describe_quorum)
        self.security.attach(image=lambda: self.metadata.image,
                             wait_for=lambda predicate, timeout_s: self.metadata.wait_for(predicate, timeout_s=timeout_s),
                             controller=self.controller_client, server=self.server)

        self.metrics.register(NodeCollector(broker_id=config.broker_id, raft=lambda: self.raft,
                                            controller=lambda: self.controller, image=lambda: self.metadata.image,
                                            quotas=self.security.quotas))
        for registrar in list(self._registrars):
            closer = registrar(self)
            if closer is not None:
                self._closers.append(closer)

        self.server.start()
        self.raft.start()
        if self.controller is not None:
            self.controller.start()
        if self.is_broker:
            session_s = config.session_timeout_ms / 1000
            self.heartbeater = BrokerHeartbeater(
                ControllerClient(self.voters, timeout_s=session_s / 2, rpc_timeout_s=session_s / 3,
                                 channels=self.security.channels),
                broker_id=config.broker_id,
                address=self.address,
                rack=config.rack,
                interval_ms=config.heartbeat_interval_ms,
            )
            self.heartbeater.start()
        self.metrics.start(config.host, config.metrics_port, self.data_dir, tls=self._metrics_tls())
        tmp = self.port_file.with_suffix(".tmp")
        tmp.write_text(f"{self.port}\n")
        os.replace(tmp, self.port_file)
        log.info(
            "node %d serving on %s as %s (voters %s)%s",
            config.broker_id,
            self.address,
            "+".join(config.process_roles),
            ", ".join(f"{i}@{a}" for i, a in sorted(self.voters.items())),
            f"; metrics on {self.metrics.scheme}://{config.host}:{self.metrics.port}/metrics"
            if self.metrics.port else "",
        )

    def _forward_describe_quorum(self) -> quorum_pb2.DescribeQuorumResponse:
        client = self.controller_client
        if client is None:
            raise SparkLogError("the node is not started")
        return client.describe_quorum()

    def _metrics_tls(self) -> MetricsTls | None:
        """HTTPS for /metrics when the listener uses TLS (``metrics_allow_plaintext`` keeps it HTTP)."""
        security, files = self.config.security, self.security.files
        if not security.tls or files is None:
            return None
        if self.config.metrics_allow_plaintext:
            if self.config.metrics_port >= 0:
                log.warning("node %d: /metrics is plain HTTP on a %s broker (metrics_allow_plaintext = true)",
                            self.config.broker_id, security.security_protocol)
            return None
        return MetricsTls(certfile=security.ssl_certfile, keyfile=security.ssl_keyfile,
                          cafile=security.ssl_cafile or None,
                          client_auth_required=security.ssl_client_auth == "required",
                          generation=lambda: files.current().generation)

    def stop(self, grace_s: float = 1.0) -> None:
        """Stop in reverse order: heartbeats and the controller client, broker services, controller, Raft, server.

        Bounded by ``shutdown_timeout_ms``: every join and wait below gets what is left of
        it (outgoing calls fail at once: their channels are closed first), so ``stop``
        returns within the bound even when a thread does not end (threads are daemons; the
        process exits anyway, ``main``)."""
        if not self._started:
            return
        self._started = False
        deadline = time.monotonic() + self.config.shutdown_timeout_ms / 1000

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        if self.heartbeater is not None:
            self.heartbeater.client.close()  # first: a heartbeat in flight fails now, not at its deadline
            self.heartbeater.stop(left())
        if self.controller_client is not None:  # in-flight controller calls fail now, not at their deadline
            self.controller_client.close()
        for closer in reversed(self._closers):
            try:
                closer()
            except Exception:  # noqa: BLE001 - keep stopping the rest
                log.exception("stopping a broker service failed")
        if self.controller is not None:
            self.controller.stop(left())
        if self.raft is not None:
            self.raft.stop(left())
        if self.server is not None:
            self.server.stop(min(grace_s, left())).wait(left())
        self.metrics.stop()
        try:
            self.port_file.unlink()
        except FileNotFoundError:
            pass
        log.info("node %d stopped", self.config.broker_id)


def main(argv: list[str] | None = None) -> int:
    """Run one node in the foreground until SIGTERM/SIGINT; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m brokers.node", description="Run one spark-log node.")
    parser.add_argument("--config", required=True, help="broker config file (TOML, BrokerConfig keys)")
    parser.add_argument("--log-level", default=os.environ.get("SPARK_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = load_toml(BrokerConfig, args.config)
        node = Node(config, registrars=[register_broker_part] if "broker" in config.process_roles else [])
    except SparkLogError as exc:
        print(f"spark-log: {exc}", file=sys.stderr)
        return 2
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1: thread dump to stderr
    done = threading.Event()
    on_stop_signals(done.set)
    try:
        node.start()
    except (OSError, RuntimeError, SparkLogError) as exc:
        print(f"spark-log: cannot start node {config.broker_id}: {exc}", file=sys.stderr)
        return _bounded(node.stop, config.shutdown_timeout_ms, code=1)
    freeze_startup_heap()
    wait_for_signal(done)
    return _bounded(node.stop, config.shutdown_timeout_ms, code=0)


def freeze_startup_heap() -> None:
    """Move every object alive once the node serves (the modules, the config, the services,
    the metadata image so far) out of the garbage collector's reach (``gc.freeze``): they
    live as long as the process, and a full collection that walks them again took 10 to 25 ms
    of a started broker with every thread stopped, the largest single stall in the
    produce-to-consume latency tail (``bench.latency_bench``).  Collections still find
    cycles among the objects made after it."""
    gc.collect()
    gc.freeze()


def _bounded(stop: Callable[[], None], timeout_ms: int, *, code: int) -> int:
    """Run ``stop`` and end the process with ``code`` within ``timeout_ms`` (plus a moment
    to write the logs); with 1, every thread's stack on stderr, when it did not end in
    time.  The interpreter's own shutdown (joining non-daemon threads such as the
    gRPC server's workers, collecting garbage) is skipped: it is unbounded under load, and
    every file the node wrote is closed and flushed by ``stop``."""
    def expire() -> None:
        print(f"spark-log: the node did not stop within {timeout_ms} ms; threads:", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(all_threads=True)
        logging.shutdown()
        os._exit(1)

    watchdog = threading.Timer(timeout_ms / 1000, expire)
    watchdog.daemon = True
    watchdog.start()
    stop()
    watchdog.cancel()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
