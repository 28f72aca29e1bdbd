"""Reading a tier spec from YAML, with every problem located by file, line and field path.

The YAML is parsed once (PyYAML's C parser where available, with YAML 1.2 scalars); the node
tree gives the line of every key, and the constructed data is checked by the pydantic models and by
:mod:`tierctl.spec.checks`. Every problem becomes a :class:`~tierctl.errors.SpecError` carrying
the line of the offending key, so an operator never has to hunt for it.
"""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from tierctl.errors import Location, SpecError, SpecErrors
from tierctl.spec.checks import check_spec
from tierctl.spec.model import TierSpec
from tierctl.yaml12 import Yaml12Loader

PathKey = tuple[str | int, ...]


class LineMap:
    """Line (1-based) of each key or item of a YAML document, by field path."""

    def __init__(self) -> None:
        self._lines: dict[PathKey, int] = {}

    def add(self, path: PathKey, line0: int) -> None:
        self._lines[path] = line0 + 1

    def __contains__(self, path: object) -> bool:
        return path in self._lines

    def line(self, path: PathKey) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            found = self._lines.get(path[:end])
            if found is not None:
                return found
        return None


def format_path(path: PathKey) -> str:
    """``('replicas', 'r2', 'args', 'port')`` -> ``replicas.r2.args.port``; ints as ``[i]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


SpecLoader = Yaml12Loader


def _walk(node: yaml.Node, path: PathKey, lines: LineMap, source: str) -> None:
    """Record the line of every key and item; refuse duplicate keys (PyYAML keeps the last)."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line0 = key_node.start_mark.line
            if key in seen and key != "<<":
                raise SpecError(
                    f"duplicate key {key!r} (first given at line {seen[key] + 1})",
                    location=Location(file=source, line=line0 + 1, path=format_path((*path, key))),
                    rule="duplicate-key",
                    fix="give each key (each replica, flag, service) once",
                )
            seen[key] = line0
            lines.add((*path, key), line0)
            _walk(value_node, (*path, key), lines, source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines.add((*path, i), item.start_mark.line)
            _walk(item, (*path, i), lines, source)


def parse_yaml(text: str, source: str) -> tuple[Any, LineMap]:
    """Parse YAML text into plain data and a line map; syntax errors become SpecError."""
    lines = LineMap()
    loader = SpecLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, lines
        _walk(node, (), lines, source)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise SpecError(
            (exc.problem or exc.context or "malformed YAML").strip(),
            location=Location(file=source, line=mark.line + 1 if mark is not None else None),
            rule="yaml-syntax",
            fix="fix the YAML syntax at that line (indentation, quoting, colons)",
        ) from None
    except yaml.YAMLError as exc:
        raise SpecError(
            f"malformed YAML: {exc}",
            location=Location(file=source),
            rule="yaml-syntax",
            fix="fix the YAML syntax",
        ) from None
    finally:
        loader.dispose()
    return data, lines


def _field_names_at(loc: PathKey) -> list[str] | None:
    """Allowed keys of the model found by walking ``loc`` from TierSpec (for typo hints)."""
    current: Any = TierSpec
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            if not isinstance(part, str) or part not in current.model_fields:
                return None
            current = current.model_fields[part].annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        elif get_origin(current) is list:
            current = get_args(current)[0]
        else:
            return None
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return None


def _unwrap(tp: Any) -> Any:
    """Strip Optional/Annotated so the walk sees the model or container type."""
    while True:
        origin = get_origin(tp)
        if origin is typing.Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            models = [a for a in get_args(tp) if isinstance(a, type) and issubclass(a, BaseModel)]
            non_none = [a for a in get_args(tp) if a is not type(None)]
            if len(models) == 1:
                tp = models[0]
            elif len(non_none) == 1:
                tp = non_none[0]
            else:
                return tp
        else:
            return tp


def _from_validation_error(exc: ValidationError, source: str, lines: LineMap) -> SpecErrors:
    errors: list[SpecError] = []
    seen: set[str] = set()
    for err in exc.errors():
        # Union branches add type names to the loc (e.g. 'str', 'EnvToken'); keep only the
        # part of the path that exists in the document.
        loc: PathKey = tuple(err["loc"])
        while loc and loc not in lines:
            loc = loc[:-1]
        path = format_path(loc)
        kind = err["type"]
        if kind == "extra_forbidden":
            key = str(err["loc"][-1])
            allowed = _field_names_at(tuple(err["loc"][:-1])) or []
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            fix = f"{hint}allowed keys here: {', '.join(allowed)}" if allowed else "remove it"
            message, rule, value = f"unknown key {key!r}", "unknown-key", None
        elif kind == "missing":
            message, rule, value = "required key is missing", "required", None
            fix = f"add {str(err['loc'][-1])!r} here"
        else:
            message = err["msg"].removeprefix("Value error, ")
            rule, value = f"type:{kind}", err.get("input")
            fix = "see `tierctl schema` for the allowed shapes"
        dedup = f"{path}|{message}"
        if dedup in seen:
            continue
        seen.add(dedup)
        if isinstance(value, dict | list):
            value = None  # a whole mapping is noise; the path says where it is
        errors.append(
            SpecError(
                message,
                location=Location(file=source, line=lines.line(loc), path=path),
                rule=rule,
                value=value,
                fix=fix,
            )
        )
    return SpecErrors(errors)


def load_spec_text(text: str, source: str = "<spec>") -> TierSpec:
    """Parse and check a tier spec given as text; ``source`` names it in messages."""
    data, lines = parse_yaml(text, source)
    if not isinstance(data, dict):
        raise SpecError(
            "a tier spec must be a YAML mapping",
            location=Location(file=source, line=1),
            rule="spec-shape",
            value=type(data).__name__,
            fix="start the file with `tier: <name>` and the other top-level keys",
        )
    try:
        spec = TierSpec.model_validate(data)
    except ValidationError as exc:
        raise _from_validation_error(exc, source, lines) from None
    problems = check_spec(spec)
    if problems:
        raise SpecErrors(
            [
                SpecError(
                    p.message
                    + (
                        f" (at {format_path(p.also)}, line {lines.line(p.also)})"
                        if p.also is not None
                        else ""
                    ),
                    location=Location(
                        file=source, line=lines.line(p.path), path=format_path(p.path)
                    ),
                    rule=p.rule,
                    value=p.value,
                    fix=p.fix,
                )
                for p in problems
            ]
        )
    return spec


def load_spec(path: str | Path) -> TierSpec:
    """Read and check the tier spec at ``path``.

    Raises:
        SpecError: the file cannot be read or is not YAML.
        SpecErrors: one or more rules are broken; each is located.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(
            "spec file not found",
            location=Location(file=str(p)),
            rule="file",
            fix="pass the path of a tier.yaml",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(
            f"cannot read spec: {exc}", location=Location(file=str(p)), rule="file"
        ) from None
    return load_spec_text(text, str(p))
