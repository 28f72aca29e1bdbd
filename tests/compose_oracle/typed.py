"""Typed values against the binary: every path Compose casts a string at, and every numeric
or boolean service key, with good, odd and bad values (session 11, issue #22).

Found this way: ``mem_swappiness: 60`` prints as the string "60" and 0 as nothing (a byte
size to compose-go); ``cpu_shares: 0`` and a dozen other zero numbers are left out; a YAML
int past int64 wraps or becomes the smallest int64; ``tty: "yes"`` is true and
``deploy.replicas: "${R:-2}"`` is 2; ``cpus`` is a float32 (123456789 prints as 123456790);
a negative retry count or port target is refused as an unsigned Go int; blkio device entries
print as ``Path``/``Rate``/``Weight`` in JSON with rates as byte strings; a secret used only
by a build is kept; build ``provenance: true`` is the string "true". tierctl read each
differently before.
"""

from __future__ import annotations

import json
from typing import Any

from tests.compose_oracle.harness import Case
from tests.compose_oracle.projects import Project
from tierctl.compose.casts import RESOURCE_CASTS, SERVICE_CASTS
from tierctl.contracts import schema

#: Strings at each cast path: booleans in both spellings, signs, spaces, separators, hex,
#: octal-looking, out of range, non-finite, empty.
STRINGS = ["true", "Yes", "OFF", "maybe", "1", "+7", " 7", "1_000", "_1", "0x10", "0x1p4",
           "1.5", "1e3", "-1", "0", "440", "9223372036854775808", "1e400", "inf", "nan", ""]  # fmt: skip
#: Values at each numeric or boolean service key, written as YAML scalars.
SCALARS: list[Any] = [0, False, True, 60, -1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1,
                      10**30, 123456789, 0.3, 1.7, -1.7, 2.0, 1e3]  # fmt: skip

#: Values at every numeric or boolean key below a service's top level (a schema walk).
DEEP: list[Any] = [0, True, False, -1, 1.5, 60, 288]

#: Disagreements kept on purpose, each with what Compose does (strict: fixed ones must go).
KNOWN = {
    # Compose prints a build secret's mode -1 as "0-1"; tierctl refuses it (not a file mode).
    "deep build.secrets.0.mode=-1": None,
    # Compose leaves out a gpus entry's count 0; tierctl prints it (a count 0 reserves nothing).
    "deep gpus.0.count=0": None,
    # Compose skips the file|environment|content check for a config whose external is false.
    "string configs.external='OFF'": None,
}


