"""A server as a local process: own session and process group, log file, readiness probe.

Used by the local rollout driver for real engines, by the router launcher, by the local
Prometheus, and by the real-engine test fixtures and benchmark. The process runs in its own session so that stopping
it stops everything it forked (vLLM starts an engine-core child process); the stop sends SIGTERM
to the group, waits, then SIGKILLs the group, and is safe to call twice or after the process
died by itself.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import httpx

from tierctl.errors import RuntimeFailure
from tierctl.runtime.polling import wait_until


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now (the OS picks it; a tiny race remains until bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


_EXCEPTION_LINE = re.compile(r"(?:^|\s)([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")


def log_tail(path: Path, lines: int = 6) -> str:
    """The end of a log for an error message: the last exception line (``ValueError: ...``,
    often buried under shutdown messages) then the last ``lines`` non-empty lines, joined
    with `` | ``."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    tail = kept[-lines:]
    errors = [m.group(0).strip() for line in kept if (m := _EXCEPTION_LINE.search(line))]
    if errors and errors[-1] not in " ".join(tail):
        tail = [errors[-1], "...", *tail]
    return " | ".join(tail)


def http_ready(url: str, timeout_s: float = 3.0) -> Callable[[], bool]:
    """A probe: ``GET url`` answers 200 within ``timeout_s``."""

    def probe() -> bool:
        try:
            return httpx.get(url, timeout=timeout_s).status_code == 200
        except httpx.HTTPError:
            return False

    return probe


class ServerProcess:
    """One server process and its process group."""

    def __init__(
        self,
        argv: Sequence[str],
        log: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        name: str = "server",
        die_with_parent: bool = False,
    ) -> None:
        """Describe the process; nothing starts until :meth:`start`.

        Args:
            argv: The command.
            log: stdout and stderr go here (truncated at start).
            env: The whole environment of the process (default: this one's).
            cwd: Working directory.
            name: For messages.
            die_with_parent: Ask the kernel to SIGTERM the process when the process that
                started it dies (Linux ``PR_SET_PDEATHSIG``): a killed test run leaves no
                engine behind. Off for rollouts, whose engines outlive a crashed ``tierctl``.
        """
        self.argv = list(argv)
        self.log = log
        self.env = dict(env) if env is not None else dict(os.environ)
        self.cwd = cwd
        self.name = name
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen[bytes] | None = None
        self._started_at: float | None = None

    @property
    def pid(self) -> int | None:
        """The process id (also its process group id), once started."""
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        """Start the process in a new session with output to the log."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent if self.die_with_parent else None,
            )
        self._started_at = time.monotonic()

    def seconds_since_start(self) -> float | None:
        """Seconds since :meth:`start`, or None before it."""
        return None if self._started_at is None else time.monotonic() - self._started_at

    def running(self) -> bool:
        """Whether the process has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(
        self,
        probe: Callable[[], bool],
        timeout_s: float,
        *,
        poll_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        progress: Callable[[float], None] | None = None,
    ) -> float:
        """Poll ``probe`` until it is true; returns the seconds it took.

        Raises:
            RuntimeFailure: the process exited, or ``timeout_s`` passed; the process group is
                stopped first and the message carries the log's tail.
        """
        started = time.monotonic()
        ready = False

        def settled() -> bool:
            nonlocal ready
            ready = probe()
            if ready or not self.running():
                return True
            if progress is not None:
                progress(time.monotonic() - started)
            return False

        if wait_until(settled, timeout_s, poll_s=poll_s, sleep=sleep) and ready:
            return time.monotonic() - started
        code = self.proc.poll() if self.proc is not None else None
        self.stop()
        why = f"exited with status {code}" if code is not None else f"not ready in {timeout_s:g} s"
        raise RuntimeFailure(
            f"{self.name} {why}: {log_tail(self.log)}",
            rule="a started server answers its readiness probe",
            fix=f"read {self.log}",
        )

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM the process group, wait up to ``timeout_s``, then SIGKILL it. Idempotent."""
        if self.proc is None:
            return
        stop_group(self.proc.pid, timeout_s, child=self.proc)


def stop_group(
    pgid: int, timeout_s: float = 20.0, *, child: subprocess.Popen[bytes] | None = None
) -> None:
    """Stop process group ``pgid`` (its leader's pid): leader first, then the whole group.

    SIGTERM goes to the leader alone first, so a server shuts down in its own order: vLLM's
    API server finishes its in-flight requests, then stops its engine core (a group-wide
    SIGTERM would kill the engine core under the requests). After ``timeout_s`` (or once the
    leader is gone) the group gets SIGTERM, a short grace, then SIGKILL, so no orphaned child
    (an engine core, a worker) outlives it. Safe on a group that is already gone.
    """
    with contextlib.suppress(ProcessLookupError):
        os.kill(pgid, signal.SIGTERM)
    wait_until(lambda: not _alive(pgid, child), timeout_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    wait_until(lambda: not _group_alive(pgid), min(5.0, timeout_s))
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=timeout_s)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def die_with_parent() -> None:
    # Runs in the child between fork and exec; the setting survives exec.
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


_die_with_parent = die_with_parent  # the name this module's own callers use


def _alive(pid: int, child: subprocess.Popen[bytes] | None) -> bool:
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
