"""A compose file's services as the planner compares them: one plain map per service.

The reading itself is :mod:`tierctl.compose` (anchors, merge keys, interpolation, command
tokens, list-form environment and labels), in the :attr:`~tierctl.compose.Interpolation.DEFAULTS`
mode: defaults apply and an unset required variable (``${HF_TOKEN:?...}``) stays as written,
so plans neither depend on nor carry the caller's environment, yet show a changed expression.
This module lays each service out as one map in its long form, so that every key can be
compared alike: ``command``/``entrypoint`` as token lists, ``environment``/``labels`` as maps,
``depends_on`` as the long map, and the contents of the top-level ``configs`` the service mounts
under :data:`CONFIGS_KEY` (a collector whose scrape config changed is a changed service, though
its own block did not move).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierctl.compose import ComposeService, Interpolation, merge_compose, parse_compose
from tierctl.compose.forms import normalise_depends_on
from tierctl.compose.profiles import enabled
from tierctl.errors import ComposeInputError, Location

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


def load_services(
    text: str,
    origin: str,
    env: Mapping[str, str] | None = None,
    *,
    base_dir: str | Path | None = None,
    profiles: Sequence[str] | None = None,
) -> ComposeServices:
    """Parse and normalise a compose file's services.

    Args:
        text: The compose YAML.
        origin: A label for messages (a path or ``git:REF:PATH``).
        env: Variables for interpolation; empty by default so that plans do not depend on, or
            carry, the caller's environment.
        base_dir: The folder ``include`` paths are relative to (None: the text cannot
            include files).
        profiles: The active compose profiles: only the services compose runs with them are
            kept; None: every service.

    Returns:
        The normalised services.

    Raises:
        ComposeInputError: Unparseable YAML, no ``services`` map, or bad interpolation.
    """
    return load_merged_services([(text, origin, base_dir)], env, profiles=profiles)


def load_merged_services(
    files: Sequence[tuple[str, str, str | Path | None]],
    env: Mapping[str, str] | None = None,
    *,
    profiles: Sequence[str] | None = None,
) -> ComposeServices:
    """:func:`load_services` of several files merged like ``docker compose -f a -f b``
    (later files override earlier, with Compose's merge rules); ``files``: (text, origin,
    base_dir) in ``-f`` order. Raises as :func:`load_services`."""
    read = [
        parse_compose(
            text,
            source=origin,
            env=env or {},
            interpolation=Interpolation.DEFAULTS,
            base_dir=base_dir,
            overlay=i > 0,
            # An included or extended service's relative paths name places from its own
            # file's folder, as Compose resolves them: a file that says so in absolute paths
            # (a rendering of an imported spec) runs the same mounts.
            rebase=True,
        )
        for i, (text, origin, base_dir) in enumerate(files)
    ]
    compose = merge_compose(read)
    origin = " + ".join(f[1] for f in files)
    if not isinstance(compose.data.get("services"), dict):
        raise ComposeInputError(
            "compose file has no services mapping",
            location=Location(file=origin, path="services"),
            rule="a compose file has a top-level `services:` mapping",
            fix="point `old`/`new` at a docker compose file",
            params=("old", "new"),
        )
    for name, svc in compose.services.items():
        for key in _STRING_KEYS:
            value = svc.data.get(key)
            if value is not None and not isinstance(value, str):
                raise ComposeInputError(
                    f"{key} must be a string",
                    location=compose.location("services", name, key),
                    rule=f"compose reads services.<name>.{key} as a string",
                    value=value if not isinstance(value, dict | list) else type(value).__name__,
                    fix=f"write {key}: as a plain string, or remove it",
                )
    return ComposeServices(
        origin=origin,
        services={
            name: _flat(svc)
            for name, svc in compose.services.items()
            if profiles is None or enabled(svc.profiles, profiles)
        },
    )


# Keys the planner, the drivers and the gates read as text; compose's schema makes them strings.
_STRING_KEYS = ("container_name", "image", "hostname", "network_mode")


def _flat(svc: ComposeService) -> dict[str, Any]:
    out = dict(svc.data)
    for key, tokens in (("command", svc.command), ("entrypoint", svc.entrypoint)):
        if key in out:
            out[key] = None if tokens is None else list(tokens)
    # An empty environment or label map is no map at all to compose (`config` drops it):
    # `environment: {}` and no environment run the same container.
    for key, value in (("environment", svc.environment), ("labels", svc.labels)):
        if key in out:
            out[key] = value
            if not value:
                del out[key]
    if "depends_on" in out:
        out["depends_on"] = normalise_depends_on(out["depends_on"])
    if svc.mounted_configs:
        out[CONFIGS_KEY] = svc.mounted_configs
    return out
