"""The local driver: each engine service's command as a local process, for tests and the demo.

The launcher of an engine command (``python3 -m sglang.launch_server``) is replaced by the
simulated engine (``sys.executable -m tierctl sim serve --time-scale X --``) and the flags are
passed through unchanged, so ``/server_info`` answers with the rendered argv. Processes run in
their own session with output to a log file, so they outlive a crashed ``tierctl rollout`` and
a ``--resume`` finds them; pids, URLs and logs are kept in ``STATE_DIR/state.json``. A service
that is not an engine (proxy, collector, ...) is not run locally: its steps succeed as no-ops.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tierctl.engines import profile_for_argv
from tierctl.errors import RuntimeFailure
from tierctl.rollout.argv import parse_argv
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.base import require_services
from tierctl.rollout.dryrun import DryRunResult
from tierctl.rollout.roles import is_engine_command

_LISTENING = re.compile(r"listening on (http://\S+)")


def sim_launcher(time_scale: float) -> list[str]:
    """The command that replaces an engine launcher: the simulated engine server."""
    return [sys.executable, "-m", "tierctl", "sim", "serve", "--time-scale", str(time_scale), "--"]


class LocalDriver:
    """Run engine services as local processes."""

    name = "local"

    def __init__(
        self,
        state_dir: Path,
        *,
        launcher: Sequence[str] | None = None,
        time_scale: float = 100.0,
        start_timeout_s: float = 60.0,
        stop_timeout_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Create the driver.

        Args:
            state_dir: Where pids, URLs and logs are kept.
            launcher: Replaces each engine's launcher; the simulated engine by default.
            time_scale: Modelled seconds per wall second of the simulated engine.
            start_timeout_s: How long a process has to print ``listening on``.
            stop_timeout_s: How long a process has to exit after SIGTERM.
            sleep: Injected sleep.
        """
        self._dir = state_dir
        self._launcher = list(launcher) if launcher is not None else sim_launcher(time_scale)
        self._sim = launcher is None
        self._start_timeout_s = start_timeout_s
        self._stop_timeout_s = stop_timeout_s
        self._sleep = sleep
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def secrets(self) -> tuple[str, ...]:
        """None."""
        return ()

    def state(self) -> dict[str, dict[str, Any]]:
        """Service -> ``{pid, url, log, argv}`` of the processes this driver runs."""
        path = self._dir / "state.json"
        if not path.exists():
            return {}
        data: dict[str, dict[str, Any]] = json.loads(path.read_text())
        return data

    def endpoint(self, dep: Deployment, service: str) -> str:
        """The URL the service printed when it started."""
        entry = self.state().get(service)
        if entry is None or not entry.get("url"):
            raise RuntimeFailure(
                f"{service} is not running under the local driver",
                rule="gates reach engines the local driver started",
                fix="apply the step first",
            )
        return str(entry["url"])

    def dry_run(self, dep: Deployment, services: list[str]) -> DryRunResult:
        """Exactly the requested services would be applied (non-engines as no-ops)."""
        require_services(services)
        return DryRunResult(changed=frozenset(services), removed=frozenset(), lines=())

    def apply(self, dep: Deployment, services: list[str]) -> None:
        """Stop the services' processes, then start them from ``dep``."""
        require_services(services)
        self._reap()
        for service in services:
            self._stop(service)
            if self._is_engine(dep, service):
                self._start(dep, service)

    def logs(self, dep: Deployment, service: str) -> str | None:
        """The running process's log (what the engine printed since it started), if any."""
        entry = self.state().get(service)
        if entry is None or not entry.get("log"):
            return None
        try:
            return Path(entry["log"]).read_text(errors="replace")
        except OSError:
            return None

    def down(self, dep: Deployment, services: list[str]) -> None:
        """Stop the services' processes."""
        require_services(services)
        for service in services:
            self._stop(service)

    def down_all(self) -> None:
        """Stop every process this driver's state knows, and reap its own children."""
        for service in list(self.state()):
            self._stop(service)
        for pid in list(self._children):
            self._kill(pid)
        self._reap()

    def stop_recorded(self) -> list[tuple[str, int, str]]:
        """Stop what an earlier tierctl process (a rollout, the demo) left running.

        Only a process whose command line is still the recorded argv is signalled, so a pid
        reused after a reboot is never killed; stale entries are dropped from the state.

        Returns:
            ``(service, pid, outcome)`` per recorded service: ``stopped`` or ``not running``.
        """
        out: list[tuple[str, int, str]] = []
        for service, entry in self.state().items():
            pid = int(entry["pid"])
            if _runs(pid, [str(a) for a in entry.get("argv") or []]):
                self._stop(service)
                out.append((service, pid, "stopped"))
            else:
                state = self.state()
                state.pop(service, None)
                self._save(state)
                out.append((service, pid, "not running"))
        return out

    def _reap(self) -> None:
        # A child stopped by another tierctl process (a resumed rollout) is reaped here.
        for pid, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[pid]

    def _is_engine(self, dep: Deployment, service: str) -> bool:
        return service in dep.services and is_engine_command(dep.argv(service))

    def command(self, dep: Deployment, service: str) -> list[str]:
        """The local command of an engine service: launcher replaced, flags kept.

        The simulated engine is given the whole command (it reads the engine's own launcher,
        so it answers as SGLang or vLLM, and vLLM's positional model); another launcher gets
        the engine's positional arguments and flags.
        """
        argv = dep.argv(service)
        if self._sim:
            return [*self._launcher, *argv]
        profile = profile_for_argv(argv)
        if profile is None:
            return [*self._launcher, *argv[len(parse_argv(argv).launcher) :]]
        return [*self._launcher, *argv[len(profile.split_command(argv).launcher) :]]

    def _start(self, dep: Deployment, service: str) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        log = self._dir / f"{service}.log"
        env = child_environment(os.environ)
        # The directory holding the ``tierctl`` package (this file is tierctl/rollout/drivers/),
        # found without importing the package root, which imports this module.
        src = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        for key, value in (dep.services[service].get("environment") or {}).items():
            if value is not None and "${" not in value:
                env[key] = value
        # Local engines listen on loopback only, whatever --host the file gives (0.0.0.0 is
        # right inside a container's network, not on an operator's machine).
        env["TIERCTL_BIND_HOST"] = "127.0.0.1"
        argv = self.command(dep, service)
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self._dir,
                start_new_session=True,
            )
        self._children[proc.pid] = proc
        # Recorded before it is ready: if this rollout dies while the engine starts, the next
        # one (a --resume) still finds and stops it.
        state = self.state()
        state[service] = {"pid": proc.pid, "url": None, "log": str(log), "argv": argv}
        self._save(state)
        deadline = time.monotonic() + self._start_timeout_s
        while True:
            text = log.read_text(errors="replace")
            m = _LISTENING.search(text)
            if m:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                self._stop(service)
                tail = " | ".join(text.strip().splitlines()[-5:])
                why = f"exited {proc.returncode}" if proc.returncode is not None else "timed out"
                raise RuntimeFailure(
                    f"local engine {service} {why} before `listening on`: {tail}",
                    rule="an engine prints `listening on http://HOST:PORT` when it serves",
                    fix=f"read {log}",
                )
            self._sleep(0.05)
        state = self.state()
        # A server bound to every interface is reached on loopback.
        url = m.group(1).replace("//0.0.0.0:", "//127.0.0.1:").replace("//[::]:", "//[::1]:")
        state[service] = {"pid": proc.pid, "url": url, "log": str(log), "argv": argv}
        self._save(state)

    def _stop(self, service: str) -> None:
        state = self.state()
        entry = state.pop(service, None)
        if entry is None:
            return
        self._kill(int(entry["pid"]))
        self._save(state)

    def _kill(self, pid: int) -> None:
        child = self._children.pop(pid, None)
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + self._stop_timeout_s
        while _alive(pid, child) and time.monotonic() < deadline:
            self._sleep(0.05)
        if _alive(pid, child):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            if child is not None:
                child.wait(timeout=self._stop_timeout_s)

    def _save(self, state: dict[str, dict[str, Any]]) -> None:
        path = self._dir / "state.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, path)


