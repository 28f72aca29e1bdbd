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

from pydantic import BaseModel, ValidationError

from tierctl.errors import Location, SpecError, SpecErrors
from tierctl.readers import LineMap, PathKey, format_path, load_yaml, read_text
from tierctl.spec.checks import check_spec
from tierctl.spec.tier_spec import TierSpec
from tierctl.yaml12 import Yaml12Loader

SpecLoader = Yaml12Loader


def parse_yaml(text: str, source: str) -> tuple[Any, LineMap]:
    """Parse YAML text into plain data and a line map; every problem becomes a SpecError.

    The reading is bounded (:func:`tierctl.readers.load_yaml`): recursive aliases, alias bombs,
    excessive nesting and duplicate keys are refused with the line and the limit.
    """
    doc = load_yaml(text, source, error=SpecError)
    return doc.data, doc.lines


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
    text = read_text(
        p,
        what="spec",
        error=SpecError,
        missing="spec file not found",
        missing_fix="pass the path of a tier.yaml",
    )
    return load_spec_text(text, str(p))
