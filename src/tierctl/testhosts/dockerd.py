"""One simulated host's Docker engine: a ``dockerd`` of its own, inside the host's namespace.

Debian's docker.io (``scripts/ensure-docker``) with vfs storage, no iptables and no bridge
(containers use host networking: the host's namespace), its own data root, exec root, unix
socket and pid file in a folder of its own, so several run side by side and none touches a
system daemon. The socket is a file, so this machine's docker CLI reaches every engine
whatever namespace it runs in. Images come from no registry: :meth:`HostDockerd.import_tiny`
``docker import``s busybox-static's binary in a folder (~2 MB); containers that run Python
(``tierctl sim serve``, the router) bind-mount this machine's interpreter, venv and source
read-only (:func:`python_mounts`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tierctl.errors import RuntimeFailure
from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import ServerProcess, log_tail

#: The tiny image's name.
TINY_IMAGE = "tierctl-tiny:1"
#: The simulated engine's image: the tiny image with an entrypoint that runs ``tierctl sim
#: serve`` for an engine command line (:meth:`HostDockerd.build_sim_engine`).
SIM_ENGINE_IMAGE = "tierctl-sim-engine:1"
#: A container command that stops at once on SIGTERM (a shell as pid 1 ignores it otherwise).
SLEEPER = ["/bin/sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait", "--"]
_APPLETS = ("sh", "sleep", "cat", "true", "echo", "wget", "ls")


def busybox() -> Path | None:
    """busybox-static's binary, if installed."""
    return next((p for p in (Path("/usr/bin/busybox"), Path("/bin/busybox")) if p.exists()), None)


