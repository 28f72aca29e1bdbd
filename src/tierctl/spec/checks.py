"""Rules of a tier spec that relate several fields.

Each rule returns :class:`Problem` values located by field path; the loader turns the path
into a line. A problem that involves two places (an overlay clashing with the base argv, a GPU
given to two replicas) names both.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tierctl.catalog.store import did_you_mean, unknown_flag
from tierctl.compose.forms import (  # the image and resource shapes are compose's
    DIGEST_IMAGE,
    TAGGED_IMAGE,
    referenced_resources,
)
from tierctl.compose.profiles import run_together
from tierctl.credentials import literal_secret
from tierctl.engine_catalog import Catalog
from tierctl.spec.effective import (
    VariantError,
    effective_env,
    effective_flags,
    engine_catalog,
    flag_path,
    render_variant,
    service_name,
)
from tierctl.spec.tier_spec import HostEnv, SecretRef, TierSpec

PathKey = tuple[str | int, ...]

FLAG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
REPLICA_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
# Keys whose values are credentials (tierctl.credentials.literal_secret) must be ${VAR}
# references or {secret: NAME}, never literals.
# Values that look like real credentials wherever they appear.
SECRET_VALUE = re.compile(
    r"(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|"
    r"xox[abp]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|Bearer\s+[A-Za-z0-9._~+/=-]{16,})"
)
REFERENCE = re.compile(r"\{\{\s*([A-Za-z_]+)\s*\}\}")
REFERENCES = ("backends", "replica_services", "host", "tier")
# Keys of a replica service that the renderer owns: setting them in a compose fragment would
# let the fragment disagree with the spec's argv, env or image.
OWNED_KEYS = ("image", "container_name", "command", "entrypoint", "environment")


@dataclass(frozen=True)
class Problem:
    """One broken rule, at ``path``; ``also`` is a second place involved."""

    path: PathKey
    message: str
    rule: str
    fix: str
    value: Any = None
    also: PathKey | None = None


def _dotted(path: PathKey) -> str:
    return ".".join(str(p) for p in path)


def check_spec(spec: TierSpec) -> list[Problem]:
    """Every cross-field problem of a spec, in file order as far as practical."""
    problems: list[Problem] = []
    for check in (
        _check_flag_names,
        _check_engine,
        _check_owned_keys,
        _check_overlays,
        _check_replicas,
        _check_gpus,
        _check_variant,
        _check_services,
        _check_secrets,
        _check_declared,
        _check_equals_flags,
    ):
        problems.extend(check(spec))
    return problems


def _check_flag_names(spec: TierSpec) -> Iterator[Problem]:
    maps: list[tuple[PathKey, dict[str, Any]]] = [(("engine", "args"), spec.engine.args)]
    maps += [(("engine", "overlays", n), o) for n, o in spec.engine.overlays.items()]
    maps += [(("replicas", n, "args"), r.args) for n, r in spec.replicas.items()]
    for i, rule in enumerate(spec.rules):
        maps += [
            (("rules", i, part, "args"), getattr(rule, part).args) for part in ("when", "require")
        ]
    for path, flags in maps:
        for name in flags:
            if name.startswith("-"):
                yield Problem(
                    (*path, name),
                    f"flag {name!r} is written with leading dashes",
                    "flag-name",
                    f"write it without leading dashes: {name.lstrip('-')}:",
                )
            elif not FLAG_NAME.match(name):
                yield Problem(
                    (*path, name),
                    f"{name!r} is not a flag name",
                    "flag-name",
                    "use letters, digits, '-', '_' and '.'",
                )


def _check_engine(spec: TierSpec) -> Iterator[Problem]:
    if "{replica}" not in spec.engine.service:
        yield Problem(
            ("engine", "service"),
            "the service name template does not contain {replica}",
            "service-template",
            "add {replica}, e.g. model-{replica}, so each replica gets its own service",
            spec.engine.service,
        )
    images: list[tuple[PathKey, str]] = [(("engine", "image"), spec.engine.image)]
    images += [(("replicas", n, "image"), r.image) for n, r in spec.replicas.items() if r.image]
    others = [
        (("services", n, "compose", "image"), str(s.compose["image"]))
        for n, s in spec.services.items()
        if "image" in s.compose
    ]
    if spec.engine.image_policy == "as-written":
        return  # every image kept as the imported file had it (import warned for each)
    # Non-engine services may run a release tag (nginx:1.27); `latest` or no tag never.
    tagged = others + (images if spec.engine.image_policy == "tag" else [])
    for path, image in tagged:
        if not DIGEST_IMAGE.match(image) and not TAGGED_IMAGE.match(image):
            yield Problem(
                path,
                "image names no release (no tag, or latest)",
                "image-tag",
                "pin a release tag (name:1.2.3) or a digest (name@sha256:<64 hex>)",
                image,
            )
    if spec.engine.image_policy == "tag":
        return
    for path, image in images:
        if not DIGEST_IMAGE.match(image):
            yield Problem(
                path,
                "image is not pinned by digest",
                "image-digest",
                "use name@sha256:<64 hex> (docker buildx imagetools inspect NAME:TAG prints it)",
                image,
            )


def _check_owned_keys(spec: TierSpec) -> Iterator[Problem]:
    fragments: list[tuple[PathKey, dict[str, Any]]] = [(("engine", "compose"), spec.engine.compose)]
    fragments += [(("replicas", n, "compose"), r.compose) for n, r in spec.replicas.items()]
    for path, fragment in fragments:
        for key in OWNED_KEYS:
            if key in fragment:
                yield Problem(
                    (*path, key),
                    f"{_dotted(path)} sets {key!r}, which the renderer derives from the spec",
                    "owned-key",
                    "use engine.image / engine.launcher / engine.args / engine.env "
                    "(or the replica's image, args and env overrides)",
                )


def _check_overlays(spec: TierSpec) -> Iterator[Problem]:
    owner: dict[str, PathKey] = {flag: ("engine", "args", flag) for flag in spec.engine.args}
    for overlay, flags in spec.engine.overlays.items():
        for flag in flags:
            path: PathKey = ("engine", "overlays", overlay, flag)
            first = owner.get(flag)
            if first is not None:
                yield Problem(
                    path,
                    f"overlay {overlay!r} sets --{flag}, which is already set",
                    "overlay-clash",
                    f"remove --{flag} from {_dotted(first)} (the overlay adds it to every "
                    "replica) or drop it from the overlay",
                    also=first,
                )
            else:
                owner[flag] = path


def _check_replicas(spec: TierSpec) -> Iterator[Problem]:
    base_flags = dict(spec.engine.args)
    for overlay in spec.engine.overlays.values():
        base_flags.update(overlay)
    for name, replica in spec.replicas.items():
        if not REPLICA_NAME.match(name):
            yield Problem(
                ("replicas", name),
                f"replica name {name!r} is not usable in a service name",
                "replica-name",
                "use lower-case letters, digits, '-' and '_' (e.g. r1)",
            )
        for flag, value in replica.args.items():
            if value is None and flag not in base_flags:
                yield Problem(
                    ("replicas", name, "args", flag),
                    f"replica {name} removes --{flag}, which no base arg or overlay sets",
                    "override-unknown",
                    "remove this line, or fix the flag name",
                )
        for key, env_value in replica.env.items():
            if env_value is None and key not in spec.engine.env:
                yield Problem(
                    ("replicas", name, "env", key),
                    f"replica {name} removes env {key}, which engine.env does not set",
                    "override-unknown",
                    "remove this line, or fix the variable name",
                )


def _replica_profiles(spec: TierSpec, name: str) -> tuple[str, ...]:
    """The compose ``profiles`` a replica renders with (its fragment's, else the engine's)."""
    fragment = spec.replicas[name].compose
    value = fragment.get("profiles", spec.engine.compose.get("profiles"))
    return tuple(str(p) for p in value) if isinstance(value, list) else ()


def _check_gpus(spec: TierSpec) -> Iterator[Problem]:
    # Replicas in compose profiles that exclude each other never run together: they may
    # share GPUs (`validate` with the active profiles checks the project that runs).
    owners: dict[int, list[tuple[str, int]]] = {}
    profiles = {name: _replica_profiles(spec, name) for name in spec.replicas}
    for name, replica in spec.replicas.items():
        others = [
            o for o in spec.replicas if o != name and run_together(profiles[o], profiles[name])
        ]
        if replica.gpu_count == "all" and others:
            yield Problem(
                ("replicas", name, "gpu_count"),
                "gpu_count: all gives every GPU of the host to this replica, and the tier has others",
                "gpu-overlap",
                "list this replica's GPU indices (device_ids)",
                "all",
            )
        for i, gpu in enumerate(replica.gpus):
            claims = owners.setdefault(gpu, [])
            hit = next(
                (c for c in claims if c[0] == name or run_together(profiles[c[0]], profiles[name])),
                None,
            )
            claims.append((name, i))
            if hit is not None and hit[0] != name and _shares_fit(spec, gpu, owners, profiles):
                continue  # engines sharing the GPU by memory fraction
            if hit is not None:
                other, j = hit
                where = "twice on this replica" if other == name else f"also to replica {other}"
                yield Problem(
                    ("replicas", name, "gpus", i),
                    f"GPU {gpu} is given {where}",
                    "gpu-overlap",
                    "give each GPU to one replica only",
                    gpu,
                    also=("replicas", other, "gpus", j),
                )


def memory_fraction(spec: TierSpec, replica: str) -> float | None:
    """The share of each of its GPUs a replica's engine takes (vLLM's
    ``--gpu-memory-utilization``, SGLang's ``--mem-fraction-static``), when it sets one."""
    from tierctl.engines import profile_for

    flag = profile_for(spec.engine.kind).memory_fraction_flag
    value = effective_flags(spec, replica).get(flag) if flag else None
    try:
        share = float(value) if isinstance(value, str | int | float) else None
    except ValueError:
        return None
    return share if share is not None and 0 < share <= 1 else None


