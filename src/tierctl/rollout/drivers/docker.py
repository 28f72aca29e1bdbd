"""The docker driver: the ``docker compose`` CLI, local or through ``DOCKER_HOST``.

Per step: ``docker compose -f F --dry-run up -d --no-deps --force-recreate SERVICE`` to see what
would happen, ``docker compose -f F up -d --no-deps --force-recreate SERVICE`` to apply, and
``docker compose -f F rm -s -f SERVICE`` for a scoped down (``down SERVICE`` is missing from
older compose releases; ``rm -s -f`` stops and removes just that service everywhere).
A ``git:REF:PATH`` side is written to a work directory first and run with
``--project-directory`` set to where the file lives in the repository, so relative paths and
the project name resolve as they would from a checkout.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierctl.errors import RuntimeFailure
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.base import require_services
from tierctl.rollout.dryrun import DryRunResult, parse_dry_run, stopped_at_config_copy
from tierctl.rollout.plan_schema import SourceRef


@dataclass(frozen=True)
class RunResult:
    """A finished command."""

    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str]], RunResult]


def subprocess_runner(argv: Sequence[str], env: Mapping[str, str] | None = None) -> RunResult:
    """Run a command and capture its output (the default runner); ``env`` is its whole
    environment (default: this process's)."""
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, check=False, timeout=900, env=env
        )
    except FileNotFoundError:
        raise RuntimeFailure(
            f"{argv[0]} is not installed",
            rule="the docker driver runs the docker compose CLI",
            fix="install docker with the compose plugin, or use `driver` compose-manager",
            params=("driver",),
        ) from None
    except subprocess.TimeoutExpired:
        raise RuntimeFailure(
            f"{' '.join(argv[:4])} did not finish in 900 s",
            rule="compose commands finish",
            fix="check the docker daemon",
        ) from None
    return RunResult(proc.returncode, proc.stdout, proc.stderr)


