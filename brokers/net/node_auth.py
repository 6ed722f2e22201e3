"""How a node proves to another node that it is one, when client certificates are not
required: the cluster secret (``security.inter_node_secret_file``, shared by every node).

A node sends ``("spark-log-node", "<id>:<hex HMAC-SHA-256(secret, 'spark-log-node:<id>')>")``
in the metadata of every call it makes to another node (only ever over TLS: the config
refuses the secret without it); the receiving node checks it and takes the caller as the
principal ``Node:<id>``, a super user.  The secret itself never travels.  A token is a
static bearer credential of that node: TLS (the receiver's certificate checked against the
CA) keeps it from anyone but the cluster's nodes.
"""
from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from spark_log.errors import InvalidConfigError

__all__ = ["HEADER", "node_token", "verify_node_token", "read_secret"]

HEADER = "spark-log-node"


def read_secret(path: str | Path) -> bytes:
    """The secret's bytes (surrounding whitespace stripped); at least 16 bytes."""
    try:
        secret = Path(path).read_bytes().strip()
    except OSError as exc:
        raise InvalidConfigError(f"cannot read inter_node_secret_file {path}: {exc.strerror}",
                                 key="security.inter_node_secret_file") from None
    if len(secret) < 16:
        raise InvalidConfigError(f"inter_node_secret_file {path} must hold at least 16 bytes",
                                 key="security.inter_node_secret_file")
    return secret


def node_token(secret: bytes, node_id: int) -> str:
    digest = hmac.new(secret, f"spark-log-node:{node_id}".encode(), hashlib.sha256).hexdigest()
    return f"{node_id}:{digest}"


def verify_node_token(secret: bytes, token: str) -> int | None:
    """The node id a token proves, or None when it proves nothing."""
    node, sep, _ = token.partition(":")
    if not sep or not node.isdigit() or len(node) > 10:
        return None
    return int(node) if hmac.compare_digest(node_token(secret, int(node)), token) else None