def _shares_fit(
    spec: TierSpec,
    gpu: int,
    owners: dict[int, list[tuple[str, int]]],
    profiles: dict[str, tuple[str, ...]],
) -> bool:
    """Whether every replica given ``gpu`` that runs with another sets a memory fraction,
    and those of each set running together sum to at most the whole GPU."""
    names = [n for n, _ in owners[gpu]]
    shares = {n: memory_fraction(spec, n) for n in names}
    if any(v is None for v in shares.values()):
        return False
    for n in names:
        together = [o for o in names if o == n or run_together(profiles[o], profiles[n])]
        if sum(shares[o] or 0.0 for o in together) > 1.0 + 1e-9:
            return False
    return True


def _check_variant(spec: TierSpec) -> Iterator[Problem]:
    seen: set[str] = set()
    for name in spec.replicas:
        try:
            render_variant(spec, name, effective_flags(spec, name), effective_env(spec, name))
        except VariantError as exc:
            if exc.placeholder in seen:
                continue  # one message per placeholder, not one per replica
            seen.add(exc.placeholder)
            yield from _placeholder_problems(spec, name, exc)
    for token_name, token in spec.telemetry.tokens.items():
        if not token.text:
            yield Problem(
                ("telemetry", "tokens", token_name, "text"),
                "a token's text is empty, so the variant could not show it",
                "variant-token",
                "give the token a text such as -dyntok",
            )
    collectors = [n for n, s in spec.services.items() if s.role == "collector" and s.scrape]
    if "collector-scrape-config" in spec.telemetry.places and not collectors:
        yield Problem(
            ("telemetry", "places"),
            "collector-scrape-config is a place of the variant, but no collector service "
            "has a scrape config",
            "variant-place",
            "add `scrape: {target: ...}` to the collector service, or drop the place",
        )


