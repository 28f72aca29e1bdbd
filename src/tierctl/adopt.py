"""``tierctl import``: bring an existing compose file under tierctl as a tier spec.

The file is read exactly as compose reads it (include, extends, ``!reset``, override files
merged) with every string kept as written (:attr:`Interpolation.AS_WRITTEN`), so ``${VAR}``
and ``$$`` reach the spec, and the rendered file, unchanged. The engine services (found by
image and launcher, as ``validate`` finds them) of the most common engine become replicas of
one engine: the flags, environment and compose keys they share become the engine's, the rest
each replica's overrides. Every other service is kept as it is, as a spec service.

The result is checked before it is returned: the spec loads (every spec rule holds), and its
rendering is semantically equal to the input (:func:`tierctl.spec.semantic_diff.semantic_diff`:
tierctl's own labels and project name aside). Anything the spec cannot say is refused with
the service and key named, never dropped silently.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierctl.compose import ComposeFile, Interpolation, load_compose, merge_compose, parse_compose
from tierctl.compose.argv import parse_flags
from tierctl.compose.profiles import only_active
from tierctl.contracts.hygiene import secrets as literal_secrets
from tierctl.contracts.standalone import EngineService, find_engines
from tierctl.errors import InputError, Location
from tierctl.render import render_compose
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec.loader import load_spec_text
from tierctl.spec.semantic_diff import semantic_diff
from tierctl.spec.tier_spec import TierSpec

_REPLICA = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
# A GPU index as compose's device_ids give it: ASCII digits, a handful of them ("²" is a
# digit to str.isdigit but not to int()).
_GPU_INDEX = re.compile(r"^[0-9]{1,6}$")
_TIER = re.compile(r"[^a-z0-9_-]+")
# Keys of an engine service the spec derives (engine.*, replica args/env/gpus).
_DERIVED = ("image", "container_name", "command", "entrypoint", "environment")
_ROLES = (
    ("nginx", "nginx"),
    ("haproxy", "proxy"),
    ("traefik", "proxy"),
    ("envoy", "proxy"),
    ("litellm", "proxy"),
    ("router", "proxy"),
    ("prometheus", "collector"),
    ("otel", "collector"),
    ("grafana/alloy", "collector"),
    ("dcgm-exporter", "gpu-exporter"),
    ("nvidia_gpu_exporter", "gpu-exporter"),
)


@dataclass
class Adoption:
    """What ``tierctl import`` produced."""

    spec: TierSpec
    text: str  # the tier.yaml
    rendered: str  # the spec's rendering
    notes: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)  # round trip; empty when equivalent


def adopt(
    paths: Sequence[str | Path],
    *,
    out: str | Path,
    tier: str | None = None,
    host: str = "localhost",
    engine: str | None = None,
    profiles: Sequence[str] | None = None,
) -> Adoption:
    """Write a tier spec for compose files (merged like ``docker compose -f a -f b``).

    Args:
        paths: the compose files.
        out: where the spec will live (its ``output`` is relative to that folder).
        tier: tier name; default: the file's ``name:``, else its folder's name (compose's
            project name, so named volumes keep their names).
        host: the host the tier runs on.
        engine: ``KIND==VERSION`` when the engine image tag names no release.
        profiles: the active compose profiles: only the services compose runs with them are
            imported (``docker compose --profile P``); None: every service.

    Raises:
        InputError / ComposeInputError: a file compose would refuse, or something the spec
            cannot express (named, with the fix).
    """
    if not paths:
        raise InputError("nothing to import", rule="usage", fix="pass a compose file")
    files = [load_compose(Path(p), interpolation=Interpolation.AS_WRITTEN) for p in paths]
    merged = only_active(merge_compose(files), profiles)
    _refuse_schema_errors(merged)
    notes: list[str] = []
    for finding in literal_secrets(merged):
        raise InputError(
            finding.message,
            location=finding.location,
            rule="no literal credentials in a spec",
            fix=finding.fix or "use a ${VAR} reference",
        )
    engines, _ = find_engines(merged, engine)
    group = _replica_group(engines, notes)
    if not group:
        raise InputError(
            "no engine service found (no SGLang or vLLM image or launcher)",
            location=Location(file=merged.source),
            rule="import needs at least one engine service",
            fix="check the images/commands, or pass `engine` KIND==VERSION",
            params=("engine",),
        )
    first = group[0]
    version = first.version
    if version is None:
        raise InputError(
            f"the image {first.service.image!r} names no engine release",
            location=merged.location("services", first.name, "image"),
            rule="a spec pins the engine release",
            fix=f"pass `engine` {first.profile.kind}==VERSION",
            params=("engine",),
        )
    out_path = Path(out)
    doc = _spec_document(merged, group, version, out_path, tier, host, notes)
    text = _header(files) + dump_yaml(doc)
    spec = load_spec_text(text, str(out_path))
    rendered = render_compose(spec, spec_path=out_path)
    again = parse_compose(rendered, source="(rendered)", interpolation=Interpolation.AS_WRITTEN)
    differences = semantic_diff(merged, again)
    return Adoption(spec, text, rendered, notes, differences)


def _refuse_schema_errors(merged: ComposeFile) -> None:
    """Refuse a file compose itself would refuse (the compose schema), before any part of it
    is read as a replica: ``deploy.resources: x`` or ``logging: [..]`` are then named with
    their line instead of reaching the grouping code with the wrong shape."""
    from tierctl.contracts.schema import type_errors

    for violation in type_errors(merged):
        raise InputError(
            f"compose refuses this value: {violation.message}",
            location=violation.location or Location(file=merged.source),
            rule="import reads files `docker compose config` accepts (the compose schema)",
            fix="fix the key (see the compose specification), or run `tierctl validate` on "
            "the file for every schema error",
        )


def _header(files: Sequence[ComposeFile]) -> str:
    names = ", ".join(f.source for f in files)
    return f"# Imported by `tierctl import` from {names}.\n"


def _replica_group(engines: list[EngineService], notes: list[str]) -> list[EngineService]:
    """The engine services that become replicas: the most common engine with one launcher."""
    if not engines:
        return []
    for e in [e for e in engines if e.shell_token is not None]:
        notes.append(
            f"{e.name}: starts the engine inside a shell script (command[{e.shell_token}]); "
            "kept as a service (a replica's command is the engine's argv)"
        )
    engines = [e for e in engines if e.shell_token is None]
    if not engines:
        return []
    by_key: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[EngineService]] = {}
    for e in engines:
        launcher = e.profile.split_command(e.argv).launcher
        key = (e.profile.kind, tuple(e.service.entrypoint or ()), launcher)
        by_key.setdefault(key, []).append(e)
    chosen = max(by_key.values(), key=len)
    for e in engines:
        if e not in chosen:
            notes.append(
                f"{e.name}: another engine or launcher than {chosen[0].name}; kept as a service "
                "(a tier spec has one engine)"
            )
    return chosen


def _spec_document(
    merged: ComposeFile,
    group: list[EngineService],
    version: str,
    out: Path,
    tier: str | None,
    host: str,
    notes: list[str],
) -> dict[str, Any]:
    first = group[0]
    replicas = {e.name: _replica_parts(merged, e) for e in group}
    images = [e.service.image or "" for e in group]
    base_image = max(set(images), key=images.count)
    flags = [parts["flags"] for parts in replicas.values()]
    envs = [parts["env"] for parts in replicas.values()]
    fragments = [parts["compose"] for parts in replicas.values()]
    base_flags = _common(flags)
    base_env = _common(envs)
    base_compose = _common(fragments)
    container = [parts["container_name"] for parts in replicas.values()]
    if all(c == name for c, name in zip(container, replicas, strict=True)):
        container_name = True
    elif all(c is None for c in container):
        container_name = False
    else:
        # Either a container named otherwise, or some named and some not (one spec setting
        # covers every replica): the first unnamed one is then the one to name.
        pairs = list(zip(container, replicas, strict=True))
        bad = next((n for c, n in pairs if c not in (None, n)), None)
        if bad is None:
            bad = next(n for c, n in pairs if c is None)
        raise InputError(
            f"service {bad} runs as a container named otherwise than the service"
            " (or not named, where the other replicas' are)",
            location=merged.location("services", bad, "container_name"),
            rule="a replica's container is named after its service (or not named)",
            fix="rename the service after its container, or drop container_name",
        )
    launcher = list(first.profile.split_command(first.argv).launcher)
    entry = list(first.service.entrypoint or ())
    if first.command_offset and not entry:
        launcher = launcher[first.command_offset :]  # the image's ENTRYPOINT runs it
    elif entry:
        launcher = launcher[len(entry) :]
    equals = sorted({n for parts in replicas.values() for n in parts["equals"]})
    engine: dict[str, Any] = {
        "kind": first.profile.kind,
        "version": version,
        "image": base_image,
        "service": "{replica}",
        "launcher": launcher,
        "args": base_flags,
    }
    if base_env:
        engine["env"] = base_env
    if base_compose:
        engine["compose"] = base_compose
    if entry:
        engine["entrypoint"] = entry
    if not container_name:
        engine["container_name"] = False
    if equals:
        engine["equals_flags"] = equals
    if "@sha256:" not in base_image:
        engine["image_policy"] = "tag"
        notes.append(
            f"engine image {base_image} is a tag (image_policy: tag); pin it by digest when you can"
        )
    replica_docs = _replica_documents(
        replicas, group, base_flags, base_env, base_compose, base_image
    )
    doc_out: dict[str, Any] = {
        "tier": _tier_name(merged, tier, out),
        "host": host,
        "description": f"Imported from {merged.source}",
        "output": f"{out.stem}.compose.yaml",
        "engine": engine,
        "replicas": replica_docs,
        "telemetry": {"variant": "{replica}", "places": []},
    }
    _carry_the_rest(merged, replica_docs, doc_out, notes)
    return doc_out


def _replica_documents(
    replicas: dict[str, dict[str, Any]],
    group: list[EngineService],
    base_flags: dict[str, Any],
    base_env: dict[str, Any],
    base_compose: dict[str, Any],
    base_image: str,
) -> dict[str, Any]:
    """Each replica's spec entry: its GPUs and what it overrides of the engine's."""
    replica_docs: dict[str, Any] = {}
    for (name, parts), e in zip(replicas.items(), group, strict=True):
        doc: dict[str, Any] = dict(parts["gpus"])
        over = _overrides(base_flags, parts["flags"])
        if over:
            doc["args"] = over
        env_over = _overrides(base_env, parts["env"])
        if env_over:
            doc["env"] = env_over
        if (e.service.image or "") != base_image:
            doc["image"] = e.service.image
        own = {k: v for k, v in parts["compose"].items() if base_compose.get(k) != v}
        if own:
            doc["compose"] = own
        replica_docs[name] = doc
    return replica_docs


def _carry_the_rest(
    merged: ComposeFile, replica_docs: dict[str, Any], doc_out: dict[str, Any], notes: list[str]
) -> None:
    """The other services (with a role guessed from their image) and the top-level keys a
    spec carries, into ``doc_out``; a note names the top-level keys it does not carry."""
    services: dict[str, Any] = {}
    for name, svc in merged.services.items():
        if name in replica_docs:
            continue
        image = str(svc.image or "")
        role = next((r for key, r in _ROLES if key in image), "other")
        services[name] = {"role": role, "compose": dict(svc.data)}
    if services:
        doc_out["services"] = services
    for key in ("volumes", "networks", "secrets", "configs"):
        value = merged.data.get(key)
        if value:
            doc_out[key] = value
    dropped = [
        k
        for k in merged.data
        if k not in ("services", "name", "volumes", "networks", "secrets", "configs")
    ]
    if dropped:
        notes.append(
            "top-level keys not carried into the spec (extension templates are already merged "
            f"into the services): {', '.join(map(str, dropped))}"
        )


def _tier_name(merged: ComposeFile, tier: str | None, out: Path) -> str:
    if tier:
        return tier
    name = merged.data.get("name")
    if isinstance(name, str) and name:
        return _TIER.sub("-", name.lower()).strip("-") or "tier"
    folder = Path(merged.source.split(" + ")[0]).resolve().parent.name
    return _TIER.sub("", folder.lower()) or "tier"


def _replica_parts(merged: ComposeFile, e: EngineService) -> dict[str, Any]:
    """One engine service as spec parts: flags, env, gpus, compose fragment."""
    if not _REPLICA.match(e.name):
        raise InputError(
            f"service name {e.name!r} cannot name a replica",
            location=merged.location("services", e.name),
            rule="replica names: lower-case letters, digits, '-' and '_'",
            fix="rename the service",
        )
    cmd = e.profile.split_command(e.argv)
    flags: dict[str, Any] = dict(cmd.positional)
    equals: set[str] = set()
    seen: dict[str, list[tuple[str, ...]]] = {}
    for use in parse_flags(e.argv, cmd.flags_start, e.catalog):
        if not use.token:
            raise InputError(
                f"stray value {use.values[0]!r} before any flag in {e.name}'s command",
                location=merged.location("services", e.name, "command"),
                rule="an engine command is a launcher, then flags",
                fix="put the value after its flag",
            )
        if use.token.startswith("--") is False:
            raise InputError(
                f"{e.name}: short option {use.token!r}: a spec writes long flags",
                location=merged.location("services", e.name, "command"),
                rule="spec flags are long options",
                fix=f"write the long spelling of {use.token}",
            )
        seen.setdefault(use.name, []).append(use.values)
        if use.inline:
            equals.add(use.name)
    for name, occurrences in seen.items():
        if len(occurrences) > 1:
            if not all(len(v) == 1 for v in occurrences):
                raise InputError(
                    f"{e.name}: --{name} is repeated with several values each",
                    location=merged.location("services", e.name, "command"),
                    rule="a repeated flag takes one value each time",
                    fix=f"give --{name} one value per occurrence",
                )
            flags[name] = {"repeat": [v[0] for v in occurrences]}
        elif not occurrences[0]:
            flags[name] = True
        elif len(occurrences[0]) == 1:
            flags[name] = occurrences[0][0]
        else:
            flags[name] = list(occurrences[0])
    env: dict[str, Any] = {}
    for key, value in e.service.environment.items():
        if value is None:
            raise InputError(
                f"{e.name}: environment {key} is passed through from the host (no value)",
                location=merged.location("services", e.name, "environment", key),
                rule="a spec gives every environment value",
                fix=f"write {key}: ${{{key}}} (empty when unset) or ${{{key}:?set {key}}}",
            )
        env[key] = value
    compose = {k: v for k, v in e.service.data.items() if k not in _DERIVED}
    gpus = _gpus(merged, e, compose)
    return {
        "flags": flags,
        "equals": equals,
        "env": env,
        "gpus": gpus,
        "compose": compose,
        "container_name": e.service.container_name,
    }


def _gpus(merged: ComposeFile, e: EngineService, compose: dict[str, Any]) -> dict[str, Any]:
    """The replica's gpus/gpu_count from its one nvidia device reservation (removed from the
    fragment: the renderer writes it)."""
    deploy = compose.get("deploy")
    devices = (
        ((deploy.get("resources") or {}).get("reservations") or {}).get("devices")
        if isinstance(deploy, dict)
        else None
    )
    where = merged.location("services", e.name, "deploy")
    if not isinstance(devices, list) or len(devices) != 1 or not isinstance(devices[0], dict):
        raise InputError(
            f"engine service {e.name} reserves its GPUs otherwise than with one "
            "deploy.resources.reservations.devices entry",
            location=where,
            rule="a spec gives each replica its GPUs (rendered as one nvidia device entry)",
            fix="reserve them with deploy.resources.reservations.devices: [{driver: nvidia, "
            "device_ids: [...], capabilities: [gpu]}] and import again",
        )
    device = devices[0]
    extra = set(device) - {"driver", "device_ids", "count", "capabilities"}
    if device.get("driver", "nvidia") != "nvidia" or extra or device.get("capabilities") != ["gpu"]:
        raise InputError(
            f"engine service {e.name}'s GPU reservation has keys a spec does not render "
            f"({', '.join(sorted(extra)) or 'driver/capabilities'})",
            location=where,
            rule="replica GPUs render as {driver: nvidia, device_ids|count, capabilities: [gpu]}",
            fix="reduce the reservation to that form, or keep this file hand-written",
        )
    out: dict[str, Any]
    ids = device.get("device_ids")
    if isinstance(ids, list) and ids and all(_GPU_INDEX.match(str(i)) for i in ids):
        out = {"gpus": [int(i) for i in ids]}
    elif "count" in device and device["count"] in ("all", -1):
        out = {"gpu_count": "all"}
    elif isinstance(device.get("count"), int) and device["count"] >= 1:
        out = {"gpu_count": device["count"]}
    else:
        raise InputError(
            f"engine service {e.name}'s GPUs are not numeric device ids or a count",
            location=where,
            rule="replica GPUs are indices, a count, or all",
            fix="use device_ids: ['0', '1'] or count: N",
        )
    # The rest of deploy stays in the fragment, without the devices the renderer writes.
    assert isinstance(deploy, dict)
    rest = dict(deploy)
    resources = dict(rest.get("resources") or {})
    reservations = {
        k: v for k, v in (resources.get("reservations") or {}).items() if k != "devices"
    }
    if reservations:
        resources["reservations"] = reservations
    else:
        resources.pop("reservations", None)
    if resources:
        rest["resources"] = resources
    else:
        rest.pop("resources", None)
    if rest:
        compose["deploy"] = rest
    else:
        compose.pop("deploy", None)
    return out


def _common(maps: list[dict[str, Any]]) -> dict[str, Any]:
    """Keys with the same value in every map, in the first map's order."""
    first, rest = maps[0], maps[1:]
    return {k: v for k, v in first.items() if all(k in m and m[k] == v for m in rest)}


def _overrides(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """What a replica changes over the base: new or different keys, null for a removed one."""
    out: dict[str, Any] = {k: v for k, v in own.items() if base.get(k, _ABSENT) != v}
    out.update({k: None for k in base if k not in own})
    return out


_ABSENT = object()
