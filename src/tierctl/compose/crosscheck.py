"""tierctl's reading of a project compared with the real Compose's, value by value.

``validate`` calls :func:`compare_with_binary` when a Compose v2 binary is present: any
:class:`ComposeDifference` is a place where tierctl would check something other than what
``docker compose`` will run, so it is reported with both values. The differential suite
(``tests/compose_oracle``) holds the reader to zero differences over thousands of projects;
this is the same comparison on the operator's own files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierctl.compose.binary import ComposeBinary, compose_config, find_compose_binary
from tierctl.compose.loader import load_compose
from tierctl.compose.merge import merge_compose
from tierctl.compose.project import FileCheck, ProjectOptions, project_config
from tierctl.errors import ComposeInputError, Location, TierctlError

#: Compared: what a service runs, and the volumes it mounts (the project name is not).
COMPARED = ("services", "volumes", "networks", "configs", "secrets")


@dataclass(frozen=True)
class ComposeDifference:
    """One place where tierctl and Compose read a project differently.

    Attributes:
        path: the dotted key (``services.web.ports.0.published``); ``(project)`` when one
            side refused the whole project.
        tierctl: tierctl's value (JSON text), or its refusal.
        compose: Compose's value (JSON text), or its refusal.
        location: where the key is written, when tierctl knows.
    """

    path: str
    tierctl: str
    compose: str
    location: Location | None = None

    def text(self) -> str:
        """One line for a report."""
        return f"{self.path}: tierctl reads {self.tierctl}, docker compose reads {self.compose}"


def differences(mine: Any, theirs: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every path where two readings differ (a key on one side only, or another value)."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key in sorted(set(mine) | set(theirs), key=str):
            if key not in mine or key not in theirs:
                yield (*path, str(key))
            else:
                yield from differences(mine[key], theirs[key], (*path, str(key)))
    elif isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            yield from differences(a, b, (*path, str(i)))
    elif mine != theirs:
        yield path


def value_at(node: Any, path: Sequence[str]) -> Any:
    """The value at a path of :func:`differences` (``(absent)`` where there is none)."""
    for key in path:
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return "(absent)"
    return node


def _locate(files: Sequence[str | Path], path: Sequence[str]) -> Location | None:
    """Where a compared key is written (the last file that sets it), when tierctl can tell."""
    try:
        merged = merge_compose([load_compose(Path(f), overlay=i > 0) for i, f in enumerate(files)])
    except TierctlError:
        return None
    return merged.location(*(int(p) if p.isdigit() else p for p in path))


def compare_with_binary(
    files: Sequence[str | Path],
    *,
    binary: ComposeBinary | None = None,
    profiles: Sequence[str] = (),
    env_files: Sequence[str | Path] = (),
    project_directory: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    check: FileCheck | None = None,
) -> list[ComposeDifference]:
    """Read ``files`` with tierctl and with Compose; every difference between the two.

    Args:
        files: the compose files, in ``-f`` order.
        binary: the Compose v2 binary (default: :func:`find_compose_binary`).
        profiles, env_files, project_directory: as ``docker compose`` takes them.
        environ: the environment both read (default: this process's).
        check: run by tierctl on each file (the CLI passes the compose-spec schema's).

    Returns:
        Empty when both read the same services, volumes, networks, configs and secrets, or
        both refuse the project.

    Raises:
        RuntimeFailure: there is no binary, or it failed without a refusal.
    """
    binary = binary or find_compose_binary()
    options = ProjectOptions(
        profiles=tuple(profiles),
        env_files=tuple(str(e) for e in env_files),
        project_directory=str(project_directory) if project_directory is not None else None,
        project_name="tierctl-crosscheck",
        environ=environ,
    )
    mine: dict[str, Any] | TierctlError
    theirs: dict[str, Any] | ComposeInputError
    try:
        mine = project_config(files, options, check=check)
    except ComposeInputError as exc:
        mine = exc
    try:
        theirs = compose_config(
            files,
            binary=binary,
            profiles=profiles,
            env_files=env_files,
            project_name="tierctl-crosscheck",
            project_directory=project_directory,
            env=environ,
        )
    except ComposeInputError as exc:
        theirs = exc
    if isinstance(mine, TierctlError) or isinstance(theirs, TierctlError):
        if isinstance(mine, TierctlError) and isinstance(theirs, TierctlError):
            return []
        return [
            ComposeDifference(
                "(project)",
                f"refused: {mine.message}" if isinstance(mine, TierctlError) else "accepted",
                f"refused: {theirs.message}" if isinstance(theirs, TierctlError) else "accepted",
                mine.location if isinstance(mine, TierctlError) else None,
            )
        ]
    left = {k: mine.get(k) for k in COMPARED if k in mine}
    right = {k: theirs.get(k) for k in COMPARED if k in theirs}
    return [
        ComposeDifference(
            ".".join(path),
            json.dumps(value_at(left, path)),
            json.dumps(value_at(right, path)),
            _locate(files, path),
        )
        for path in differences(left, right)
    ]