def _runs(pid: int, argv: list[str]) -> bool:
    """Whether process ``pid`` is alive and runs exactly ``argv`` (Linux /proc)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return bool(argv) and raw.rstrip(b"\0").split(b"\0") == [a.encode() for a in argv]


def _alive(pid: int, child: subprocess.Popen[bytes] | None) -> bool:
    if child is not None:
        return child.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie left by a parent that died is gone for our purposes.
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True


# What an engine started here needs from tierctl's environment: the interpreter, locale and
# temp dirs, and the engines' and their libraries' own settings. Nothing else passes, and a
# name that looks like a credential never does (TIERCTL_AGENT_TOKEN, cloud keys): an engine's
# own secrets come from its service's `environment:`.
_CHILD_ENV_NAMES = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TZ", "TMPDIR", "TEMP", "TMP", "LANG"}
    | {"PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "VIRTUAL_ENV", "LD_LIBRARY_PATH"}
)
_CHILD_ENV_PREFIXES = (
    "LC_",
    "XDG_",
    "VLLM_",
    "SGLANG_",
    "HF_",
    "TRANSFORMERS_",
    "TOKENIZERS_",
    "CUDA_",
    "NVIDIA_",
    "OMP_",
    "MKL_",
    "KMP_",
    "TORCH",
)
_SECRET_NAME = re.compile(r"TOKEN(?!IZERS?_)|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIAL|AUTH", re.I)


def child_environment(parent: Mapping[str, str]) -> dict[str, str]:
    """The environment an engine child process gets from ``parent`` (allow-listed, no secrets).

    ``HF_TOKEN_PATH`` and ``TOKENIZERS_PARALLELISM`` pass (a path and a switch); ``HF_TOKEN``
    and ``TIERCTL_AGENT_TOKEN`` do not.
    """
    out: dict[str, str] = {}
    for key, value in parent.items():
        allowed = key in _CHILD_ENV_NAMES or key.startswith(_CHILD_ENV_PREFIXES)
        if allowed and (key.endswith("_PATH") or not _SECRET_NAME.search(key)):
            out[key] = value
    return out
