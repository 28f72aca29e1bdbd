"""Whether two compose files run the same thing: a semantic diff.

Two files are equivalent when every service runs the same image with the same argv *as the
engine reads it* (flags compared as an unordered set of flag -> values, ``--a=b`` equal to
``--a b``, vLLM's positional model equal to ``--model``), the same environment, labels,
mounts, ports, GPUs, networks and every other key, and the top-level volumes, networks,
secrets and configs are the same. Not compared, because they are tierctl's own bookkeeping:
the project ``name``, ``x-*`` extension keys and ``tierctl.*`` labels; a service without
``logging`` equals one with ``logging: {driver: json-file}`` (docker's default driver).

Used by ``tierctl import`` (import -> render -> diff must be empty) and its tests. It reads
argv as the engines do, so it lives above the engine profiles, not in ``compose/`` (which the
profiles import).
"""

from __future__ import annotations

from typing import Any

from tierctl.compose.argv import parse_flags
from tierctl.compose.compose_file import ComposeFile, ComposeService
from tierctl.compose.forms import normalise_depends_on
from tierctl.engines import PROFILES, profile_for_argv

#: Label prefix the renderer adds; not part of what a service runs.
TIERCTL_LABELS = "tierctl."
_TOP_LEVEL = ("volumes", "networks", "secrets", "configs")


def semantic_diff(a: ComposeFile, b: ComposeFile) -> list[str]:
    """Human-readable differences between two compose files; empty when equivalent."""
    out: list[str] = []
    for key in _TOP_LEVEL:
        left, right = a.data.get(key) or {}, b.data.get(key) or {}
        if left != right:
            out.append(f"{key}: {_show(left)} != {_show(right)}")
    for name in sorted(set(a.services) | set(b.services), key=str):
        if name not in b.services:
            out.append(f"services.{name}: only in {a.source}")
            continue
        if name not in a.services:
            out.append(f"services.{name}: only in {b.source}")
            continue
        left_svc, right_svc = (
            canonical_service(a.services[name]),
            canonical_service(b.services[name]),
        )
        for key in sorted(set(left_svc) | set(right_svc), key=str):  # a YAML key may be -.inf
            lv, rv = left_svc.get(key), right_svc.get(key)
            if lv != rv:
                out.append(f"services.{name}.{key}: {_show(lv)} != {_show(rv)}")
    return out


def canonical_service(service: ComposeService) -> dict[str, Any]:
    """A service in the form :func:`semantic_diff` compares."""
    data = {k: v for k, v in service.data.items() if not str(k).startswith("x-")}
    entry = service.entrypoint or ()
    command = service.command or ()
    whole = (*entry, *command)
    profile = profile_for_argv(whole)
    if profile is None:
        for candidate in PROFILES.values():
            if candidate.matches_image(service.image) and not entry:
                if candidate.image_launcher:
                    profile, whole = candidate, (*candidate.image_launcher, *command)
                break
    data.pop("command", None)
    data.pop("entrypoint", None)
    if profile is not None:
        cmd = profile.split_command(whole)
        flags: list[tuple[str, tuple[str, ...]]] = [
            (f"--{k}", (v,)) for k, v in cmd.positional.items()
        ]
        flags += [
            (use.token, use.values)
            for use in parse_flags(whole, cmd.flags_start, None)
            if use.token
        ]
        positional = {f"--{p}" for p in profile.positional}
        data["argv"] = {
            "launcher": [t.rsplit("/", 1)[-1] for t in cmd.launcher],
            # Flag order does not matter to argparse, except among repeats of one flag
            # (kept in order by the stable sort).
            "flags": sorted(
                ((f"--{t[2:]}" if t in positional else t, v) for t, v in flags),
                key=lambda f: f[0],
            ),
        }
    else:
        data["argv"] = {"entrypoint": list(entry), "command": list(command)}
    data["environment"] = dict(service.environment)
    labels = {k: v for k, v in service.labels.items() if not k.startswith(TIERCTL_LABELS)}
    data["labels"] = labels
    if not labels:
        data.pop("labels")
    if not data["environment"]:
        data.pop("environment")
    if data.get("logging") in (None, {"driver": "json-file"}):
        data.pop("logging", None)
    if "depends_on" in data:
        data["depends_on"] = normalise_depends_on(data["depends_on"])
    devices = _devices(data)
    if devices is not None:
        for device in devices:
            if isinstance(device, dict) and isinstance(device.get("device_ids"), list):
                device["device_ids"] = [str(d) for d in device["device_ids"]]
            if isinstance(device, dict) and isinstance(device.get("capabilities"), list):
                device["capabilities"] = sorted(device["capabilities"])
    return data


def _devices(data: dict[str, Any]) -> list[Any] | None:
    deploy = data.get("deploy")
    if not isinstance(deploy, dict):
        return None
    # Any other shape is compared as written (the schema contract reports it).
    resources = deploy.get("resources")
    reservations = resources.get("reservations") if isinstance(resources, dict) else None
    devices = reservations.get("devices") if isinstance(reservations, dict) else None
    if not isinstance(devices, list):
        return None
    assert isinstance(resources, dict)
    assert isinstance(reservations, dict)
    deploy, resources, reservations = dict(deploy), dict(resources), dict(reservations)
    copied = [dict(d) if isinstance(d, dict) else d for d in devices]
    reservations["devices"] = copied
    resources["reservations"] = reservations
    deploy["resources"] = resources
    data["deploy"] = deploy
    return copied


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."