def dockerd_missing() -> str | None:
    """Why no dockerd can run here, or None."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "dockerd needs root on Linux"
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        return "no dockerd (scripts/ensure-docker installs Debian's docker.io)"
    if busybox() is None:
        return "no busybox (scripts/ensure-docker installs busybox-static)"
    return None


class HostDockerd:
    """One dockerd, optionally inside a network namespace; stopped by its pid."""

    def __init__(self, name: str, netns: str | None = None, root: Path | None = None) -> None:
        """Describe it; nothing starts until :meth:`start`.

        Args:
            name: A short name for its folder.
            netns: The namespace to run it in (its containers on host networking share it).
            root: Its folder (default: a new one under /tmp; a socket path has ~100 characters
                at most, so keep it short).
        """
        self.root = root or Path(tempfile.mkdtemp(prefix=f"tierctl-{name}-", dir="/tmp"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.sock = self.root / "sock"
        self.netns = netns
        argv = [
            "dockerd", "--storage-driver=vfs", "--iptables=false", "--bridge=none",
            "--ip-forward=false", "--data-root", str(self.root / "data"),
            "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "pid"),
            "-H", self.host,
        ]  # fmt: skip
        if netns:
            from tierctl.testhosts.netns import in_netns

            # nsenter execs dockerd itself: the pid is dockerd's.
            argv = [*in_netns(netns), *argv]
        self.process = ServerProcess(argv, self.root / "dockerd.log", name=f"dockerd {name}")

    @property
    def host(self) -> str:
        """This engine's DOCKER_HOST."""
        return f"unix://{self.sock}"

    def env(self) -> dict[str, str]:
        """This environment, pointed at this engine."""
        return {**os.environ, "DOCKER_HOST": self.host}

    def start(self, timeout_s: float = 60.0) -> None:
        """Start dockerd and wait until it answers (:meth:`launch`, :meth:`wait_ready`)."""
        self.launch()
        self.wait_ready(timeout_s)

    def launch(self) -> None:
        """Start dockerd (several can start at once; then :meth:`wait_ready` each)."""
        self.process.start()

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Wait until dockerd answers.

        Raises:
            RuntimeFailure: it exited or did not answer in ``timeout_s`` (its log's tail).
        """
        ok = wait_until(
            lambda: (
                not self.process.running() or self.docker("version", check=False).returncode == 0
            ),
            timeout_s,
            poll_s=0.2,
        )
        if not ok or not self.process.running():
            tail = log_tail(self.process.log, lines=10)
            self.stop()
            raise RuntimeFailure(
                f"dockerd did not start: {tail}",
                rule="each simulated host runs its own dockerd",
                fix="run scripts/ensure-docker; check that dockerd runs as root here",
            )

    def docker(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the docker CLI against this engine (bounded to 300 s)."""
        return subprocess.run(
            ["docker", *args], env=self.env(), capture_output=True, text=True, check=check,
            timeout=300,
        )  # fmt: skip

    def compose(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the real Compose v2 against this engine."""
        from tierctl.compose.binary import find_compose_binary

        found = find_compose_binary()
        if found is None:
            raise RuntimeFailure(
                "no Docker Compose v2",
                rule="the simulated hosts run the real Compose",
                fix="install tierctl's compose extra (it ships the binary)",
            )
        return subprocess.run(
            [*found.argv, *args], env=self.env(), capture_output=True, text=True, check=check,
            timeout=300,
        )  # fmt: skip

    def import_tiny(self, tar: bytes | None = None) -> bytes:
        """``docker import`` the tiny image (no registry); returns its tarball, which the next
        engine can import as it is."""
        tar = tar if tar is not None else tiny_rootfs_tar(self.root / "rootfs")
        subprocess.run(
            ["docker", "import", "-", TINY_IMAGE], input=tar, env=self.env(),
            capture_output=True, check=True, timeout=120,
        )  # fmt: skip
        return tar

    def build_sim_engine(self, src: Path, time_scale: float = 100.0) -> None:
        """``docker build`` :data:`SIM_ENGINE_IMAGE` on the tiny image (no registry): its
        entrypoint drops the engine's launcher (``python3 -m sglang.launch_server``, ``vllm
        serve MODEL``: every word before the first flag) and runs ``tierctl sim serve
        --time-scale X -- FLAGS`` with this machine's Python, so a compose service's
        ``command`` is the engine's own command line, as on a GPU host. The container needs
        :func:`python_mounts` (the interpreter, the venv and ``src``)."""
        script = (
            "#!/bin/sh\n"
            "# The simulated engine for an engine command line: its launcher words dropped.\n"
            'while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do shift; done\n'
            f"export PYTHONPATH=${{PYTHONPATH:-{src}}}\n"
            f'exec {sys.executable} -m tierctl sim serve --time-scale {time_scale:g} -- "$@"\n'
        )
        dockerfile = (
            f"FROM {TINY_IMAGE}\nCOPY sim-engine /bin/sim-engine\n"
            'ENTRYPOINT ["/bin/sim-engine"]\nENV HOME=/tmp\n'
        )
        context = self.root / "sim-engine-context"
        context.mkdir(parents=True, exist_ok=True)
        (context / "Dockerfile").write_text(dockerfile)
        (context / "sim-engine").write_text(script)
        (context / "sim-engine").chmod(0o755)
        subprocess.run(
            ["docker", "build", "-q", "-t", SIM_ENGINE_IMAGE, str(context)],
            env={**self.env(), "DOCKER_BUILDKIT": "0"}, capture_output=True, check=True,
            timeout=300,
        )  # fmt: skip
        shutil.rmtree(context, ignore_errors=True)

    def containers(self) -> list[str]:
        """Every container's name (running or not)."""
        out = self.docker("ps", "-a", "--format", "{{.Names}}").stdout
        return sorted(line for line in out.splitlines() if line)

    def remove_all_containers(self) -> None:
        """Remove every container of this engine."""
        ids = self.docker("ps", "-aq", check=False).stdout.split()
        if ids:
            self.docker("rm", "-f", *ids, check=False)

    def stop(self) -> None:
        """Remove the containers, stop dockerd by its pid (SIGKILL after 30 s), unmount what
        it left and delete its folder. Idempotent."""
        if self.process.running():
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self.remove_all_containers()
        self.process.stop(timeout_s=30)
        unmount_below(self.root)
        shutil.rmtree(self.root, ignore_errors=True)


def tiny_rootfs_tar(rootfs: Path) -> bytes:
    """busybox in a folder as a tarball: /bin's applets, /lib -> usr/lib (a bind-mounted /usr
    brings the libc, as on merged-/usr Debian), a root user."""
    found = busybox()
    if found is None:
        raise RuntimeFailure(
            "no busybox", rule="the tiny image is busybox", fix="run scripts/ensure-docker"
        )
    for sub in ("bin", "tmp", "etc", "proc", "sys", "dev", "usr", "root"):
        (rootfs / sub).mkdir(parents=True, exist_ok=True)
    shutil.copy2(found, rootfs / "bin" / "busybox")
    for applet in _APPLETS:
        with contextlib.suppress(FileExistsError):
            (rootfs / "bin" / applet).symlink_to("busybox")
    for link in ("lib", "lib64"):
        with contextlib.suppress(FileExistsError):
            (rootfs / link).symlink_to(f"usr/{link}")
    (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    tar = subprocess.run(["tar", "-C", str(rootfs), "-c", "."], capture_output=True, check=True)
    shutil.rmtree(rootfs, ignore_errors=True)
    return tar.stdout


def unmount_below(root: Path) -> None:
    """Unmount what a dockerd may have left mounted under ``root`` (after a crash)."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return
    points = [m.split()[1] for m in mounts if len(m.split()) > 1]
    for point in sorted((p for p in points if p.startswith(str(root))), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False, timeout=30)


def tierctl_src() -> Path:
    """The folder this tierctl is imported from (a checkout's ``src``)."""
    return Path(__file__).resolve().parents[2]


def python_mounts(src: Path | None = None) -> list[str]:
    """Read-only bind mounts that let a tiny-image container run this machine's Python (the
    interpreter, the venv) and tierctl's source ``src`` (default: :func:`tierctl_src`), at
    their own paths; /usr for the libc."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix), src or tierctl_src()}
    mounts = ["/usr:/usr:ro"]
    for path in sorted(paths):
        if not str(path).startswith("/usr/"):
            mounts.append(f"{path}:{path}:ro")
    return mounts