def _placeholder_problems(spec: TierSpec, replica: str, exc: VariantError) -> Iterator[Problem]:
    """A variant placeholder no flag of ``replica`` fills, and the mistake behind it.

    When the placeholder is a flag of the pinned release and the near miss the replica sets
    is not, the typo is in the args, not in the template: the unknown flag is reported first,
    at its own line, and the template's fix points there, never suggesting that the
    template copy the typo.
    """
    flags = effective_flags(spec, replica)
    known = [*spec.telemetry.tokens, *flags, "replica", "host", "tier"]
    close = difflib.get_close_matches(exc.placeholder, known, n=1, cutoff=0.7)
    guess = close[0] if close and close[0] != exc.placeholder else None
    fix = "use a flag every replica sets with a value, a name from telemetry.tokens, or "
    fix += "{replica}/{host}/{tier}"
    typo = _misspelt_flag(spec, replica, exc.placeholder, guess) if guess in flags else None
    if typo is not None:
        where, catalog = typo
        token = f"--{guess}"
        yield Problem(
            where,
            unknown_flag(spec.engine.kind, spec.engine.version, token),
            "unknown-flag",
            did_you_mean(catalog, token)
            + f" (the variant template's {{{exc.placeholder}}} reads --{exc.placeholder})",
            guess,
        )
        fix = (
            f"the template is right: the flag at {_dotted(where)} is misspelt ({guess}; "
            f"{catalog.engine} {catalog.version} has --{exc.placeholder}): fix its name there"
        )
    elif guess is not None:
        fix = f"did you mean {{{guess}}}? {fix}"
    yield Problem(
        ("telemetry", "variant"),
        f"variant placeholder {exc}",
        "variant-template",
        fix,
        spec.telemetry.variant,
    )


def _misspelt_flag(
    spec: TierSpec, replica: str, placeholder: str, guess: str | None
) -> tuple[PathKey, Catalog] | None:
    """Where ``guess`` (a flag the replica sets, close to ``placeholder``) is set, and the
    pinned catalog, when the catalog knows ``placeholder`` and not ``guess``: then ``guess``
    is the typo. None otherwise, or without a shipped catalog to tell."""
    catalog = engine_catalog(spec)
    if guess is None or catalog is None:
        return None
    if catalog.lookup(f"--{guess}") is not None or catalog.lookup(f"--{placeholder}") is None:
        return None
    return flag_path(spec, replica, guess) or ("engine", "args", guess), catalog


