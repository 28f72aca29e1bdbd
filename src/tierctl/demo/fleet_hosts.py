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

from tierctl.errors import RuntimeFailure
from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import ServerProcess, free_port, http_ready, stop_group
from tierctl.testhosts.dockerd import busybox, tiny_rootfs_tar

TINY_IMAGE = "tierctl-tiny:1"


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
    """One simulated host: a dockerd and an agent."""

    name: str
    token: str
    root: Path = field(init=False)
    agent_port: int = field(init=False)
    dockerd: ServerProcess | None = field(default=None, init=False)
    agent: ServerProcess | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        # Short: a unix socket path has ~100 characters at most.
        self.root = Path(tempfile.mkdtemp(prefix=f"tierctl-{self.name}-", dir="/tmp"))
        self.agent_port = free_port()

    @property
    def docker_host(self) -> str:
        """Its engine's DOCKER_HOST."""
        return f"unix://{self.root / 'sock'}"

    @property
    def agent_url(self) -> str:
        """Its agent's URL."""
        return f"http://127.0.0.1:{self.agent_port}"

    def env(self) -> dict[str, str]:
        """This environment, pointed at its engine."""
        return {**os.environ, "DOCKER_HOST": self.docker_host}

    def docker(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """The docker CLI against its engine (bounded)."""
        return subprocess.run(
            ["docker", *args], env=self.env(), capture_output=True, text=True, check=check,
            timeout=120,
        )  # fmt: skip

    def start(self, repo: Path, timeout_s: float = 90.0) -> None:
        """Start its dockerd, import the tiny image, start its agent on ``repo``."""
        argv = [
            "dockerd", "--storage-driver=vfs", "--iptables=false", "--bridge=none",
            "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
            "--pidfile", str(self.root / "pid"), "-H", self.docker_host,
        ]  # fmt: skip
        self.dockerd = ServerProcess(argv, self.root / "dockerd.log", name=f"{self.name} dockerd")
        self.dockerd.start()
        self.dockerd.wait_ready(
            lambda: self.docker("version", check=False).returncode == 0, timeout_s, poll_s=0.3
        )
        self._import_tiny_image()
        src = Path(__file__).resolve().parents[2]
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

    def _import_tiny_image(self) -> None:
        """``docker import`` busybox in a folder (a few MB, no registry)."""
        if busybox() is None:
            raise RuntimeFailure("no busybox", fix="run scripts/ensure-docker")
        # The same root filesystem the multi-host tests' engines import.
        tar = tiny_rootfs_tar(self.root / "rootfs")
        subprocess.run(
            ["docker", "import", "-", TINY_IMAGE], input=tar, env=self.env(),
            capture_output=True, check=True, timeout=120,
        )  # fmt: skip

    def containers(self) -> list[str]:
        """Every container of its engine (running or not)."""
        if self.dockerd is None or not self.dockerd.running():
            return []
        out = self.docker("ps", "-a", "--format", "{{.Names}}", check=False).stdout
        return sorted(line for line in out.splitlines() if line)

    def stop(self) -> list[str]:
        """Remove its containers, stop its agent and its dockerd by pid, delete its folder.

        Returns:
            What was still running afterwards (empty when nothing was left).
        """
        if self.dockerd is not None and self.dockerd.running():
            ids = self.docker("ps", "-aq", check=False).stdout.split()
            if ids:
                self.docker("rm", "-f", *ids, check=False)
        if self.agent is not None:
            self.agent.stop()
        if self.dockerd is not None and self.dockerd.proc is not None:
            pid = _pidfile(self.root / "pid") or self.dockerd.proc.pid
            stop_group(pid, 30.0, child=self.dockerd.proc if pid == self.dockerd.proc.pid else None)
            self.dockerd.stop()
        left = [
            f"{p.name} (pid {p.pid})"
            for p in (self.agent, self.dockerd)
            if p is not None and p.running()
        ]
        _unmount_below(self.root)
        shutil.rmtree(self.root, ignore_errors=True)
        return left


def _pidfile(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _unmount_below(root: Path) -> None:
    """Unmount what dockerd may have left mounted under its folder."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return
    points = [m.split()[1] for m in mounts if len(m.split()) > 1]
    for point in sorted((p for p in points if p.startswith(str(root))), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False, timeout=30)


def wait_engine(port: int, timeout_s: float) -> bool:
    """Whether an engine answers ``/health`` on loopback ``port`` within ``timeout_s``."""
    return wait_until(http_ready(f"http://127.0.0.1:{port}/health"), timeout_s, poll_s=0.3)


def python_mounts() -> list[str]:
    """Read-only bind mounts that let a tiny-image container run this checkout's tierctl:
    /usr (the libc), the base interpreter, the venv and the source, at their own paths."""
    src = Path(__file__).resolve().parents[2]
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix), src}
    mounts = ["/usr:/usr:ro"]
    for path in sorted(paths):
        if not str(path).startswith("/usr/"):
            mounts.append(f"{path}:{path}:ro")
    return mounts
