"""Per-service semantic differences between two normalised compose services.

Every key of a service is compared after normalisation; each difference is filed under a reason
(argv, env, image, labels, logging, config, other) with a readable detail. Environment values
are shown by key only: they can be secrets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tierctl.rollout.argv import diff_argv
from tierctl.rollout.normalise import CONFIGS_KEY
from tierctl.rollout.plan_schema import Reason

_REASON_BY_KEY: dict[str, Reason] = {
    "command": "argv",
    "entrypoint": "argv",
    "environment": "env",
    "env_file": "env",
    "image": "image",
    "labels": "labels",
    "logging": "logging",
    CONFIGS_KEY: "config",
}


@dataclass(frozen=True)
class ServiceDiff:
    """The differences of one service; empty ``reasons`` means unchanged."""

    reasons: tuple[Reason, ...]
    details: tuple[str, ...]


def diff_service(old: Mapping[str, Any], new: Mapping[str, Any]) -> ServiceDiff:
    """Compare two normalised services.

    Args:
        old: The service as OLD defines it.
        new: The service as NEW defines it.

    Returns:
        The reasons (each once, in a fixed order) and readable details.
    """
    reasons: list[Reason] = []
    details: list[str] = []
    for key in sorted(set(old) | set(new), key=str):  # YAML keys need not all be strings
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        reason = _REASON_BY_KEY.get(key, "other")
        if reason not in reasons:
            reasons.append(reason)
        details.extend(_detail(key, a, b))
    order: tuple[Reason, ...] = ("argv", "env", "image", "labels", "logging", "config", "other")
    return ServiceDiff(tuple(r for r in order if r in reasons), tuple(details))


def _detail(key: str, a: Any, b: Any) -> list[str]:
    if key in ("command", "entrypoint"):
        return [f"{key}: {c}" for c in diff_argv(list(a or []), list(b or []))] or [
            f"{key}: tokens changed"
        ]
    if key == "environment":
        return _map_detail("env", _map(a), _map(b), show_values=False)
    if key == "labels":
        return _map_detail("label", _map(a), _map(b), show_values=True)
    if key == "logging":
        tag_a = _map(_map(a).get("options")).get("tag")
        tag_b = _map(_map(b).get("options")).get("tag")
        if tag_a != tag_b:
            return [f"log tag: {tag_a} -> {tag_b}"]
    if key == "image":
        return [f"image: {a} -> {b}"]
    if key == CONFIGS_KEY:
        return [
            f"config: {name} content changed"
            for name in sorted(set(_map(a)) | set(_map(b)), key=str)
            if _map(a).get(name) != _map(b).get(name)
        ]
    return [f"{key}: changed"]


def _map(value: Any) -> Mapping[Any, Any]:
    """A mapping as compose allows it here, else empty (the schema contract reports shapes)."""
    return value if isinstance(value, Mapping) else {}


def _map_detail(
    kind: str, a: Mapping[str, Any], b: Mapping[str, Any], *, show_values: bool
) -> list[str]:
    out: list[str] = []
    for k in sorted(set(a) | set(b), key=str):
        if k not in b:
            out.append(f"{kind} {k}: removed")
        elif k not in a:
            out.append(f"{kind} {k}: added" + (f" = {b[k]}" if show_values else ""))
        elif a[k] != b[k]:
            out.append(f"{kind} {k}: {a[k]} -> {b[k]}" if show_values else f"{kind} {k}: changed")
    return out
