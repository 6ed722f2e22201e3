"""``NetworkLab``: hosts in their own network namespaces, joined by one bridge, with cuttable links.

Real partitions for real processes (issue 16): each host is a namespace (``ip netns``)
with one veth link to a bridge that lives in the lab's own "switch" namespace; the test
process joins the bridge too (a veth in its own namespace, the lab's ``gateway``), so it
can reach every host unless told otherwise.  Links are cut with nftables drop rules in
both hosts' namespaces (``cut(a, b)``: nothing from a reaches b or the reverse, packets
vanish as in a real partition, no error comes back), ``isolate(a)`` cuts a from every
other host and the gateway, ``heal`` removes the rules.  Cutting a link between a client
host and a broker is how a client is cut from a leader.

Run processes in a host with ``lab.popen(host, argv)`` (``ip netns exec``, which execs the
command: the ``Popen``'s pid is the process itself, so kill -9 / SIGSTOP reach it).
Needs root, iproute2 and nftables (``make debian-deps``); ``available()`` says whether
this machine can.  Names are unique per lab (a random token), so labs of concurrent test
runs never meet; ``close()`` deletes every namespace and link it made (a fixture calls it
in ``finally``).
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Sequence

__all__ = ["NetworkLab", "Host", "available"]


def available() -> str | None:
    """None if network namespaces and nftables work here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make debian-deps)"
    return None


def _run(*argv: str, ns: str | None = None, input: str | None = None) -> None:
    command = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    result = subprocess.run(command, input=input, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr.strip()}")


@dataclass
class Host:
    name: str
    ns: str
    ip: str
    blocked: set[str] = field(default_factory=set)   # IPs this host's rules drop


class NetworkLab:
    def __init__(self, *, subnet: int | None = None) -> None:
        self.token = secrets.token_hex(3)
        self.subnet = subnet if subnet is not None else 100 + int(self.token[:2], 16) % 150
        self.switch = f"sl{self.token}sw"
        self.hosts: dict[str, Host] = {}
        self._links: list[str] = []       # root-namespace veth names to delete at close
        self._made: list[str] = []        # namespaces to delete at close
        self.gateway_ip = f"10.{self.subnet}.{self.token_octet()}.254"
        self._gateway_link = f"sl{self.token}gw"
        _run("ip", "netns", "add", self.switch)
        self._made.append(self.switch)
        _run("ip", "link", "add", "br0", "type", "bridge", ns=self.switch)
        _run("ip", "link", "set", "br0", "up", ns=self.switch)
        _run("ip", "link", "set", "lo", "up", ns=self.switch)
        # the test process's own port on the bridge
        peer = f"sl{self.token}gp"
        _run("ip", "link", "add", self._gateway_link, "type", "veth", "peer", "name", peer)
        self._links.append(self._gateway_link)
        _run("ip", "link", "set", peer, "netns", self.switch)
        _run("ip", "link", "set", peer, "master", "br0", ns=self.switch)
        _run("ip", "link", "set", peer, "up", ns=self.switch)
        _run("ip", "addr", "add", f"{self.gateway_ip}/24", "dev", self._gateway_link)
        _run("ip", "link", "set", self._gateway_link, "up")

    def token_octet(self) -> int:
        return int(self.token[2:4], 16) % 250 + 1

    def address(self, index: int) -> str:
        return f"10.{self.subnet}.{self.token_octet()}.{index}"

    # -- hosts ----------------------------------------------------------------------------------

    def add(self, name: str) -> Host:
        """A new host (namespace) on the bridge."""
        index = len(self.hosts) + 1
        ns = f"sl{self.token}{name}"
        host = Host(name, ns, self.address(index))
        inner, outer = f"sl{self.token}{index}i", f"sl{self.token}{index}o"
        _run("ip", "netns", "add", ns)
        self._made.append(ns)
        _run("ip", "link", "add", inner, "type", "veth", "peer", "name", outer)
        _run("ip", "link", "set", inner, "netns", ns)
        _run("ip", "link", "set", outer, "netns", self.switch)
        _run("ip", "link", "set", outer, "master", "br0", ns=self.switch)
        _run("ip", "link", "set", outer, "up", ns=self.switch)
        _run("ip", "link", "set", "lo", "up", ns=ns)
        _run("ip", "addr", "add", f"{host.ip}/24", "dev", inner, ns=ns)
        _run("ip", "link", "set", inner, "up", ns=ns)
        self.hosts[name] = host
        self._apply(host)
        return host

    def popen(self, host: Host, argv: Sequence[str], **kwargs: object) -> "subprocess.Popen[bytes]":
        """Start ``argv`` inside ``host``'s namespace (the process itself: ``ip netns exec`` execs)."""
        proc: "subprocess.Popen[bytes]" = subprocess.Popen(  # type: ignore[call-overload]  # kwargs passed through
            ["ip", "netns", "exec", host.ns, *argv], **kwargs)
        return proc

    # -- faults ---------------------------------------------------------------------------------

    def cut(self, a: str, b: str) -> None:
        """Drop everything between hosts ``a`` and ``b`` (either may be ``"gateway"``: the test process)."""
        ips = {name: (self.gateway_ip if name == "gateway" else self.hosts[name].ip) for name in (a, b)}
        for me, other in ((a, b), (b, a)):
            if me != "gateway":
                self.hosts[me].blocked.add(ips[other])
                self._apply(self.hosts[me])
            elif other != "gateway":   # the gateway has no rules of its own: the other side drops both ways
                self.hosts[other].blocked.add(ips[me])
                self._apply(self.hosts[other])

    def isolate(self, name: str) -> None:
        """Cut ``name`` from every other host and from the test process."""
        for other in [*self.hosts, "gateway"]:
            if other != name:
                self.cut(name, other)

    def heal(self, name: str | None = None) -> None:
        """Remove every cut (or only ``name``'s and those naming it)."""
        for host in self.hosts.values():
            before = set(host.blocked)
            if name is None or host.name == name:
                host.blocked.clear()
            elif name in self.hosts:
                host.blocked.discard(self.hosts[name].ip)
            if host.blocked != before:
                self._apply(host)

    def _apply(self, host: Host) -> None:
        dropped = ", ".join(sorted(host.blocked))
        rules = (f"ip saddr {{ {dropped} }} drop", f"ip daddr {{ {dropped} }} drop") if dropped else ("", "")
        script = (
            "table inet sl\n"
            "delete table inet sl\n"
            "table inet sl {\n"
            f"  chain incoming {{\n    type filter hook input priority 0; policy accept;\n    {rules[0]}\n  }}\n"
            f"  chain outgoing {{\n    type filter hook output priority 0; policy accept;\n    {rules[1]}\n  }}\n"
            "}\n"
        )
        _run("nft", "-f", "-", ns=host.ns, input=script)

    # -- teardown -------------------------------------------------------------------------------

    def close(self) -> None:
        for link in self._links:
            subprocess.run(["ip", "link", "del", link], capture_output=True, timeout=30)
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self._made.clear()
        self._links.clear()

    def __enter__(self) -> "NetworkLab":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
