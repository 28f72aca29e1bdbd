"""A real Docker Engine for the tests: its own dockerd, started and stopped by its pid.

Each :class:`DockerEngine` is one ``dockerd`` (Debian's docker.io, installed by
``scripts/ensure-docker``) with vfs storage, no iptables and no bridge, in a temporary folder
of its own (data root, exec root, pid file, socket), so several can run side by side (one per
simulated host) and none touches a system daemon. The tiny image (:data:`TINY_IMAGE`) is
busybox-static's binary in a folder, ``docker import``-ed: no registry, ~2 MB, so vfs copies
it fast. Containers that run Python (``tierctl sim serve``) bind-mount this machine's
interpreter, the venv and the source read-only (:func:`python_mounts`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierctl.runtime.polling import wait_until
from tierctl.testhosts.dockerd import SLEEPER, TINY_IMAGE, HostDockerd, dockerd_missing
from tierctl.testhosts.dockerd import python_mounts as host_python_mounts
from tierctl.testhosts.repo import commit_tag as commit_tag

__all__ = [
    "SLEEPER",
    "TINY_IMAGE",
    "AgentProcess",
    "DockerEngine",
    "commit_tag",
    "python_mounts",
    "require_docker",
    "running_engine",
]

ROOT = Path(__file__).resolve().parents[1]
#: One dockerd of the tests' own: the one implementation, in :mod:`tierctl.testhosts.dockerd`.
DockerEngine = HostDockerd
docker_missing = dockerd_missing


def require_docker() -> None:
    """Skip without Docker; in CI (where make test installs it) fail instead."""
    why = docker_missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"Docker-backed tests cannot run in CI: {why}")
        pytest.skip(why)


@contextlib.contextmanager
def running_engine(name: str = "d", netns: str | None = None) -> Iterator[DockerEngine]:
    """A started engine with the tiny image, stopped (by pid) and deleted after."""
    engine = DockerEngine(name, netns)
    try:
        engine.start()
        engine.import_tiny()
        yield engine
    finally:
        engine.stop()


def python_mounts() -> list[str]:
    """Read-only bind mounts that let a tiny-image container run this checkout's tierctl
    (:func:`tierctl.testhosts.dockerd.python_mounts` for ``src``)."""
    return host_python_mounts(ROOT / "src")


class AgentProcess:
    """``tierctl agent serve`` as a real process on a loopback port, against one engine."""

    def __init__(
        self,
        engine: DockerEngine,
        projects: Path,
        state: Path,
        token: str,
        *,
        host: str = "127.0.0.1",
        extra: tuple[str, ...] = (),
        netns: str | None = None,
    ) -> None:
        """Describe it (port chosen now, kept across restarts)."""
        from tierctl.runtime.process import free_port

        self.engine = engine
        self.projects = projects
        self.state = state
        self.token = token
        self.host = host
        self.port = free_port(host) if netns is None else 8765
        self.extra = extra
        self.netns = netns
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"http://{host}:{self.port}"

    @property
    def oplog(self) -> Path:
        """The agent's operation log."""
        return self.state / "operations.jsonl"

    def start(self, timeout_s: float = 60.0, verify: ssl.SSLContext | bool = True) -> None:
        """Start the agent (token in its environment, never argv) and wait for /health
        (``verify``: how to trust an https agent)."""
        import httpx

        argv = [
            sys.executable, "-m", "tierctl", "agent", "serve",
            "--projects-dir", str(self.projects), "--state-dir", str(self.state),
            "--listen", f"{self.host}:{self.port}", *self.extra,
        ]  # fmt: skip
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        env = {
            **self.engine.env(),
            "PYTHONPATH": str(ROOT / "src"),
            "TIERCTL_AGENT_TOKEN": self.token,
        }
        self.state.mkdir(parents=True, exist_ok=True)
        with (self.state / "agent.out").open("ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

        def up() -> bool:
            if self.proc is None or self.proc.poll() is not None:
                return True
            try:
                return httpx.get(f"{self.url}/health", timeout=2, verify=verify).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, timeout_s, poll_s=0.1)
        if self.proc.poll() is not None:
            raise RuntimeError(f"agent exited: {(self.state / 'agent.out').read_text()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL the agent (by its pid), as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM the agent by its pid and wait for it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)

    def records(self) -> list[dict[str, object]]:
        """The operation log's records."""
        import json

        if not self.oplog.exists():
            return []
        return [json.loads(x) for x in self.oplog.read_text().splitlines() if x.strip()]