def _service_body(steps: tuple[str, ...], value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    head, top = steps[0], {}
    if head == "ports":
        return {"ports": [{"target": value}]}, top
    if head == "volumes" and steps[-1] == "read_only":
        return {
            "volumes": [{"type": "bind", "source": ".", "target": "/x", "read_only": value}]
        }, top
    if head == "volumes":
        mount = {"type": "volume", "source": "v", "target": "/x", "volume": {"nocopy": value}}
        return {"volumes": [mount]}, {"volumes": {"v": {}}}
    body: Any = value
    for step in reversed(steps):
        body = {step: body}
    return body, top


def _case(name: str, document: dict[str, Any]) -> Case:
    return Case(name, Project({"compose.yml": json.dumps(document) + "\n"}, ["compose.yml"]))


def typed_cases() -> list[Case]:
    """Every cast path with every string, every numeric or boolean service key with every
    scalar, and every such key below the top level (:func:`deep_cases`)."""
    cases = []
    for steps in SERVICE_CASTS:
        for text in STRINGS:
            body, top = _service_body(steps, text)
            doc = {"services": {"a": {"image": "x", **body}}, **top}
            cases.append(_case(f"string {'.'.join(steps)}={text!r}", doc))
    for section, casts in RESOURCE_CASTS.items():
        for steps in casts:
            for text in STRINGS:
                body, _ = _service_body(steps, text)
                doc = {"services": {"a": {"image": "x"}}, section: {"r": body}}
                cases.append(_case(f"string {section}.{'.'.join(steps)}={text!r}", doc))
    props = schema._schema()["definitions"]["service"]["properties"]
    for key, prop in props.items():
        kinds = _types(prop)
        for value in SCALARS:
            if isinstance(value, bool) and "boolean" not in kinds:
                continue
            if not isinstance(value, bool) and not kinds & {"integer", "number"}:
                continue
            text = json.dumps(value) if not isinstance(value, int) else str(value)
            yaml = f"services:\n  a:\n    image: x\n    {key}: {text}\n"
            cases.append(
                Case(f"scalar {key}={text}", Project({"compose.yml": yaml}, ["compose.yml"]))
            )
    return cases + deep_cases()


#: Siblings a leaf needs for its entry to be read at all.
_NEEDS: dict[tuple[str, ...], dict[str, Any]] = {
    **{("blkio_config", k): {"path": "/dev/sda"} for k in (
        "device_read_bps", "device_read_iops", "device_write_bps", "device_write_iops",
        "weight_device")},
    ("ports",): {"target": 80},
    ("build",): {"context": "."},
    ("build", "secrets"): {"source": "s"},
}  # fmt: skip


def _resolve(prop: dict[str, Any]) -> dict[str, Any]:
    definitions = schema._schema()["definitions"]
    while "$ref" in prop:
        prop = definitions[prop["$ref"].rsplit("/", 1)[-1]]
    return prop


def _alternatives(prop: dict[str, Any]) -> list[dict[str, Any]]:
    prop = _resolve(prop)
    out = [prop]
    for key in ("oneOf", "anyOf"):
        for alternative in prop.get(key, []):
            out += _alternatives(alternative)
    return out


def _leaves(prop: dict[str, Any], path: tuple[Any, ...], depth: int) -> list[tuple[Any, ...]]:
    """The paths to every numeric or boolean key below ``path`` (0: a list's item)."""
    out: list[tuple[Any, ...]] = []
    if depth > 4:
        return out
    for alternative in _alternatives(prop):
        for key, sub in alternative.get("properties", {}).items():
            if len(path) > 0 and _types(sub) & {"integer", "number", "boolean"}:
                out.append((*path, key))
            out += _leaves(sub, (*path, key), depth + 1)
        items = alternative.get("items")
        if alternative.get("type") == "array" and isinstance(items, dict):
            out += _leaves(items, (*path, 0), depth + 1)
    return out


def _nested(path: tuple[Any, ...], value: Any, at: tuple[str, ...] = ()) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if head == 0:
        item = _nested(rest, value, at)
        return [{**_NEEDS.get(at, {}), **item} if isinstance(item, dict) else item]
    inner = _nested(rest, value, (*at, head))
    if isinstance(inner, dict) and (*at, head) in _NEEDS and rest and rest[0] != 0:
        inner = {**_NEEDS[(*at, head)], **inner}
    return {head: inner}


def deep_cases() -> list[Case]:
    """Every numeric or boolean key below a service's top level with :data:`DEEP`."""
    cases = []
    service = schema._schema()["definitions"]["service"]
    for path in dict.fromkeys(_leaves(service, (), 0)):
        kinds = _types(_leaf_schema(service, path))
        for value in DEEP:
            if isinstance(value, bool) and "boolean" not in kinds:
                continue
            if not isinstance(value, bool) and not kinds & {"integer", "number"}:
                continue
            doc: dict[str, Any] = {"services": {"a": {"image": "x", **_nested(path, value)}}}
            if path[:2] == ("build", "secrets"):
                doc["secrets"] = {"s": {"file": "./compose.yml"}}
            cases.append(_case(f"deep {'.'.join(map(str, path))}={value!r}", doc))
    return cases


def _leaf_schema(prop: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    for step in path:
        for alternative in _alternatives(prop):
            if step == 0 and isinstance(alternative.get("items"), dict):
                prop = alternative["items"]
                break
            if step != 0 and step in alternative.get("properties", {}):
                prop = alternative["properties"][step]
                break
    return prop


def _types(prop: dict[str, Any]) -> set[str]:
    prop = _resolve(prop)
    kind = prop.get("type")
    out = {kind} if isinstance(kind, str) else set(kind or [])
    for alternatives in ("oneOf", "anyOf"):
        for alternative in prop.get(alternatives, []):
            out |= _types(alternative)
    return out


def known(name: str) -> bool:
    """Whether a disagreement is one :data:`KNOWN` keeps."""
    return any(name.startswith(prefix) for prefix in KNOWN)
