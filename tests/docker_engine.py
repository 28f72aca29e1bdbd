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
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierctl.runtime.polling import wait_until

ROOT = Path(__file__).resolve().parents[1]
TINY_IMAGE = "tierctl-tiny:1"
#: A container command that stops at once on SIGTERM (a shell as pid 1 ignores it otherwise,
#: and every stop would wait out the 10 s grace period).
SLEEPER = ["/bin/sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait", "--"]
_BUSYBOX = next((p for p in (Path("/usr/bin/busybox"), Path("/bin/busybox")) if p.exists()), None)


def docker_missing() -> str | None:
    """Why no dockerd can run here, or None."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "dockerd needs root on Linux"
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        return "no dockerd (scripts/ensure-docker installs Debian's docker.io)"
    if _BUSYBOX is None:
        return "no busybox (scripts/ensure-docker installs busybox-static)"
    return None


def require_docker() -> None:
    """Skip without Docker; in CI (where make test installs it) fail instead."""
    why = docker_missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"Docker-backed tests cannot run in CI: {why}")
        pytest.skip(why)


class DockerEngine:
    """One dockerd of the tests' own."""

    def __init__(self, name: str = "d", netns: str | None = None) -> None:
        """Describe it; nothing starts until :meth:`start`.

        Args:
            name: A short name for its folder.
            netns: A network namespace to run it in (its containers on host networking share
                that namespace: one simulated host).
        """
        # Short: a unix socket path has ~100 characters at most.
        self.root = Path(tempfile.mkdtemp(prefix=f"tierctl-{name}-", dir="/tmp"))
        self.sock = self.root / "sock"
        self.netns = netns
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        """The DOCKER_HOST of this engine."""
        return f"unix://{self.sock}"

    def env(self) -> dict[str, str]:
        """This environment, pointed at this engine."""
        return {**os.environ, "DOCKER_HOST": self.host}

    def start(self, timeout_s: float = 60.0) -> None:
        """Start dockerd and wait until it answers."""
        argv = [
            "dockerd", "--storage-driver=vfs", "--iptables=false", "--bridge=none",
            "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
            "--pidfile", str(self.root / "pid"), "-H", self.host,
        ]  # fmt: skip
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        with (self.root / "dockerd.log").open("wb") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        ok = wait_until(
            lambda: (
                self.proc is not None
                and (
                    self.proc.poll() is not None
                    or self.docker("version", check=False).returncode == 0
                )
            ),
            timeout_s,
            poll_s=0.2,
        )
        if not ok or self.proc.poll() is not None:
            tail = (self.root / "dockerd.log").read_text(errors="replace")[-2000:]
            self.stop()
            raise RuntimeError(f"dockerd did not start: {tail}")

    def docker(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the docker CLI against this engine."""
        return subprocess.run(
            ["docker", *args], env=self.env(), capture_output=True, text=True, check=check,
            timeout=300,
        )  # fmt: skip

    def compose(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the real Compose v2 against this engine."""
        from tierctl.compose.binary import find_compose_binary

        found = find_compose_binary()
        assert found is not None, "no Docker Compose v2 (the compose extra ships it)"
        return subprocess.run(
            [*found.argv, *args], env=self.env(), capture_output=True, text=True, check=check,
            timeout=300,
        )  # fmt: skip

    def build_tiny_image(self) -> None:
        """``docker import`` busybox in a folder as :data:`TINY_IMAGE` (no registry)."""
        assert _BUSYBOX is not None
        rootfs = self.root / "rootfs"
        for sub in ("bin", "tmp", "etc", "proc", "sys", "dev", "usr", "root"):
            (rootfs / sub).mkdir(parents=True, exist_ok=True)
        shutil.copy2(_BUSYBOX, rootfs / "bin" / "busybox")
        for applet in ("sh", "sleep", "cat", "true", "echo", "wget"):
            with contextlib.suppress(FileExistsError):
                (rootfs / "bin" / applet).symlink_to("busybox")
        # /lib -> usr/lib as on merged-/usr Debian: a bind-mounted /usr brings the libc.
        for link in ("lib", "lib64"):
            with contextlib.suppress(FileExistsError):
                (rootfs / link).symlink_to(f"usr/{link}")
        (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
        tar = subprocess.run(["tar", "-C", str(rootfs), "-c", "."], capture_output=True, check=True)
        subprocess.run(
            ["docker", "import", "-", TINY_IMAGE], input=tar.stdout, env=self.env(),
            capture_output=True, check=True, timeout=120,
        )  # fmt: skip

    def containers(self) -> list[str]:
        """Every container's name (running or not)."""
        out = self.docker("ps", "-a", "--format", "{{.Names}}").stdout
        return sorted(line for line in out.splitlines() if line)

    def remove_all_containers(self) -> None:
        """Remove every container of this engine (a test's leftovers)."""
        ids = self.docker("ps", "-aq").stdout.split()
        if ids:
            self.docker("rm", "-f", *ids, check=False)

    def stop(self) -> None:
        """Remove the containers, SIGTERM dockerd by its pid (SIGKILL after 30 s), and
        delete its folder."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self.remove_all_containers()
            pid = _dockerd_pid(self.root / "pid") or self.proc.pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        _unmount_below(self.root)
        shutil.rmtree(self.root, ignore_errors=True)


def _dockerd_pid(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None


def _unmount_below(root: Path) -> None:
    """Unmount what dockerd may have left mounted under its folder (after a crash)."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return
    points = [m.split()[1] for m in mounts if len(m.split()) > 1]
    for point in sorted((p for p in points if p.startswith(str(root))), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


@contextlib.contextmanager
def running_engine(name: str = "d", netns: str | None = None) -> Iterator[DockerEngine]:
    """A started engine with the tiny image, stopped (by pid) and deleted after."""
    engine = DockerEngine(name, netns)
    try:
        engine.start()
        engine.build_tiny_image()
        yield engine
    finally:
        engine.stop()


def python_mounts() -> list[str]:
    """Read-only bind mounts that let a tiny-image container run this checkout's tierctl:
    /usr (the libc), the base interpreter, the venv and the source, at their own paths."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix), ROOT / "src"}
    mounts = ["/usr:/usr:ro"]
    for path in sorted(paths):
        if not str(path).startswith("/usr/"):
            mounts.append(f"{path}:{path}:ro")
    return mounts


def commit_tag(repo: Path, tag: str, files: dict[str, str]) -> None:
    """Write ``files`` into the git repository ``repo`` (created on first use), commit, tag."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", tag], check=True)
    subprocess.run([*git, "tag", tag], check=True)


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