class DockerDriver:
    """Drive ``docker compose`` through an injected runner."""

    name = "docker"

    def __init__(
        self,
        workdir: Path,
        *,
        project: str | None = None,
        repo_root: Path | None = None,
        gate_host: str = "127.0.0.1",
        runner: Runner | None = None,
        docker: str = "docker",
        compose: Sequence[str] | None = None,
        docker_host: str | None = None,
        docker_context: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Create the driver.

        Args:
            workdir: Where ``git:`` sides are written as files.
            project: ``-p`` project name; compose's default when ``None``.
            repo_root: The repository root of ``git:`` sources.
            gate_host: The host the gates reach engines on.
            runner: Runs one argv (injected in unit tests; default: a subprocess in the
                environment below).
            docker: The docker executable (``docker compose`` is its plugin).
            compose: The compose command's first words instead of ``docker compose`` (the
                standalone Compose v2 binary).
            docker_host: The engine to drive (``DOCKER_HOST``: ``unix://``, ``tcp://``,
                ``ssh://user@host``); default: compose's own choice.
            docker_context: A Docker context to use instead (``DOCKER_CONTEXT``).
            env: Compose's environment (default: this process's), before the two above.
        """
        self._workdir = workdir
        self._project = project
        self._repo_root = repo_root or Path.cwd()
        self._gate_host = gate_host
        self.env = dict(env if env is not None else os.environ)
        if docker_host:
            self.env["DOCKER_HOST"] = docker_host
        if docker_context:
            self.env["DOCKER_CONTEXT"] = docker_context
            self.env.pop("DOCKER_HOST", None)  # DOCKER_HOST would win over the context
        self._runner = runner or functools.partial(subprocess_runner, env=self.env)
        self._compose = tuple(compose) if compose else (docker, "compose")

    def secrets(self) -> tuple[str, ...]:
        """None: the docker CLI reads its own credentials."""
        return ()

    def endpoint(self, dep: Deployment, service: str) -> str:
        """``http://GATE_HOST:PORT`` from the service's ``--port``."""
        return f"http://{self._gate_host}:{dep.engine_port(service)}"

    def base_argv(self, dep: Deployment) -> list[str]:
        """``docker compose -f FILE [-f OVERRIDE ...] [--project-directory D] [-p P]`` for
        one side (its override files merged over it, in order, as the plan read them)."""
        argv = [*self._compose]
        for ref, text in dep.files:
            argv += ["-f", str(self._file(dep.side, ref, text))]
        if dep.ref.git_ref is not None:
            argv += ["--project-directory", str((self._repo_root / dep.ref.path).parent)]
        if self._project:
            argv += ["-p", self._project]
        return argv

    def dry_run_argv(self, dep: Deployment, services: list[str]) -> list[str]:
        """The dry-run command of a scoped up."""
        require_services(services)
        return [*self.base_argv(dep), "--dry-run", *self._up_args(services)]

    def apply_argv(self, dep: Deployment, services: list[str]) -> list[str]:
        """The scoped, forced up."""
        require_services(services)
        return [*self.base_argv(dep), *self._up_args(services)]

    def down_argv(self, dep: Deployment, services: list[str]) -> list[str]:
        """The scoped down: stop and remove only these services."""
        require_services(services)
        return [*self.base_argv(dep), "rm", "-s", "-f", *services]

    def logs_argv(self, dep: Deployment, service: str) -> list[str]:
        """The service's log: its current container's output since it started."""
        return [*self.base_argv(dep), "logs", "--no-color", "--no-log-prefix", service]

    def logs(self, dep: Deployment, service: str) -> str | None:
        """The engine's log since its container started, for the gates (vLLM's startup
        ``non-default args`` line, fatal lines in a soak); None when compose cannot say."""
        res = self._runner(self.logs_argv(dep, service))
        return res.stdout + res.stderr if res.returncode == 0 else None

    def container_state(self, dep: Deployment, service: str) -> tuple[str, int | None] | None:
        """The service's container state and exit code (``docker compose ps -a``); None when
        compose cannot say."""
        res = self._runner([*self.base_argv(dep), "ps", "-a", "--format", "json", service])
        if res.returncode != 0:
            return None
        return container_state_of(res.stdout, service)

    def dry_run(self, dep: Deployment, services: list[str]) -> DryRunResult:
        """Run the dry run and parse what it would do."""
        argv = self.dry_run_argv(dep, services)
        res = self._runner(argv)
        lines = (res.stdout + "\n" + res.stderr).splitlines()
        if res.returncode != 0 and stopped_at_config_copy(lines):
            return parse_dry_run(lines, dep.services, self._project)
        no_plugin = _no_compose_plugin(res.stderr + res.stdout)
        # Only compose's refusal of the flag itself: a real dry run that fails prints
        # "DRY-RUN MODE" on every line, and its failure is the file's or the engine's.
        if res.returncode != 0 and not no_plugin and _no_dry_run_flag(res.stderr + res.stdout):
            raise RuntimeFailure(
                "this docker compose has no --dry-run",
                rule="every step is dry-run first and must plan exactly its service",
                value=(res.stderr or res.stdout).strip()[:200],
                fix="upgrade the compose plugin to 2.17 or later, or use `driver` compose-manager",
                params=("driver",),
            )
        self._check(argv, res)
        return parse_dry_run(lines, dep.services, self._project)

    def apply(self, dep: Deployment, services: list[str]) -> None:
        """Recreate the services."""
        self._run(self.apply_argv(dep, services))

    def down(self, dep: Deployment, services: list[str]) -> None:
        """Stop and remove the services."""
        self._run(self.down_argv(dep, services))

    @staticmethod
    def _up_args(services: list[str]) -> list[str]:
        return ["up", "-d", "--no-deps", "--force-recreate", *services]

    def _file(self, side: str, ref: SourceRef, text: str) -> Path:
        """The file on disk: itself, or a ``git:`` file's text written once to the workdir."""
        if ref.git_ref is None:
            return Path(ref.path)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        path = self._workdir / f"{side}-{digest}-{Path(ref.path).name}"
        if not path.exists():
            self._workdir.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return path

    def _run(self, argv: list[str]) -> RunResult:
        return self._check(argv, self._runner(argv))

    def _check(self, argv: list[str], res: RunResult) -> RunResult:
        if res.returncode != 0 and _no_compose_plugin(res.stderr + res.stdout):
            # Without the plugin `docker` parses `compose -f` as its own flags and says
            # "unknown shorthand flag: 'f'": name the real cause, not the symptom.
            raise RuntimeFailure(
                "docker has no compose plugin: `docker compose` is not a docker command here",
                rule="the docker driver runs `docker compose` (Compose v2)",
                value=(res.stderr or res.stdout).strip()[:200],
                fix="install the Compose v2 plugin (Debian/Ubuntu: apt-get install "
                "docker-compose-plugin or docker-compose-v2), or use `driver` compose-manager",
                params=("driver",),
            )
        if res.returncode != 0:
            tail = "; ".join((res.stderr or res.stdout).strip().splitlines()[-5:])
            raise RuntimeFailure(
                f"`{' '.join(argv)}` exited {res.returncode}: {tail}",
                rule="docker compose must succeed",
                fix="read compose's message, fix, then run the step again",
            )
        return res


def _no_dry_run_flag(output: str) -> bool:
    """Whether compose refused ``--dry-run`` as an unknown flag (compose before 2.17)."""
    text = output.lower()
    return "unknown flag: --dry-run" in text


def _no_compose_plugin(output: str) -> bool:
    """Whether docker's answer means the ``compose`` subcommand does not exist."""
    text = output.lower()
    return (
        "unknown shorthand flag: 'f' in -f" in text
        or "'compose' is not a docker command" in text
        or "unknown command: docker compose" in text
    )


def container_state_of(text: str, service: str) -> tuple[str, int | None] | None:
    """``docker compose ps --format json``'s state and exit code of ``service`` (Compose 2.21+
    prints one JSON object a line, older releases one array); None when it is not listed."""
    rows: list[Any] = []
    for line in text.splitlines():
        try:
            got = json.loads(line)
        except ValueError:
            continue
        rows.extend(got if isinstance(got, list) else [got])
    for row in rows:
        if isinstance(row, dict) and row.get("Service") == service:
            code = row.get("ExitCode")
            return str(row.get("State", "")), code if isinstance(code, int) else None
    return None