def _check_services(spec: TierSpec) -> Iterator[Problem]:
    replica_services = {service_name(spec, r) for r in spec.replicas}
    for name, service in spec.services.items():
        if name in replica_services:
            yield Problem(
                ("services", name),
                f"service {name!r} has the name of a replica service",
                "service-name",
                "rename the service",
            )
        if service.scrape and service.role != "collector":
            yield Problem(
                ("services", name, "scrape"),
                "only a collector has a scrape config",
                "scrape-role",
                "set role: collector, or move the scrape config",
            )
        for path, text in _strings(service.compose, ("services", name, "compose")):
            for ref in REFERENCE.findall(text):
                if ref not in REFERENCES:
                    yield Problem(
                        path,
                        f"unknown reference {{{{{ref}}}}}",
                        "reference",
                        f"use one of {', '.join('{{' + r + '}}' for r in REFERENCES)}",
                        text,
                    )


def _strings(node: Any, path: PathKey) -> Iterator[tuple[PathKey, str]]:
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(v, (*path, str(k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _strings(v, (*path, i))


def _env_items(node: Any, path: PathKey) -> Iterator[tuple[PathKey, str, Any]]:
    """(path, key, value) of a compose ``environment`` in map or list form."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield (*path, str(k)), str(k), v
    elif isinstance(node, list):
        for i, item in enumerate(node):
            if isinstance(item, str) and "=" in item:
                k, v = item.split("=", 1)
                yield (*path, i), k, v


def _check_secrets(spec: TierSpec) -> Iterator[Problem]:
    fix = "use {secret: NAME} (rendered as ${NAME:?...}) and set NAME where compose runs"
    envs: list[tuple[PathKey, str, Any]] = []
    envs += [(("engine", "env", k), k, v) for k, v in spec.engine.env.items()]
    for name, replica in spec.replicas.items():
        envs += [(("replicas", name, "env", k), k, v) for k, v in replica.env.items()]
    for name, service in spec.services.items():
        env = service.compose.get("environment")
        envs += list(_env_items(env, ("services", name, "compose", "environment")))
    for path, key, value in envs:
        if value is None or isinstance(value, SecretRef | HostEnv):
            continue
        text = str(value)
        if literal_secret(key, text):
            yield Problem(
                path,
                f"{key} holds a literal value; credentials never go into the spec",
                "literal-secret",
                fix,
                "<redacted>",
            )
    roots: list[tuple[PathKey, Any]] = [
        (("engine", "args"), spec.engine.args),
        (("engine", "compose"), spec.engine.compose),
    ]
    roots += [(("replicas", n, "args"), r.args) for n, r in spec.replicas.items()]
    roots += [(("services", n, "compose"), s.compose) for n, s in spec.services.items()]
    for root, node in roots:
        for path, text in _strings(node, root):
            if SECRET_VALUE.search(text):
                yield Problem(
                    path,
                    "this value looks like a credential",
                    "literal-secret",
                    fix,
                    "<redacted>",
                )


def _check_equals_flags(spec: TierSpec) -> Iterator[Problem]:
    for i, name in enumerate(spec.engine.equals_flags):
        if name.startswith("-"):
            yield Problem(
                ("engine", "equals_flags", i),
                f"flag {name!r} is written with leading dashes",
                "flag-name",
                f"write it without leading dashes: {name.lstrip('-')}",
            )


def _check_declared(spec: TierSpec) -> Iterator[Problem]:
    """Every named volume, network, secret and config a service uses is declared at the top
    level, so a rendered file never references one compose would refuse as undefined."""
    fragments: list[tuple[PathKey, dict[str, Any]]] = [(("engine", "compose"), spec.engine.compose)]
    fragments += [(("replicas", n, "compose"), r.compose) for n, r in spec.replicas.items()]
    fragments += [(("services", n, "compose"), s.compose) for n, s in spec.services.items()]
    scrape = {s.scrape.config for s in spec.services.values() if s.scrape is not None}
    declared = {
        "volumes": set(spec.volumes),
        "networks": set(spec.networks) | {"default"},
        "secrets": set(spec.secrets),
        "configs": set(spec.configs) | scrape,
    }
    for name in sorted(set(spec.configs) & scrape):
        yield Problem(
            ("configs", name),
            f"config {name!r} is also the collector's scrape config name",
            "config-name",
            "rename one of them (services.<collector>.scrape.config)",
        )
    for root, fragment in fragments:
        for key, i, ref in referenced_resources(fragment):
            if ref not in declared[key]:
                path = (*root, key) + ((i,) if i is not None else ())
                yield Problem(
                    path,
                    f"{key[:-1]} {ref!r} is used but not declared at the top level",
                    "undeclared-" + key[:-1],
                    f"declare it: {key}: {{{ref}: {{}}}} at the top of the spec",
                    ref,
                )
