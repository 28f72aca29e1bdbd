"""Reading a tier spec from YAML, with every problem located by file, line and field path.

The YAML is read with ruamel's round-trip loader only to learn where each key sits; the data
is then converted to plain Python and checked by the pydantic models and by
:mod:`tierctl.spec.checks`. Every problem becomes a :class:`~tierctl.errors.SpecError` carrying
the line of the offending key, so an operator never has to hunt for it.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from tierctl.errors import Location, SpecError, SpecErrors
from tierctl.spec.checks import check_spec
from tierctl.spec.model import TierSpec

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


def _plain(node: Any, path: PathKey, lines: LineMap) -> Any:
    """Convert ruamel's round-trip nodes to plain Python, recording each key's line."""
    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for key in node:
            line0, _ = node.lc.key(key)
            child = (*path, str(key))
            lines.add(child, line0)
            out[str(key)] = _plain(node[key], child, lines)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for i, item in enumerate(node):
            line0, _ = node.lc.item(i)
            lines.add((*path, i), line0)
            items.append(_plain(item, (*path, i), lines))
        return items
    # ruamel's scalar subclasses (ScalarFloat, ScalarInt...) become the builtin types so that
    # hashing and JSON output do not depend on how the value was spelled.
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    return node


def parse_yaml(text: str, source: str) -> tuple[Any, LineMap]:
    """Parse YAML text into plain data and a line map; syntax errors become SpecError."""
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        doc = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = (exc.problem or exc.context or "malformed YAML").strip()
        dup = re.search(r'duplicate key "([^"]*)"', problem)
        if dup:
            first = exc.context_mark.line + 1 if exc.context_mark is not None else None
            raise SpecError(
                f"duplicate key {dup.group(1)!r}"
                + (f" (first given at line {first})" if first else ""),
                location=Location(file=source, line=line),
                rule="duplicate-key",
                fix="give each key (each replica, flag, service) once",
            ) from None
        raise SpecError(
            problem,
            location=Location(file=source, line=line),
            rule="yaml-syntax",
            fix="fix the YAML syntax at that line (indentation, quoting, colons)",
        ) from None
    except YAMLError as exc:
        raise SpecError(
            f"malformed YAML: {exc}",
            location=Location(file=source),
            rule="yaml-syntax",
            fix="fix the YAML syntax",
        ) from None
    lines = LineMap()
    return _plain(doc, (), lines), lines


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
