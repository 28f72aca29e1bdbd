"""Read a compose file into normalised per-service dicts, as ``docker compose config`` sees it.

This is the one seam between rollout and compose parsing: :func:`load_services` is the only
function the planner calls, so it can be swapped for the validator's public loader without
touching the planner. What it does: YAML anchors and ``<<`` merge keys (the YAML loader resolves
them), interpolation (:mod:`tierctl.rollout.interpolate`), string ``command``/``entrypoint``
tokenised like a shell, list-form ``environment``/``labels`` turned into maps, list-form
``depends_on`` into the long form, and the contents of the top-level ``configs`` a service
mounts folded into that service (a collector whose scrape config changed is a changed service,
though its own block did not move).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from tierctl.errors import ComposeInputError, Location
from tierctl.rollout.interpolate import interpolate

# libyaml parses several times faster and resolves anchors and merge keys the same way.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Key under which the contents of the configs a service mounts are folded into it.
CONFIGS_KEY = "x-tierctl-configs"


@dataclass(frozen=True)
class ComposeServices:
    """The normalised services of one compose file.

    Attributes:
        origin: Where the text came from (a path or ``git:REF:PATH``), for messages.
        services: Service name -> normalised definition, in file order.
    """

    origin: str
    services: dict[str, dict[str, Any]] = field(default_factory=dict)


def load_services(text: str, origin: str, env: Mapping[str, str] | None = None) -> ComposeServices:
    """Parse and normalise a compose file's services.

    Args:
        text: The compose YAML.
        origin: A label for messages (a path or ``git:REF:PATH``).
        env: Variables for interpolation; empty by default so that plans do not depend on, or
            carry, the caller's environment.

    Returns:
        The normalised services.

    Raises:
        ComposeInputError: Unparseable YAML, no ``services`` map, or bad interpolation.
    """
    try:
        doc = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ComposeInputError(
            f"cannot parse compose YAML: {getattr(exc, 'problem', None) or exc}",
            location=Location(file=origin, line=(mark.line + 1) if mark else None),
            rule="a compose file is a YAML mapping",
            fix="fix the YAML syntax",
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict):
        raise ComposeInputError(
            "compose file has no services mapping",
            location=Location(file=origin, path="services"),
            rule="a compose file has a top-level `services:` mapping",
            value=type(doc).__name__ if not isinstance(doc, dict) else doc.get("services"),
            fix="point --from/--to at a docker compose file",
        )
    variables = dict(env or {})
    doc = _interpolate_tree(doc, variables, origin, "")
    configs = doc.get("configs") if isinstance(doc.get("configs"), dict) else {}
    out: dict[str, dict[str, Any]] = {}
    for name, body in doc["services"].items():
        if not isinstance(body, dict):
            raise ComposeInputError(
                f"service {name!r} is not a mapping",
                location=Location(file=origin, path=f"services.{name}"),
                rule="each service is a mapping",
                value=body,
                fix="write the service as a mapping of compose keys",
            )
        out[str(name)] = _normalise_service(str(name), body, configs, origin)
    return ComposeServices(origin=origin, services=out)


def _interpolate_tree(node: Any, env: Mapping[str, str], origin: str, path: str) -> Any:
    if isinstance(node, str):
        if "$" not in node:
            return node
        return interpolate(node, env, where=Location(file=origin, path=path or None))
    if isinstance(node, dict):
        return {
            k: _interpolate_tree(v, env, origin, f"{path}.{k}" if path else str(k))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_interpolate_tree(v, env, origin, f"{path}[{i}]") for i, v in enumerate(node)]
    return node


def _scalar(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _as_map(value: Any, origin: str, path: str) -> dict[str, str | None]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): _scalar(v) for k, v in value.items()}
    if isinstance(value, list):
        out: dict[str, str | None] = {}
        for item in value:
            key, sep, val = str(item).partition("=")
            out[key] = val if sep else None
        return out
    raise ComposeInputError(
        f"{path} must be a map or a list of KEY=VALUE",
        location=Location(file=origin, path=path),
        rule="compose environment/labels syntax",
        value=value,
        fix="write a mapping or a list of KEY=VALUE strings",
    )


def _as_argv(value: Any, origin: str, path: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise ComposeInputError(
                f"cannot split {path} into tokens: {exc}",
                location=Location(file=origin, path=path),
                rule="a string command is split like a shell line",
                value=value,
                fix="balance the quotes or write the command as a list",
            ) from None
    if isinstance(value, list):
        return [str(_scalar(v)) for v in value]
    raise ComposeInputError(
        f"{path} must be a string or a list",
        location=Location(file=origin, path=path),
        rule="compose command syntax",
        value=value,
        fix="write the command as a list of tokens",
    )


def _normalise_service(
    name: str, body: dict[str, Any], configs: dict[str, Any], origin: str
) -> dict[str, Any]:
    svc = dict(body)
    base = f"services.{name}"
    for key in ("command", "entrypoint"):
        if key in svc:
            svc[key] = _as_argv(svc[key], origin, f"{base}.{key}")
    for key in ("environment", "labels"):
        if key in svc:
            svc[key] = _as_map(svc[key], origin, f"{base}.{key}")
    if isinstance(svc.get("depends_on"), list):
        svc["depends_on"] = {
            str(d): {"condition": "service_started", "required": True} for d in svc["depends_on"]
        }
    mounted = svc.get("configs")
    if isinstance(mounted, list) and mounted:
        folded: dict[str, Any] = {}
        for ref in mounted:
            source = ref.get("source") if isinstance(ref, dict) else ref
            folded[str(source)] = configs.get(str(source)) if isinstance(configs, dict) else None
        svc[CONFIGS_KEY] = folded
    return svc
