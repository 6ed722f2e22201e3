"""Where a Spark-hosted spark-log cluster keeps its files, and the small JSON files in them.

On the driver host, under ``--data-dir`` (the *root*)::

    cluster.json              cluster id, broker count, voters ("id@host:port"), app pid and
                              state ("starting" | "ready" | "stopping" | "stopped"), Spark app id
    bootstrap                 "host:port,..." of the live brokers (``SPARK_LOG_DATA_DIR=<root>``
                              lets every spark_log client find the cluster without flags)
    application.log           the hosting application's driver log
    controller-<id>/          a controller's data (metadata log), ``node.toml``, ``node.log``

On every executor host, under the same root (a local disk on a real cluster)::

    broker-<id>/meta.json     {"cluster_id", "broker_id", "host", "port"}: the broker's identity,
                              written on first start and checked on every later one
    broker-<id>/host.lock     flock held by the hosting task and its broker (one user at a time)
    broker-<id>/node.toml     the BrokerConfig the broker runs with; node.log its output
    broker-<id>/...           the broker's data (partitions, metadata log)

Files are replaced atomically (write to ``.tmp``, ``os.replace``).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from brokers.launcher.ports import unused_port as free_port  # chosen once, then kept in a meta file

__all__ = [
    "BrokerMeta",
    "ClusterState",
    "broker_dir",
    "controller_dir",
    "free_port",
    "read_json",
    "toml_lines",
    "write_json",
]

STATE_FILE = "cluster.json"
BOOTSTRAP_FILE = "bootstrap"
APP_LOG = "application.log"


def broker_dir(root: Path, broker_id: int) -> Path:
    return Path(root) / f"broker-{broker_id}"


def controller_dir(root: Path, node_id: int) -> Path:
    return Path(root) / f"controller-{node_id}"


def write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """The parsed file, or None if it does not exist."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None


def toml_lines(values: dict[str, Any]) -> list[str]:
    """Flat TOML for BrokerConfig keys: scalars, lists of strings, and one level of tables."""
    top = [f"{k} = {json.dumps(v)}" for k, v in values.items() if not isinstance(v, dict)]
    for key, table in values.items():
        if isinstance(table, dict):
            top.append(f"[{key}]")
            top.extend(f"{k} = {json.dumps(v)}" for k, v in table.items())
    return top


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerMeta:
    """A broker's identity, stored in ``broker-<id>/meta.json`` (Kafka's meta.properties)."""

    cluster_id: str
    broker_id: int
    host: str
    port: int

    @classmethod
    def load(cls, directory: Path) -> "BrokerMeta | None":
        data = read_json(Path(directory) / "meta.json")
        return None if data is None else cls(**data)

    def save(self, directory: Path) -> None:
        write_json(Path(directory) / "meta.json", asdict(self))


@dataclass(slots=True, kw_only=True)
class ClusterState:
    """``cluster.json`` on the driver host: what ``status`` and ``stop`` need."""

    cluster_id: str
    brokers: int
    voters: list[str] = field(default_factory=list)
    app_pid: int = 0
    state: str = "starting"
    spark_app_id: str = ""
    master: str = ""
    error: str = ""

    @classmethod
    def load(cls, root: Path) -> "ClusterState | None":
        data = read_json(Path(root) / STATE_FILE)
        return None if data is None else cls(**data)

    def save(self, root: Path) -> None:
        write_json(Path(root) / STATE_FILE, asdict(self))

    def voter_addresses(self) -> list[str]:
        return [v.partition("@")[2] for v in self.voters]
