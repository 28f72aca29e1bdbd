"""Simulated hosts for the fleet demo: each one its own ``dockerd`` and its own ``tierctl agent``.

A :class:`LoopbackHost` is one dockerd (Debian's docker.io: vfs storage, no iptables, no bridge,
its own data root, exec root, socket and pid file, so several run side by side and none touches
a system daemon) with a tiny image imported from busybox (no registry), and one
``tierctl agent serve`` on a free loopback port serving the deployment repository against that
engine, its token in its environment. The hosts share this machine's loopback; engines listen on
their own ports. Everything is started by :meth:`LoopbackHost.start` and stopped by its pid in
:meth:`LoopbackHost.stop` (containers first), which leaves nothing behind.

(Hosts as network namespaces, each with its own address, are the multi-host tests' own
manager; this one needs nothing but root and docker.io.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import ServerProcess, free_port, http_ready
from tierctl.testhosts.dockerd import (
    TINY_IMAGE,
    HostDockerd,
    busybox,
    python_mounts,
    tierctl_src,
)

__all__ = ["TINY_IMAGE", "LoopbackHost", "missing_parts", "python_mounts", "wait_engine"]


def missing_parts() -> list[str]:
    """What this machine lacks for the fleet demo (empty: it can run)."""
    from tierctl.compose.binary import find_compose_binary

    out = []
    if sys.platform != "linux" or os.geteuid() != 0:
        out.append("root on Linux (each host is its own dockerd)")
    for tool in ("dockerd", "docker", "git"):
        if shutil.which(tool) is None:
            out.append(f"{tool} (scripts/ensure-docker installs it)")
    if busybox() is None:
        out.append("busybox (scripts/ensure-docker installs busybox-static)")
    if find_compose_binary() is None:
        out.append("Docker Compose v2 (the compose extra)")
    return out


@dataclass
class LoopbackHost:
    """One simulated host: a dockerd (:class:`~tierctl.testhosts.dockerd.HostDockerd`, in this
    machine's namespace) and an agent."""

    name: str
    token: str
    root: Path = field(init=False)
    agent_port: int = field(init=False)
    engine: HostDockerd = field(init=False)
    agent: ServerProcess | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        # Short: a unix socket path has ~100 characters at most.
        self.root = Path(tempfile.mkdtemp(prefix=f"tierctl-{self.name}-", dir="/tmp"))
        self.agent_port = free_port()
        self.engine = HostDockerd(self.name, root=self.root)

    @property
    def docker_host(self) -> str:
        """Its engine's DOCKER_HOST."""
        return self.engine.host

    @property
    def agent_url(self) -> str:
        """Its agent's URL."""
        return f"http://127.0.0.1:{self.agent_port}"

    def env(self) -> dict[str, str]:
        """This environment, pointed at its engine."""
        return self.engine.env()

    def docker(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """The docker CLI against its engine (bounded)."""
        return self.engine.docker(*args, check=check)

    def start(self, repo: Path, timeout_s: float = 90.0) -> None:
        """Start its dockerd, import the tiny image, start its agent on ``repo``."""
        self.engine.start(timeout_s)
        # The same root filesystem the multi-host tests' engines import.
        self.engine.import_tiny()
        src = tierctl_src()
        env = {
            **self.env(),
            "TIERCTL_AGENT_TOKEN": self.token,
            "PYTHONPATH": os.pathsep.join(p for p in (str(src), os.environ.get("PYTHONPATH")) if p),
        }
        argv = [
            sys.executable, "-m", "tierctl", "agent", "serve", "--projects-dir", str(repo),
            "--state-dir", str(self.root / "agent"), "--listen", f"127.0.0.1:{self.agent_port}",
        ]  # fmt: skip
        self.agent = ServerProcess(
            argv, self.root / "agent.log", env=env, name=f"{self.name} agent"
        )
        self.agent.start()
        self.agent.wait_ready(http_ready(f"{self.agent_url}/health"), timeout_s, poll_s=0.2)

    def containers(self) -> list[str]:
        """Every container of its engine (running or not)."""
        if not self.engine.process.running():
            return []
        out = self.docker("ps", "-a", "--format", "{{.Names}}", check=False).stdout
        return sorted(line for line in out.splitlines() if line)

    def stop(self) -> list[str]:
        """Remove its containers, stop its agent and its dockerd by pid, delete its folder.

        Returns:
            What was still running afterwards (empty when nothing was left).
        """
        if self.engine.process.running():
            self.engine.remove_all_containers()
        if self.agent is not None:
            self.agent.stop()
        self.engine.stop()
        left = [
            f"{p.name} (pid {p.pid})"
            for p in (self.agent, self.engine.process)
            if p is not None and p.running()
        ]
        shutil.rmtree(self.root, ignore_errors=True)
        return left


def wait_engine(port: int, timeout_s: float) -> bool:
    """Whether an engine answers ``/health`` on loopback ``port`` within ``timeout_s``."""
    return wait_until(http_ready(f"http://127.0.0.1:{port}/health"), timeout_s, poll_s=0.3)
