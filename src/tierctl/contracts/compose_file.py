"""Reading a compose file the way ``docker compose config`` sees it.

YAML anchors and merge keys are resolved, ``$`` interpolation is checked (and by default kept
as written, see :mod:`tierctl.contracts.interpolation`), ``command``/``entrypoint`` strings are
split like a shell does (a folded ``command: >`` is one string), and ``environment`` and
``labels`` are maps whichever form the file uses. A line map points messages at the file.
Several files merge like compose override files: maps merge, ``command`` is replaced whole.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tierctl.contracts.interpolation import InterpolationError, interpolate
from tierctl.errors import ComposeInputError, Location
from tierctl.spec.loader import LineMap, PathKey, format_path

try:  # libyaml is several times faster; the pure-Python loader gives the same result.
    _Loader: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment]
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.SafeLoader

# Compose keys whose list value replaces, rather than extends, a base file's list.
_REPLACED = {"command", "entrypoint", "test", "device_ids", "capabilities"}
_LINE_DEPTH = 5


@dataclass(frozen=True)
class ComposeService:
    """One service, normalised."""

    name: str
    data: dict[str, Any] = field(repr=False)
    command: tuple[str, ...] | None
    environment: dict[str, str | None]
    labels: dict[str, str]

    @property
    def image(self) -> str | None:
        """The image reference, if any."""
        value = self.data.get("image")
        return str(value) if value is not None else None

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        """GPU ids reserved in ``deploy.resources.reservations.devices[*].device_ids``."""
        deploy = self.data.get("deploy")
        resources = deploy.get("resources") if isinstance(deploy, dict) else None
        reservations = resources.get("reservations") if isinstance(resources, dict) else None
        devices = reservations.get("devices") if isinstance(reservations, dict) else None
        out: list[str] = []
        for device in devices if isinstance(devices, list) else []:
            ids = device.get("device_ids") if isinstance(device, dict) else None
            if isinstance(ids, list):
                out.extend(str(d) for d in ids)
            elif isinstance(ids, str | int) and not isinstance(ids, bool):
                out.append(str(ids))
        return tuple(out)

    @property
    def container_name(self) -> str | None:
        """The container name, if set."""
        value = self.data.get("container_name")
        return str(value) if value is not None else None


@dataclass(frozen=True)
class ComposeFile:
    """A compose document (or several merged), normalised, with where each key came from.

    The line map is computed on first use: a clean file never needs it, and building it
    costs a second pass over the YAML.
    """

    source: str
    data: dict[str, Any] = field(repr=False)
    services: dict[str, ComposeService]
    texts: tuple[tuple[str, str], ...] = field(repr=False)  # (source, YAML text) in merge order

    @functools.cached_property
    def lines(self) -> dict[PathKey, tuple[str, int]]:
        """(file, line) of each key path; a later file wins, as in a merge."""
        out: dict[PathKey, tuple[str, int]] = {}
        for name, text in self.texts:
            out.update({k: (name, v) for k, v in _line_map(text).items()})
        return out

    def location(self, *path: str | int) -> Location:
        """File and line of ``path`` (or its nearest ancestor), and the dotted path."""
        for end in range(len(path), -1, -1):
            hit = self.lines.get(tuple(path[:end]))
            if hit is not None:
                return Location(file=hit[0], line=hit[1], path=format_path(tuple(path)))
        return Location(file=self.source, path=format_path(tuple(path)))


def load_compose(
    path_or_text: str | Path,
    *,
    source: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ComposeFile:
    """Read one compose file (a path, or YAML text with ``source`` naming it).

    Args:
        path_or_text: a file path (a ``Path``, or a ``str`` without a newline), or the YAML
            text itself (a ``str`` with at least one newline).
        source: the name used in messages (default: the path; required for text).
        env: variables to substitute; None keeps every ``${...}`` as written.

    Raises:
        ComposeInputError: unreadable file, malformed YAML, not a mapping, or bad interpolation;
            located at file:line.
    """
    if isinstance(path_or_text, Path) or "\n" not in path_or_text:
        path = Path(path_or_text)
        name = source or str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ComposeInputError(
                f"cannot read compose file: {exc.__class__.__name__}: {exc}",
                location=Location(file=name),
            ) from None
    else:
        text = str(path_or_text)
        name = source or "<compose>"
    data = _parse(text, name)
    data = _interpolate_tree(data, (), name, text, env)
    return _build(name, data, ((name, text),))


def merge_compose(files: Sequence[ComposeFile]) -> ComposeFile:
    """Merge compose files like ``docker compose -f a -f b``: later files override earlier."""
    if len(files) == 1:
        return files[0]
    data: dict[str, Any] = {}
    for f in files:
        data = _merge(data, _normalised_for_merge(f.data), "")
    texts = tuple(t for f in files for t in f.texts)
    return _build(" + ".join(f.source for f in files), data, texts)


def _parse(text: str, source: str) -> dict[str, Any]:
    loader = _Loader(text)
    try:
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ComposeInputError(
            (exc.problem or exc.context or "malformed YAML").strip(),
            location=Location(file=source, line=mark.line + 1 if mark else None),
            rule="yaml-syntax",
            fix="fix the YAML at that line (indentation, quoting, colons)",
        ) from None
    except yaml.YAMLError as exc:
        raise ComposeInputError(f"malformed YAML: {exc}", location=Location(file=source)) from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ComposeInputError(
            "a compose file must be a mapping with a services: key",
            location=Location(file=source, line=1),
            value=type(data).__name__,
        )
    services = data.get("services")
    if services is not None and not isinstance(services, dict):
        raise ComposeInputError(
            "services: must be a mapping of service name to service",
            location=Location(file=source, path="services"),
        )
    return data


def _line_map(text: str) -> dict[PathKey, int]:
    """Line of each key/item path, from the YAML node tree (anchors resolved as aliases)."""
    lines: dict[PathKey, int] = {}
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:
        return lines
    if node is not None:
        _record_lines(node, (), lines)
    return lines


def _record_lines(node: yaml.Node, path: PathKey, lines: dict[PathKey, int]) -> None:
    if len(path) > _LINE_DEPTH:
        return
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            child = (*path, key)
            lines.setdefault(child, key_node.start_mark.line + 1)
            _record_lines(value_node, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines.setdefault((*path, i), item.start_mark.line + 1)
            _record_lines(item, (*path, i), lines)


def _interpolate_tree(
    node: Any,
    path: PathKey,
    source: str,
    text: str,
    env: Mapping[str, str] | None,
) -> Any:
    if isinstance(node, dict):
        return {
            k: _interpolate_tree(v, (*path, str(k)), source, text, env) for k, v in node.items()
        }
    if isinstance(node, list):
        return [_interpolate_tree(v, (*path, i), source, text, env) for i, v in enumerate(node)]
    if isinstance(node, str) and "$" in node:
        try:
            return interpolate(node, env)
        except InterpolationError as exc:
            line_map = LineMap()
            for key, line in _line_map(text).items():
                line_map.add(key, line - 1)
            raise ComposeInputError(
                str(exc),
                location=Location(file=source, line=line_map.line(path), path=format_path(path)),
                rule="interpolation",
                fix="use ${NAME}, ${NAME:-default} or ${NAME:?message}; write $$ for a literal $",
            ) from None
    return node


def _build(source: str, data: dict[str, Any], texts: tuple[tuple[str, str], ...]) -> ComposeFile:
    services: dict[str, ComposeService] = {}
    for name, raw in (data.get("services") or {}).items():
        if not isinstance(raw, dict):
            line = _line_map(texts[-1][1]).get(("services", str(name)))
            raise ComposeInputError(
                f"service {name} must be a mapping",
                location=Location(file=texts[-1][0], line=line),
            )
        services[str(name)] = ComposeService(
            name=str(name),
            data=raw,
            command=split_command(raw.get("command")),
            environment=normalise_environment(raw.get("environment")),
            labels={
                k: "" if v is None else v
                for k, v in normalise_environment(raw.get("labels")).items()
            },
        )
    return ComposeFile(source=source, data=data, services=services, texts=texts)


def split_command(value: Any) -> tuple[str, ...] | None:
    """A command as argv: a string is split like a shell (folded ``>`` strings included)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError:
            # Unbalanced quotes: compose would fail too; keep whitespace tokens so the argv
            # contract reports the difference instead of crashing.
            return tuple(value.split())
    if isinstance(value, list):
        return tuple(scalar_text(v) for v in value)
    return (scalar_text(value),)


def scalar_text(value: Any) -> str:
    """A YAML scalar as compose passes it to the container (``true``, ``4``, ``0.82``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def normalise_environment(value: Any) -> dict[str, str | None]:
    """``environment``/``labels`` in list (``A=1``, bare ``A``) or map form, as a map."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): None if v is None else scalar_text(v) for k, v in value.items()}
    out: dict[str, str | None] = {}
    if isinstance(value, list):
        for item in value:
            key, sep, val = str(item).partition("=")
            out[key] = val if sep else None
    return out


def _normalised_for_merge(data: dict[str, Any]) -> dict[str, Any]:
    services = {}
    for name, raw in (data.get("services") or {}).items():
        raw = dict(raw)
        for key in ("environment", "labels"):
            if key in raw:
                raw[key] = normalise_environment(raw[key])
        services[name] = raw
    return {**data, "services": services}


def _merge(base: Any, over: Any, key: str) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(out[k], v, str(k)) if k in out else v
        return out
    if isinstance(base, list) and isinstance(over, list) and key not in _REPLACED:
        return base + [item for item in over if item not in base]
    return over
