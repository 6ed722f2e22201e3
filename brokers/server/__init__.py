"""The broker part of a node: hosted partitions and the Broker/Admin gRPC services.

``register(host)`` is the service registrar the node's entry point passes to
``brokers.node.Node`` on broker nodes (see ``broker_server.py``); ``host`` is any
``BrokerHost`` (the node), so this package never imports ``brokers.node``.
"""
from .broker_server import BrokerHost as BrokerHost
from .broker_server import BrokerServer as BrokerServer
from .broker_server import register as register

__all__ = ["BrokerHost", "BrokerServer", "register"]
