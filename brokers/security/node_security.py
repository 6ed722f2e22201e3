"""``NodeSecurity``: what one node assembles from its ``[security]`` config.

    security = NodeSecurity(config, clock=clock)
    server = grpc.server(pool, options=SERVER_OPTIONS, interceptors=[security.interceptor])
    port = security.bind(server, "127.0.0.1:9092")          # TLS or plaintext listener
    Peers(..., channels=security.channels)                    # every node-to-node link
    security.attach(image=..., wait_for=..., controller=..., server=server)

- ``channels``: ``brokers.net.channels.TlsChannels`` over the node's certificate (plus the
  inter-node token when the cluster has a secret), or ``PLAINTEXT``;
- ``bind``: ``add_secure_port`` with reloading server credentials (client certificates
  required when ``ssl_client_auth = "required"``), or ``add_insecure_port``;
- ``interceptor``: ``SecurityInterceptor`` (authentication, the authorizer when enabled,
  quotas, all RPCs);
- ``attach`` registers the ``Security`` service once the node has its metadata listener
  and controller client; the interceptor reads the image through the same callable.

Raises ``InvalidConfigError`` when the TLS files or the secret cannot be read.
"""
from __future__ import annotations

from typing import Callable

import grpc

from brokers.controller.client import ControllerClient
from brokers.metadata.image import EMPTY, MetadataImage
from brokers.net.channels import PLAINTEXT, Channels, TlsChannels
from brokers.net.node_auth import HEADER, node_token, read_secret
from brokers.net.tls import TlsFiles, server_credentials
from spark_log.clock import Clock, SystemClock
from spark_log.config import BrokerConfig

from .authn import Authenticator
from .authorizer import Authorizer
from .interceptor import SecurityInterceptor
from .quotas import QuotaManager
from .service import SecurityServicer, WaitFor
from .sessions import SessionStore

__all__ = ["NodeSecurity"]


class NodeSecurity:
    def __init__(self, config: BrokerConfig, *, clock: Clock | None = None) -> None:
        security = config.security
        self.config = security
        clock = clock or SystemClock()
        self.files: TlsFiles | None = None
        self.channels: Channels = PLAINTEXT
        secret = read_secret(security.inter_node_secret_file) if security.inter_node_secret_file else None
        if security.tls:
            self.files = TlsFiles(certfile=security.ssl_certfile, keyfile=security.ssl_keyfile,
                                  cafile=security.ssl_cafile or None, check_interval_ms=security.ssl_reload_check_ms,
                                  clock=clock)
            metadata = ((HEADER, node_token(secret, config.broker_id)),) if secret is not None else ()
            self.channels = TlsChannels(self.files, metadata=metadata)
        self._image: Callable[[], MetadataImage] = lambda: EMPTY
        self.sessions = SessionStore(clock=clock, lifetime_ms=security.sasl_session_lifetime_ms)
        self.authenticator = Authenticator(protocol=security.security_protocol, sessions=self.sessions,
                                           node_secret=secret, users=lambda: self._image().security.users)
        self.authorizer = Authorizer(security.super_users) if security.authorizer_enabled else None
        self.quotas = QuotaManager(clock=clock, burst_ms=security.quota_burst_ms,
                                   max_throttle_ms=security.quota_max_throttle_ms)
        self.interceptor = SecurityInterceptor(
            authenticator=self.authenticator, authorizer=self.authorizer, quotas=self.quotas,
            image=lambda: self._image(),
            # SASL_SSL refuses unauthenticated calls; elsewhere the principal matters only to the
            # authorizer and quotas, which the interceptor asks for when they apply
            always_authenticate=security.security_protocol == "SASL_SSL")
        self.servicer: SecurityServicer | None = None

    def bind(self, server: grpc.Server, address: str) -> int:
        """Listen on ``address`` with the configured security; the bound port (0: failed)."""
        if self.files is None:
            return server.add_insecure_port(address)
        credentials = server_credentials(self.files, require_client_auth=self.config.ssl_client_auth == "required")
        return server.add_secure_port(address, credentials)

    def attach(self, *, image: Callable[[], MetadataImage], wait_for: WaitFor, controller: ControllerClient,
               server: grpc.Server) -> None:
        """Read the metadata through ``image`` and add the ``Security`` service to ``server``."""
        self._image = image
        self.servicer = SecurityServicer(protocol=self.config.security_protocol,
                                         authorizer_enabled=self.config.authorizer_enabled, sessions=self.sessions,
                                         image=image, wait_for=wait_for, controller=controller)
        server.add_generic_rpc_handlers((self.servicer.rpc_handler(),))
