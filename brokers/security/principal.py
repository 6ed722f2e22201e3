"""Principal names, as Kafka writes them: ``"<type>:<name>"``.

- ``User:<name>``: a SCRAM user, or a client certificate's subject (``User:CN=alice,O=acme``);
- ``User:ANONYMOUS``: a caller that did not authenticate (PLAINTEXT, or SSL without client
  certificates);
- ``Node:<id>``: a spark-log node proven by the inter-node token (``brokers.net.node_auth``);
  always a super user.  No client can take this type: SCRAM users and certificates map to
  ``User:``.
"""
from __future__ import annotations

__all__ = ["ANONYMOUS", "user", "node", "is_node"]

ANONYMOUS = "User:ANONYMOUS"


def user(name: str) -> str:
    return f"User:{name}"


def node(node_id: int) -> str:
    return f"Node:{node_id}"


def is_node(principal: str) -> bool:
    return principal.startswith("Node:")
