"""The local driver: each engine service's command as a local process, for tests and the demo.

Two kinds of engine run here:

- ``sim`` (default): the launcher of an engine command (``python3 -m sglang.launch_server``) is
  replaced by the simulated engine (``sys.executable -m tierctl sim serve --time-scale X --``)
  and the flags are passed through unchanged, so ``/server_info`` answers with the rendered
  argv; it is ready when it prints ``listening on URL``.
- ``real``: the engine itself, from a local install (vLLM on CPU: the virtualenv
  ``scripts/ensure-vllm`` makes). The launcher comes from the engine's profile with its python
  replaced by the install's; the flags are the rendered ones, except that paths under a bind
  mount of the service (``volumes: [HOST:CONTAINER]``) are rewritten to the host side, as the
  container would see them. It listens on loopback whatever ``--host`` the file gives (the
  rendered ``0.0.0.0`` is right inside a container's network, not on an operator's machine;
  :func:`bind_loopback`), and the argv gate is told so (:meth:`LocalDriver.gate_argv`). It is
  ready when the profile's health path answers 200 at 127.0.0.1 and the ``--port`` the
  command names.

Processes run in their own session (their process group holds every child: vLLM's engine core
and worker) with output to a log file kept per start (``logs/SERVICE.N.log``), so they outlive
a crashed ``tierctl rollout`` and a ``--resume`` finds them; pids, URLs and logs are kept in
``STATE_DIR/state.json``; ``tierctl stop`` stops what a rollout left running. A stop
signals the whole group, waits, then kills the group. A service that is not an engine (proxy,
collector, ...) is not run locally: its steps succeed as no-ops.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from tierctl.engines import profile_for_argv
from tierctl.errors import Location, RuntimeFailure
from tierctl.paths import resolve_inside
from tierctl.rollout.argv import parse_argv
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.base import require_services
from tierctl.rollout.dryrun import DryRunResult
from tierctl.rollout.roles import is_engine_command
from tierctl.runtime.process import ServerProcess, http_ready, stop_group

_LISTENING = re.compile(r"listening on (http://\S+)")

EngineKind = Literal["sim", "real"]


def sim_launcher(time_scale: float, options: Sequence[str] = ()) -> list[str]:
    """The command that replaces an engine launcher: the simulated engine server (``options``
    are its own, e.g. ``--cost-model FILE``)."""
    return [
        sys.executable, "-m", "tierctl", "sim", "serve", "--time-scale", str(time_scale),
        *options, "--",
    ]  # fmt: skip


class LocalDriver:
    """Run engine services as local processes."""

    name = "local"

    def __init__(
        self,
        state_dir: Path,
        *,
        launcher: Sequence[str] | None = None,
        time_scale: float = 100.0,
        sim_options: Sequence[str] = (),
        start_timeout_s: float = 60.0,
        stop_timeout_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        engine: EngineKind = "sim",
        engine_python: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        """Create the driver.

        Args:
            state_dir: Where pids, URLs and logs are kept.
            launcher: Replaces each engine's launcher (ready on ``listening on``); the
                simulated engine by default.
            time_scale: Modelled seconds per wall second of the simulated engine.
            sim_options: More options of the simulated engine (``--cost-model FILE``).
            start_timeout_s: How long a process has to become ready.
            stop_timeout_s: How long a process group has to exit after SIGTERM.
            sleep: Injected sleep.
            engine: ``sim`` or ``real`` (the engine itself, from a local install).
            engine_python: The real engine's python (default: the engine's virtualenv,
                scripts/ensure-vllm's or scripts/ensure-sglang's by the command's profile;
                an SGLang gets tierctl's ``sgl_kernel`` stand-in first on its PYTHONPATH).
            extra_env: Set in every engine's environment after the service's own (e.g. a
                small CPU KV cache); never logged.
        """
        self._dir = state_dir
        self._engine: EngineKind = engine
        self._launcher = (
            list(launcher) if launcher is not None else sim_launcher(time_scale, sim_options)
        )
        self._custom_launcher = launcher is not None
        self._sim = launcher is None and engine == "sim"
        self._engine_python = engine_python
        self._extra_env = dict(extra_env or {})
        self._start_timeout_s = start_timeout_s
        self._stop_timeout_s = stop_timeout_s
        self._sleep = sleep
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        # state.json is read-modified-written; engines may be started from several threads
        # (two replicas starting together).
        self._lock = threading.RLock()

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
        """The URL the service serves on."""
        entry = self.state().get(service)
        if entry is None or not entry.get("url"):
            raise RuntimeFailure(
                f"{service} is not running under the local driver",
                rule="gates reach engines the local driver started",
                fix="apply the step first",
            )
        return str(entry["url"])

    def logs(self, dep: Deployment, service: str) -> str | None:
        """The running process's log (what the engine printed since it started), if any."""
        entry = self.state().get(service)
        if entry is None or not entry.get("log"):
            return None
        try:
            return Path(entry["log"]).read_text(errors="replace")
        except OSError:
            return None

    def container_state(self, dep: Deployment, service: str) -> tuple[str, int | None] | None:
        """``("running", None)`` or ``("exited", CODE)`` for a process this driver started
        (its child); None when it cannot say (not started here, or by another tierctl)."""
        entry = self.state().get(service)
        child = self._children.get(int(entry["pid"])) if entry and entry.get("pid") else None
        if child is None:
            return None
        code = child.poll()
        return ("running", None) if code is None else ("exited", code)

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

    def down(self, dep: Deployment, services: list[str]) -> None:
        """Stop the services' processes."""
        require_services(services)
        for service in services:
            self._stop(service)

    def down_all(self) -> list[str]:
        """Stop every process this driver's state knows, and reap its own children.

        Returns:
            The services stopped.
        """
        stopped = list(self.state())
        for service in stopped:
            self._stop(service)
        for pid in list(self._children):
            self._kill(pid)
        self._reap()
        return stopped

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
        if self._engine == "real" and not self._custom_launcher:
            return self._real_command(dep, service, argv)
        if self._sim:
            return [*self._launcher, *argv]
        profile = profile_for_argv(argv)
        if profile is None:
            return [*self._launcher, *argv[len(parse_argv(argv).launcher) :]]
        return [*self._launcher, *argv[len(profile.split_command(argv).launcher) :]]

    def _real_command(self, dep: Deployment, service: str, argv: list[str]) -> list[str]:
        profile = profile_for_argv(argv)
        if profile is None:
            raise RuntimeFailure(
                f"{service}: no engine profile knows the command {' '.join(argv[:3])}",
                rule="the local driver runs a real engine from its profile's launcher",
                fix="render the service with the engine's launcher",
            )
        cmd = profile.split_command(argv)
        # The profile's module launcher (`python -m ...`), run by the install's python; the
        # positional arguments of a `vllm serve`-style launcher become flags for it.
        module = next((lc for lc in profile.launchers if lc[0].startswith("python")), None)
        if module is None:
            raise RuntimeFailure(
                f"{service}: the {profile.title} profile has no `python -m` launcher",
                rule="the local driver runs a real engine as `python -m MODULE`",
                fix="use the docker or compose-manager driver for this engine",
            )
        python = self._python_for(profile.kind)
        mounts = bind_mounts(dep, service)
        positional: list[str] = []
        for name, value in cmd.positional.items():
            positional += [f"--{name}", _host_path(value, mounts)]
        flags = bind_loopback(argv[cmd.flags_start :])
        return [python, *module[1:], *positional, *(_host_path(t, mounts) for t in flags)]

    def gate_argv(self, dep: Deployment, service: str) -> tuple[list[str], tuple[str, ...]]:
        """The argv the argv gate should find running, and what the driver changed on purpose.

        A real engine is launched listening on loopback (:func:`bind_loopback`), so its
        startup log shows ``--host 127.0.0.1`` where the file may say ``0.0.0.0``; and with
        every path under a bind mount at its host path (``--model /models/x`` runs as
        ``--model /opt/x``), so the log shows the host path. The gate checks what was launched,
        flag by flag as rendered otherwise, and says what the driver replaced. The simulated
        engine reports the rendered argv (it binds loopback by itself), so nothing changes.
        """
        argv = dep.argv(service)
        if self._engine != "real" or self._custom_launcher:
            return argv, ()
        profile = profile_for_argv(argv)
        if profile is None:
            return argv, ()
        start = profile.split_command(argv).flags_start
        mounts = bind_mounts(dep, service)
        launched = [_host_path(t, mounts) for t in argv]
        said: list[str] = []
        moved = [(a, b) for a, b in zip(argv, launched, strict=True) if a != b]
        if moved:
            said.append(
                "local driver: ran "
                + ", ".join(f"{a} as {b}" for a, b in moved)
                + " (the bind mounts' host paths)"
            )
        rendered = _host_values(argv[start:])
        if rendered != [LOOPBACK]:
            launched = [*launched[:start], *bind_loopback(launched[start:])]
            where = ", ".join(rendered) if rendered else "no --host (every interface)"
            said.append(f"local driver: bound --host {LOOPBACK} (the file says {where})")
        return launched, tuple(said)

    def _mount_root(self, dep: Deployment, service: str) -> Path:
        """The engine's working directory: its bind mounts as symlinks under their container
        paths, so a relative path in the command (``--model ./models/x`` with compose's
        ``working_dir: /``) reads what the container would, and the engine reports the very
        argv that was rendered (what the argv gate compares)."""
        where = Location(file=dep.ref.path, path=f"services.{service}")
        # Names and targets come from the compose file: each is resolved inside the state
        # folder and refused if it could lead out of it (`..`, a symlink an earlier mount laid).
        root = resolve_inside(
            self._dir / "root",
            service,
            field="service name",
            location=where,
            fix="name the service with letters, digits, '-' and '_' (not '.' or '..')",
        )
        root.mkdir(parents=True, exist_ok=True)
        for target, host in bind_mounts(dep, service):
            _drop_own_link(root, target)
            link = resolve_inside(
                root,
                target,
                field="bind mount target",
                location=Location(file=dep.ref.path, path=f"services.{service}.volumes"),
                anchored=True,
                fix="give the mount an absolute container path without '..' (/models/x)",
            )
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_dir() and not link.is_symlink():
                raise RuntimeFailure(
                    f"{service}: the bind mount target {target} holds another mount's target",
                    rule="the local driver lays each bind mount as one symlink; mounts do not nest",
                    fix="mount the outer folder only, or run this service with another driver",
                )
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(host)
        return root

    def _python_for(self, kind: str) -> str:
        if self._engine_python is not None:
            return str(self._engine_python)
        from tierctl.realengine.registry import REAL_ENGINES

        real = REAL_ENGINES.get(kind)
        return str(real.ensure_python()) if real is not None else sys.executable

    def _start(self, dep: Deployment, service: str) -> None:
        logs = self._dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        # One log per start: a failed canary's log is still there after its rollback.
        taken = re.compile(re.escape(service) + r"\.(\d+)\.log")
        n = 1 + max(
            (int(m[1]) for p in logs.iterdir() if (m := taken.fullmatch(p.name))), default=0
        )
        log = logs / f"{service}.{n}.log"
        env = child_environment(os.environ)
        if self._engine == "sim" or self._custom_launcher:
            # The directory holding the ``tierctl`` package (this file is
            # tierctl/rollout/drivers/), found without importing the package root.
            src = str(Path(__file__).resolve().parents[3])
            env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        else:
            # A real engine runs from its own install; tierctl's source is not for it, and it
            # never reaches a model hub.
            env.pop("PYTHONPATH", None)
            env.update(OFFLINE_ENV)
            profile = profile_for_argv(dep.argv(service))
            from tierctl.realengine.registry import REAL_ENGINES

            real = REAL_ENGINES.get(profile.kind) if profile is not None else None
            first = real.pythonpath() if real is not None else None
            if first is not None:
                # e.g. SGLang's CPU build imports sgl_kernel, whose CPU build is unpublished:
                # tierctl's stand-in comes first on its PYTHONPATH.
                env["PYTHONPATH"] = str(first)
        for key, value in (dep.services[service].get("environment") or {}).items():
            if value is not None and "${" not in value:
                env[key] = value
        # Local engines listen on loopback only, whatever --host the file gives (0.0.0.0 is
        # right inside a container's network, not on an operator's machine).
        env["TIERCTL_BIND_HOST"] = "127.0.0.1"
        env.update(self._extra_env)
        argv = self.command(dep, service)
        cwd = self._dir
        if self._engine == "real" and not self._custom_launcher:
            cwd = self._mount_root(dep, service)
        process = ServerProcess(argv, log, env=env, cwd=cwd, name=f"local engine {service}")
        process.start()
        assert process.proc is not None
        proc = process.proc
        self._children[proc.pid] = proc
        # Recorded before it is ready: if this rollout dies while the engine starts, the next
        # one (a --resume) still finds and stops it.
        with self._lock:
            state = self.state()
            state[service] = {"pid": proc.pid, "url": None, "log": str(log), "argv": argv}
            self._save(state)
        try:
            url = self._await_ready(dep, service, process)
        except BaseException:
            # Failed, timed out or interrupted: a half-started engine is stopped, not left.
            self._stop(service)
            raise
        with self._lock:
            state = self.state()
            state[service] = {"pid": proc.pid, "url": url, "log": str(log), "argv": argv}
            self._save(state)

    def _await_ready(self, dep: Deployment, service: str, process: ServerProcess) -> str:
        if self._engine == "real" and not self._custom_launcher:
            profile = profile_for_argv(dep.argv(service))
            assert profile is not None  # _real_command checked it
            # The port as rendered, on loopback (where bind_loopback made it listen).
            url = engine_url([*dep.argv(service), "--host", LOOPBACK], profile.default_port)
            probe = http_ready(url + profile.health_path)
            process.wait_ready(probe, self._start_timeout_s, poll_s=0.5, sleep=self._sleep)
            return url
        found: list[str] = []

        def listening() -> bool:
            m = _LISTENING.search(process.log.read_text(errors="replace"))
            if m:
                found.append(m.group(1))
            return m is not None

        try:
            process.wait_ready(listening, self._start_timeout_s, poll_s=0.05, sleep=self._sleep)
        except RuntimeFailure as exc:
            raise RuntimeFailure(
                f"{exc.message} before `listening on`",
                rule="an engine prints `listening on http://HOST:PORT` when it serves",
                fix=exc.fix,
            ) from None
        # A server bound to every interface is reached on loopback.
        return found[-1].replace("//0.0.0.0:", "//127.0.0.1:").replace("//[::]:", "//[::1]:")

    def _stop(self, service: str) -> None:
        with self._lock:
            entry = self.state().get(service)
        if entry is None:
            return
        # Killed before it leaves the state: a stop interrupted half-way leaves the entry for
        # `tierctl stop` or a resumed rollout to find.
        self._kill(int(entry["pid"]))
        with self._lock:
            state = self.state()
            state.pop(service, None)
            self._save(state)

    def _kill(self, pid: int) -> None:
        # The whole group: SIGTERM, a grace period, then SIGKILL for whatever is left (an
        # engine core that outlived its API server).
        stop_group(pid, self._stop_timeout_s, child=self._children.pop(pid, None))

    def _save(self, state: dict[str, dict[str, Any]]) -> None:
        path = self._dir / "state.json"
        tmp = path.with_suffix(f".{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
        os.replace(tmp, path)


# A real engine never reaches a model hub from here.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


#: The only address a local engine listens on.
LOOPBACK = "127.0.0.1"


def _drop_own_link(root: Path, target: str) -> None:
    """Remove the symlink an earlier start of this service laid for ``target`` (it leads to
    the mount's host folder, outside ``root``, so checking the path through it would refuse
    every restart). Only a symlink is removed, and only under a parent that is itself inside
    ``root`` (not reached through any symlink), so nothing outside ``root`` is touched."""
    parts = [p for p in PurePosixPath(target).parts if p not in ("/", ".")]
    if not parts or ".." in parts:
        return  # resolve_inside refuses it with the reason
    link = root.joinpath(*parts)
    try:
        parent_real = link.parent.resolve()
        root_real = root.resolve()
    except (OSError, RuntimeError):
        return
    if parent_real != root_real and root_real not in parent_real.parents:
        return
    if link.is_symlink():
        link.unlink()


def bind_loopback(flags: Sequence[str]) -> list[str]:
    """Engine flags with the listen address forced to loopback: every ``--host X`` and
    ``--host=X`` becomes ``--host 127.0.0.1``, and one is added when the flags name none
    (vLLM's default listens on every interface)."""
    out: list[str] = []
    bound = False
    i = 0
    while i < len(flags):
        token = flags[i]
        if token == "--host":
            out += ["--host", LOOPBACK]
            bound = True
            i += 2  # the value, whatever it was
            continue
        if token.startswith("--host="):
            out.append(f"--host={LOOPBACK}")
            bound = True
        else:
            out.append(token)
        i += 1
    if not bound:
        out += ["--host", LOOPBACK]
    return out


def _host_values(flags: Sequence[str]) -> list[str]:
    """Every ``--host`` value the flags give, in order."""
    out = []
    for i, token in enumerate(flags):
        if token == "--host":
            out.append(flags[i + 1] if i + 1 < len(flags) else "")
        elif token.startswith("--host="):
            out.append(token.split("=", 1)[1])
    return out


def engine_url(argv: Sequence[str], default_port: int) -> str:
    """Where an engine command listens: its ``--host`` (every interface -> loopback) and
    ``--port``."""
    flags = parse_argv(list(argv)).flags
    host = flags.get("host")
    port = flags.get("port")
    host_s = host if isinstance(host, str) and host else "127.0.0.1"
    if host_s in ("0.0.0.0", "::", "[::]"):
        host_s = "127.0.0.1"
    port_s = port if isinstance(port, str) and port.isdigit() else str(default_port)
    return f"http://{host_s}:{port_s}"


def bind_mounts(dep: Deployment, service: str) -> list[tuple[str, str]]:
    """(container path, host path) of the service's bind mounts, longest container path first.

    Short (``HOST:CONTAINER[:MODE]``) and long (``{type: bind, source, target}``) syntax;
    ``${VAR}`` in the host side is filled from this environment, ``~`` expanded, and a relative
    host path is taken from the compose file's folder, as compose does. Named volumes are not
    paths and are skipped.
    """
    from tierctl.compose.interpolation import Interpolation, InterpolationError, interpolate

    out: list[tuple[str, str]] = []
    base = Path(dep.ref.path).parent
    for entry in dep.services.get(service, {}).get("volumes") or []:
        try:
            # Compose fills variables before it reads a volume, so `${VAR:?msg}` (whose
            # colons are not separators) is resolved first.
            if isinstance(entry, str):
                parts = interpolate(entry, os.environ, Interpolation.STRICT).split(":")
                if len(parts) < 2:
                    continue
                source, target = parts[0], parts[1]
            elif isinstance(entry, dict) and entry.get("type", "bind") == "bind":
                source = interpolate(str(entry.get("source", "")), os.environ, Interpolation.STRICT)
                target = str(entry.get("target", ""))
            else:
                continue
        except InterpolationError as exc:
            raise RuntimeFailure(
                f"{service}: the bind mount {entry!r} needs {exc}",
                rule="a local engine sees its bind mounts at their host paths",
                fix="export the variable the compose file names",
            ) from None
        if not source or not target or not (source.startswith((".", "/", "~"))):
            continue  # a named volume
        host = Path(source).expanduser()
        if not host.is_absolute():
            host = base / host
        out.append((target.rstrip("/"), str(host)))
    return sorted(out, key=lambda m: -len(m[0]))


def _host_path(token: str, mounts: list[tuple[str, str]]) -> str:
    for target, host in mounts:
        if token == target or token.startswith(target + "/"):
            return host + token[len(target) :]
        if token.startswith("--") and "=" in token:
            flag, _, value = token.partition("=")
            mapped = _host_path(value, mounts)
            if mapped != value:
                return f"{flag}={mapped}"
    return token


def _runs(pid: int, argv: list[str]) -> bool:
    """Whether process ``pid`` is alive and runs exactly ``argv`` (Linux /proc)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return bool(argv) and raw.rstrip(b"\0").split(b"\0") == [a.encode() for a in argv]


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
