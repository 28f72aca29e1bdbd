"""Reading a compose file the way ``docker compose config`` sees it.

YAML anchors and merge keys are resolved, ``$`` interpolation is applied in the caller's mode
(:mod:`tierctl.compose.interpolation`), and every service is normalised
(:class:`~tierctl.compose.model.ComposeService`). Errors name the file and line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierctl.compose.interpolation import (
    Interpolation,
    InterpolationError,
    MissingVariable,
    interpolate,
)
from tierctl.compose.lines import YamlLoader, locate, merged_lines
from tierctl.compose.model import ComposeFile
from tierctl.errors import ComposeInputError, Location
from tierctl.readers import PathKey, load_yaml, read_text


def load_compose(
    path_or_text: str | Path,
    *,
    source: str | None = None,
    env: Mapping[str, str] | None = None,
    interpolation: Interpolation | None = None,
) -> ComposeFile:
    """Read one compose file (a path, or YAML text with ``source`` naming it).

    Args:
        path_or_text: a file path (a ``Path``, or a ``str`` without a newline), or the YAML
            text itself (a ``str`` with at least one newline).
        source: the name used in messages (default: the path; ``<compose>`` for text).
        env: variables to substitute.
        interpolation: KEEP, DEFAULTS or STRICT; default KEEP without ``env`` (every
            ``${...}`` kept as written), STRICT with it.

    Raises:
        ComposeInputError: unreadable file, malformed YAML, not a mapping, bad interpolation,
            or a service compose cannot read; located at file:line.
    """
    if isinstance(path_or_text, Path) or "\n" not in path_or_text:
        path = Path(path_or_text)
        name = source or str(path)
        text = read_text(path, what="compose", error=ComposeInputError)
    else:
        text = str(path_or_text)
        name = source or "<compose>"
    return parse_compose(text, source=name, env=env, interpolation=interpolation)


def parse_compose(
    text: str,
    *,
    source: str,
    env: Mapping[str, str] | None = None,
    interpolation: Interpolation | None = None,
) -> ComposeFile:
    """Read compose YAML text; arguments and errors as :func:`load_compose`."""
    data = _parse(text, source)
    data = _interpolate_tree(data, (), _Where(source, text, env, interpolation))
    return ComposeFile.from_data(source, data, ((source, text),))


def _parse(text: str, source: str) -> dict[str, Any]:
    data = load_yaml(text, source, error=ComposeInputError, loader=YamlLoader).data
    if not isinstance(data, dict):
        raise ComposeInputError(
            "a compose file must be a mapping with a services: key",
            location=Location(file=source, line=1),
            value=type(data).__name__,
        )
    services = data.get("services")
    if services is not None and not isinstance(services, dict):
        raise ComposeInputError(
            "must be a mapping of service name to service",
            location=Location(file=source, path="services"),
            value=type(services).__name__,
        )
    return data


@dataclass(frozen=True)
class _Where:
    """What interpolation needs besides the value: the mode, and the text for locating errors."""

    source: str
    text: str
    env: Mapping[str, str] | None
    mode: Interpolation | None


def _interpolate_tree(node: Any, path: PathKey, where: _Where) -> Any:
    if isinstance(node, dict):
        return {k: _interpolate_tree(v, (*path, str(k)), where) for k, v in node.items()}
    if isinstance(node, list):
        return [_interpolate_tree(v, (*path, i), where) for i, v in enumerate(node)]
    if isinstance(node, str) and "$" in node:
        try:
            return interpolate(node, where.env, where.mode)
        except InterpolationError as exc:
            raise ComposeInputError(
                str(exc),
                location=locate(merged_lines(((where.source, where.text),)), path, where.source),
                rule="interpolation",
                fix=f"set {exc.name} in the environment"
                if isinstance(exc, MissingVariable)
                else "use ${NAME}, ${NAME:-default} or ${NAME:?message}; write $$ for a literal $",
            ) from None
    return node
