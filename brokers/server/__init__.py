"""The broker part of a node: hosted partitions and the Broker/Admin gRPC services.

``register(node)`` is the hook ``brokers.node.Node`` calls on broker nodes (see
``broker_server.py``).
"""
from .broker_server import BrokerServer, register

__all__ = ["BrokerServer", "register"]
