"""Simulated hosts' network: one Linux network namespace per host on a bridge of their own.

:class:`HostNetwork` makes a bridge in the root namespace with the first address of a free
``10.X.Y.0/24`` and, per host, a namespace with a veth pair: the root end attached to the
bridge, the other end (``eth0``) in the namespace with the host's own address. Traffic from
this machine (the operator's side) to a host, and between hosts, crosses the veth and the
bridge like a packet between machines; :meth:`HostNetwork.cut` takes a host's link down (the
host keeps running, nothing reaches it), :meth:`HostNetwork.mend` brings it back, and
:meth:`HostNetwork.delay` adds ``tc netem`` latency on the link. Everything needs root and
``ip`` (iproute2); names are short and random, so several networks can coexist.
"""

from __future__ import annotations

import contextlib
import ipaddress
import random
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from tierctl.errors import RuntimeFailure

#: A namespace's or link's name: what ``ip`` accepts and what :func:`ip` ever passes it.
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS`` (iproute2), bounded to 30 s.

    Raises:
        RuntimeFailure: it failed and ``check`` is set; the message carries ip's own words.
    """
    got = subprocess.run(
        ["ip", *args], capture_output=True, text=True, check=False, timeout=30
    )  # fmt: skip
    if check and got.returncode != 0:
        raise RuntimeFailure(
            f"ip {' '.join(args)} failed: {got.stderr.strip()[:300]}",
            rule="the simulated hosts' network needs root and iproute2",
            fix="run as root with iproute2 installed (scripts/ensure-docker installs it)",
        )
    return got


def in_netns(netns: str) -> list[str]:
    """The command prefix that runs a program in namespace ``netns``: ``nsenter --net``, which
    enters the network namespace only. (``ip netns exec`` also remounts /sys, which hides the
    cgroup mounts: dockerd then fails with "Devices cgroup isn't mounted".)"""
    return ["nsenter", f"--net=/run/netns/{netns}", "--"]


def netns_missing() -> str | None:
    """Why no namespaces can be made here, or None."""
    import os
    import sys

    if sys.platform != "linux" or os.geteuid() != 0:
        return "network namespaces need root on Linux"
    if shutil.which("ip") is None:
        return "no `ip` (iproute2)"
    if shutil.which("nsenter") is None:
        return "no `nsenter` (util-linux)"
    return None


def _free_subnet(rng: random.Random) -> ipaddress.IPv4Network:
    """A 10.X.Y.0/24 that overlaps no address or route of the root namespace."""
    used = []
    for line in ip("-4", "route", "show", "table", "all").stdout.splitlines():
        word = line.split()[0] if line.split() else ""
        with contextlib.suppress(ValueError):
            used.append(ipaddress.IPv4Network(word if word != "default" else "0.0.0.0/32"))
    for _ in range(200):
        net = ipaddress.IPv4Network(f"10.{rng.randint(160, 250)}.{rng.randint(0, 255)}.0/24")
        if not any(net.overlaps(u) for u in used if u.prefixlen > 0):
            return net
    raise RuntimeFailure(
        "no free 10.X.Y.0/24 for the simulated hosts",
        rule="the hosts' subnet overlaps no route of this machine",
        fix="delete stale bridges (`ip -br link`), or free a 10.160-250.x.x range",
    )


@dataclass
class HostLink:
    """One host's namespace and link."""

    host: str
    netns: str
    veth: str  # the root end, on the bridge: what :meth:`HostNetwork.cut` takes down
    address: str


@dataclass
class HostNetwork:
    """A bridge and one namespace per host; :meth:`close` deletes them all."""

    tag: str = field(default_factory=lambda: f"{random.SystemRandom().getrandbits(24):06x}")
    subnet: ipaddress.IPv4Network | None = None
    links: dict[str, HostLink] = field(default_factory=dict)
    bridge_up: bool = False

    @property
    def bridge(self) -> str:
        """The bridge's name."""
        return f"tcb{self.tag}"

    @property
    def gateway(self) -> str:
        """The bridge's address: how the hosts reach this machine."""
        assert self.subnet is not None
        return str(self.subnet.network_address + 1)

    def open(self) -> None:
        """Make the bridge with its address (a free subnet chosen now)."""
        if self.subnet is None:
            self.subnet = _free_subnet(random.Random(self.tag))
        ip("link", "add", self.bridge, "type", "bridge")
        self.bridge_up = True
        ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")

    def add(self, host: str) -> HostLink:
        """A namespace for ``host`` with its address, reachable from here over the bridge."""
        assert self.subnet is not None, "open() first"
        index = len(self.links) + 1
        link = HostLink(
            host=host,
            netns=f"tierctl-{self.tag}-{host}",
            veth=f"tcv{self.tag}{index}",
            address=str(self.subnet.network_address + 10 + index),
        )
        if not _NAME.match(link.veth) or not re.match(r"^[A-Za-z0-9_.-]{1,60}$", link.netns):
            raise RuntimeFailure(
                f"host name {host!r} makes an unusable namespace or link name",
                rule="host names are short letters, digits, '.', '_' or '-'",
                fix="rename the host",
            )
        ip("netns", "add", link.netns)
        self.links[host] = link
        ip("link", "add", link.veth, "type", "veth", "peer", "name", "eth0", "netns", link.netns)
        ip("link", "set", link.veth, "master", self.bridge, "up")
        ns = ("-n", link.netns)
        ip(*ns, "addr", "add", f"{link.address}/{self.subnet.prefixlen}", "dev", "eth0")
        ip(*ns, "link", "set", "eth0", "up")
        ip(*ns, "link", "set", "lo", "up")
        ip(*ns, "route", "add", "default", "via", self.gateway)
        return link

    def cut(self, host: str) -> None:
        """Take ``host``'s link down: it keeps running, nothing reaches it or leaves it."""
        ip("link", "set", self.links[host].veth, "down")

    def mend(self, host: str) -> None:
        """Bring ``host``'s link back up."""
        ip("link", "set", self.links[host].veth, "up")

    def delay(self, host: str, ms: float, jitter_ms: float = 0.0) -> bool:
        """Add ``ms`` of latency (``tc netem``) on ``host``'s root end; False without tc."""
        if shutil.which("tc") is None:
            return False
        argv = ["tc", "qdisc", "replace", "dev", self.links[host].veth, "root", "netem"]
        argv += ["delay", f"{ms:g}ms"] + ([f"{jitter_ms:g}ms"] if jitter_ms else [])
        return subprocess.run(argv, capture_output=True, check=False, timeout=30).returncode == 0

    def pids(self, host: str) -> list[int]:
        """The processes in ``host``'s namespace now."""
        got = ip("netns", "pids", self.links[host].netns, check=False).stdout
        return [int(p) for p in got.split() if p.isdigit()]

    def close(self) -> None:
        """Delete every namespace (their veth ends go with them) and the bridge. Processes
        still inside must be stopped first (:meth:`pids`); idempotent."""
        for link in list(self.links.values()):
            ip("netns", "del", link.netns, check=False)
            ip("link", "del", link.veth, check=False)
            del self.links[link.host]
        if self.bridge_up:
            ip("link", "del", self.bridge, check=False)
            self.bridge_up = False
