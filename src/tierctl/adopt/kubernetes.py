"""``tierctl import`` of Kubernetes manifests: the engine workloads become a tier spec.

Each serving engine container (a Deployment's, a StatefulSet's, an LWS leader's, a KServe
template's, an RBG role's, a Dynamo worker's) of the most common engine becomes one replica;
the flags and environment they share become the engine's, the rest each replica's overrides,
as :mod:`tierctl.adopt.compose` does for compose services. GPUs come from ``nvidia.com/gpu``, the host
from a ``kubernetes.io/hostname`` node selector, secrets from ``secretKeyRef`` (as
``{secret: NAME}``, never a value; a literal credential is refused).

The result is checked before it is returned: the spec loads, and its Kubernetes rendering
runs, replica by replica, the flags the manifests run (``differences`` lists any that do not).
What the spec cannot say (a multi-node group's rank flags, which the rendering writes itself;
a pod count of a Deployment) is named in ``notes``.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierctl.adopt.compose import common_keys as _common
from tierctl.adopt.compose import overrides_over as _overrides
from tierctl.adopt.kubernetes_checks import (
    Release,
    check_group,
    check_script,
    check_wrapper,
    placement,
    release_of,
    resolve_variables,
    token_location,
    volumes,
    who,
)
from tierctl.catalog.build import parse_ref
from tierctl.contracts.kubernetes import (
    ManifestFindings,
    canonical_flags,
    replica_of,
    secret_findings,
)
from tierctl.engine_catalog import Catalog
from tierctl.errors import InputError, Location
from tierctl.kubernetes.containers import EngineContainer, engine_containers
from tierctl.kubernetes.manifests import Manifest, parse_manifests, read_manifests
from tierctl.render.kubernetes import (
    ENV_FILE_ANNOTATION,
    KUBE_KEY,
    REPLICA_LABEL,
    ROLE_LABEL,
    render_kubernetes,
)
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec.loader import load_spec_text
from tierctl.spec.tier_spec import TierSpec

_NAME = re.compile(r"[^a-z0-9_-]+")


@dataclass
class KubeImport:
    """What the import produced: the spec, its text, notes and round-trip differences."""

    spec: TierSpec
    text: str
    notes: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)


def _replica_name(e: EngineContainer, taken: set[str]) -> str:
    name = e.site.labels.get(REPLICA_LABEL) or e.manifest.name or "engine"
    if e.manifest.kind == "RoleBasedGroup" and REPLICA_LABEL not in e.site.labels:
        role = e.manifest.data["spec"]["roles"][e.site.path[2]].get("name", "")
        name = f"{name}-{role}"
    elif e.manifest.kind == "DynamoGraphDeployment":
        name = f"{name}-{e.site.path[2]}"
    name = _NAME.sub("-", name.lower()).strip("-_") or "engine"
    if name in taken:
        name = f"{name}-{e.container.get('name') or len(taken)}"
    return name


def _flags(e: EngineContainer, catalog: Catalog | None) -> dict[str, Any]:
    flags = e.profile.command_flags(e.argv, catalog)
    for _, _, words in e.env_args:
        flags.update(e.profile.command_flags((*e.profile.default_launcher(), *words), catalog))
    for axis, names in e.profile.parallel_flags:
        # A size the shape sets outside the argv (KServe's parallelism) is the engine's flag.
        if axis in e.site.parallelism and not any(n in flags for n in names):
            flags[names[0]] = str(e.site.parallelism[axis])
    if e.site.nodes > 1:
        # The rendering writes a group's leader address and ranks itself (from LWS's env).
        for name in (e.profile.node_rank_flag, e.profile.leader_address_flag):
            if name:
                flags.pop(name, None)
        for name in e.profile.nodes_flags:
            if name in flags:
                flags[name] = str(e.site.nodes)
    return flags


def _env(e: EngineContainer) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in e.container.get("env") or []:
        if not isinstance(item, dict) or "name" not in item:
            continue
        name = str(item["name"])
        if name in ("VLLM_ADDITIONAL_ARGS", "SGLANG_ADDITIONAL_ARGS", "EXTRA_ARGS", "ENGINE_ARGS"):
            continue  # read into the flags
        ref = (item.get("valueFrom") or {}).get("secretKeyRef")
        if isinstance(ref, dict):
            out[name] = {"secret": re.sub(r"[^A-Za-z0-9_]", "_", name)}
        elif "value" in item:
            out[name] = str(item["value"])
    return out


def _gpus(e: EngineContainer) -> int:
    for key in ("limits", "requests"):
        box = (e.container.get("resources") or {}).get(key) or {}
        if "nvidia.com/gpu" in box:
            try:
                return int(str(box["nvidia.com/gpu"]))
            except ValueError:
                return 0
    return 0


def _host(engines: list[EngineContainer], default: str) -> str:
    hosts = {
        str((e.site.spec.get("nodeSelector") or {}).get("kubernetes.io/hostname", ""))
        for e in engines
    }
    return hosts.pop() if len(hosts) == 1 and "" not in hosts else default


def _pick(manifests: Sequence[Manifest]) -> tuple[list[EngineContainer], list[str]]:
    """The containers of the most common engine, and a note for each one of another engine
    (a spec runs one engine; a file with a vLLM and an SGLang Deployment lost one silently)."""
    engines = [e for m in manifests for e in engine_containers(m) if e.site.role != "worker"]
    if not engines:
        # The error names the files read (a manifest with no engine is still a file someone
        # gave: "no engine container found" alone did not say which, file fuzzer #38).
        files = list(dict.fromkeys(m.source for m in manifests))
        raise InputError(
            "no engine container found (no SGLang or vLLM launcher or image)"
            + (f" in any of the {len(files)} files ({', '.join(files)})" if len(files) > 1 else ""),
            location=Location(file=files[0]) if files else None,
            rule="import needs at least one engine container",
            fix="check the images and commands of the manifests",
        )
    # A framework's worker around an engine (Dynamo's) is refused on its own; beside an
    # engine's own server it is left out, as another engine is.
    own = [e for e in engines if not e.wrapper]
    wrapped = [
        f"{e.manifest.ref} container {e.container.get('name') or 'main'} runs "
        f"{e.profile.title} inside {e.profile.wrapper_title}'s worker: not imported (a spec "
        f"starts {e.profile.title}'s own server)"
        for e in engines
        if e.wrapper and own
    ]
    engines = own or engines
    kinds = Counter(e.profile.kind for e in engines)
    kind = kinds.most_common(1)[0][0]
    left = wrapped + [
        f"{e.manifest.ref} container {e.container.get('name') or '?'} runs "
        f"{e.profile.title}, not {_engine_title(engines, kind)}: not imported (a spec runs "
        "one engine; import it on its own)"
        for e in engines
        if e.profile.kind != kind
    ]
    return [e for e in engines if e.profile.kind == kind], left


def _engine_title(engines: Sequence[EngineContainer], kind: str) -> str:
    """The title of the engine ``kind`` among ``engines``."""
    return next(e.profile.title for e in engines if e.profile.kind == kind)


def import_manifests(
    paths: Sequence[str | Path],
    *,
    stdin: str | None = None,
    tier: str | None = None,
    host: str = "localhost",
    engine: str | None = None,
    out: str | Path | None = None,
) -> KubeImport:
    """A tier spec for the engine workloads of Kubernetes manifests (``out``: where it will
    be written, the name its own messages give it).

    Raises:
        InputError: nothing to import, no release named, a literal credential, a script or
            a variable the spec cannot carry (each located in the manifests).
    """
    manifests = read_manifests(paths, stdin)
    found = ManifestFindings()
    for m in manifests:
        secret_findings(m, found)
    for v in found.violations:
        raise InputError(
            v.message,
            location=v.location,
            rule="no literal credentials in a spec",
            fix=v.fix or "read it from a Secret",
        )
    engines, left_out = _pick(manifests)
    forced = None
    if engine:
        from tierctl.catalog.store import resolve_catalog

        if "==" in engine:
            parse_ref(engine)  # a clear error for a bad KIND==VERSION
        forced = resolve_catalog(engine)
    for e in engines:
        check_wrapper(e)  # before its image: a wrapper's tag is not the engine's
    releases = [release_of(e, forced) for e in engines]
    release = releases[0]
    catalog = release.catalog
    for e, other in zip(engines, releases, strict=True):
        if other.catalog.ref != catalog.ref:
            raise InputError(
                f"{who(e)} runs {other.catalog.ref}, {who(engines[0])} {catalog.ref}: a spec "
                "pins one release",
                location=e.manifest.location(*e.path, "image"),
                rule="a spec runs one engine release",
                fix="import the workloads of each release on their own",
            )
    notes: list[str] = [*left_out, *dict.fromkeys(r.note for r in releases if r.note)]
    parts = _parts(engines, catalog, notes)
    text = _document(parts, engines, release, tier, host, notes)
    name = str(out) if out is not None else "(the imported spec)"
    spec = load_spec_text(text, name)
    return KubeImport(spec, text, notes, _round_trip(spec, parts, catalog))


def _parts(
    engines: list[EngineContainer], catalog: Catalog, notes: list[str]
) -> dict[str, dict[str, Any]]:
    """Each engine container's replica: its flags (variables filled in), env, GPUs, role,
    image, placement and volumes."""
    taken: set[str] = set()
    parts: dict[str, dict[str, Any]] = {}
    for e in engines:
        check_group(e)
        check_script(e)
        name = _replica_name(e, taken)
        taken.add(name)
        count = (e.manifest.data.get("spec") or {}).get("replicas")
        if isinstance(count, int) and count > 1:
            notes.append(
                f"{e.manifest.ref} runs {count} pods of one template: imported as one replica ({name})"
            )
        mounts, shm, lost = volumes(e)
        notes += lost
        if e.container.get("envFrom") and not _env_files(e):
            notes.append(f"{who(e)}: envFrom (a ConfigMap or Secret's variables) not carried")
        parts[name] = {
            "flags": resolve_variables(
                e,
                _flags(e, catalog),
                functools.partial(_locate, e, catalog),
                _env_flag_names(e, catalog),
            ),
            "env": _env(e),
            "gpus": _gpus(e),
            "role": e.site.labels.get(ROLE_LABEL),
            "image": str(e.container.get("image") or ""),
            "container": e,
            "compose": _compose(e, mounts, shm),
        }
    return parts


def _env_flag_names(e: EngineContainer, catalog: Catalog) -> frozenset[str]:
    """The flags read from env strings of extra flags (the runtime's script expands them)."""
    names: set[str] = set()
    for _, _, words in e.env_args:
        names |= set(e.profile.command_flags((*e.profile.default_launcher(), *words), catalog))
    return frozenset(names)


def _locate(e: EngineContainer, catalog: Catalog, flag: str) -> Location:
    """Where ``--flag`` sits: its argv token (its own line in a script), or the env string
    of extra flags it came from."""
    for i, token in enumerate(e.argv):
        if token == f"--{flag}" or token.startswith(f"--{flag}="):
            return token_location(e, i)
    for _, path, words in e.env_args:
        if flag in e.profile.command_flags((*e.profile.default_launcher(), *words), catalog):
            return e.manifest.location(*path)
    return token_location(e, 0)


def _env_files(e: EngineContainer) -> list[str]:
    """The env files a tierctl rendering names (its ``tierctl/env-file`` annotation)."""
    meta = e.manifest.data.get("metadata") or {}
    value = (meta.get("annotations") or {}).get(ENV_FILE_ANNOTATION)
    return [f for f in str(value).split(",") if f] if value else []


def _load_budget(probe: Any) -> int | None:
    """Seconds a startup probe lets the engine load (delay + threshold x period), or None."""
    if not isinstance(probe, dict):
        return None
    try:
        delay = int(probe.get("initialDelaySeconds", 0))
        return delay + int(probe.get("failureThreshold", 3)) * int(probe.get("periodSeconds", 10))
    except (TypeError, ValueError):
        return None


def _compose(e: EngineContainer, mounts: list[str], shm: str | None) -> dict[str, Any]:
    """The replica's compose fragment: volumes, shm size, env files, and its placement in
    ``x-kubernetes``."""
    fragment: dict[str, Any] = {}
    if mounts:
        fragment["volumes"] = mounts
    if shm:
        fragment["shm_size"] = shm
    files = _env_files(e)
    if files:
        fragment["env_file"] = files if len(files) > 1 else files[0]
    budget = _load_budget(e.container.get("startupProbe"))
    if budget is not None:
        # The model load's budget (the rendering's startup probe is as long as it).
        fragment["healthcheck"] = {"start_period": f"{budget}s"}
    where = placement(e)
    if where:
        fragment[KUBE_KEY] = where
    return fragment


def _document(
    parts: dict[str, dict[str, Any]],
    engines: list[EngineContainer],
    release: Release,
    tier: str | None,
    host: str,
    notes: list[str],
) -> str:
    first = engines[0]
    catalog = release.catalog
    for p in parts.values():
        # KServe's samples give no image (the runtime config does): the release's own.
        p["image"] = p["image"] or release.image
    images = [p["image"] for p in parts.values()]
    image = max(sorted(set(images)), key=images.count)
    base_flags = _ordered_base([p["flags"] for p in parts.values()])
    base_env = _common([p["env"] for p in parts.values()])
    launcher = list(first.profile.split_command(first.argv).launcher)
    engine_doc: dict[str, Any] = {
        "kind": first.profile.kind,
        "version": catalog.version,
        "image": image,
        "service": _service_template(parts),
        "launcher": launcher,
        "args": base_flags,
    }
    if base_env:
        engine_doc["env"] = base_env
    base_compose = _common([p["compose"] for p in parts.values()])
    if base_compose:
        engine_doc["compose"] = base_compose
    if release.as_written:
        engine_doc["image_policy"] = "as-written"
    elif "@sha256:" not in image:
        engine_doc["image_policy"] = "tag"
        notes.append(f"engine image {image} is a tag (image_policy: tag); pin it by digest")
    replicas: dict[str, Any] = {}
    for name, p in parts.items():
        doc: dict[str, Any] = {"gpu_count": p["gpus"]}
        if p["role"] in ("control", "canary"):
            doc["role"] = p["role"]
        args = _overrides(base_flags, p["flags"])
        env = _overrides(base_env, p["env"])
        if args:
            doc["args"] = args
        if env:
            doc["env"] = env
        compose = {k: v for k, v in p["compose"].items() if base_compose.get(k) != v}
        if compose:
            doc["compose"] = compose
        if p["image"] != image:
            doc["image"] = p["image"]
        replicas[name] = doc
    sources = sorted({e.manifest.source for e in engines})
    document = {
        "tier": _NAME.sub("-", (tier or first.manifest.name or "tier").lower()).strip("-_")
        or "tier",
        "host": _host([p["container"] for p in parts.values()], host),
        "description": "Imported from " + ", ".join(sources),
        "output": "compose.yaml",
        "engine": engine_doc,
        "replicas": replicas,
        **_declared_volumes(parts),
        "telemetry": {"variant": "{replica}", "places": []},
    }
    header = "# Written by tierctl import from Kubernetes manifests: " + ", ".join(sources) + "\n"
    return header + dump_yaml(document)


def _ordered_base(flag_sets: list[dict[str, Any]]) -> dict[str, Any]:
    """The engine's flags: every replica's, in the order the manifests give them, each with
    the value most replicas have (the others override it, a replica without it nulls it),
    so each replica's rendering runs its flags in its manifest's order."""
    base: dict[str, Any] = {}
    for flags in flag_sets:
        for name, value in flags.items():
            base.setdefault(name, value)
    for name in base:
        values = [f[name] for f in flag_sets if name in f]
        shown = [repr(v) for v in values]
        base[name] = values[shown.index(max(shown, key=shown.count))]
    return base


def _service_template(parts: dict[str, dict[str, Any]]) -> str:
    """The workloads' names as a template of the replica name (``model-{replica}``, as a
    tierctl rendering names them), else ``{replica}``."""
    templates = {
        p["container"].manifest.name.replace(name, "{replica}", 1)
        for name, p in parts.items()
        if name in p["container"].manifest.name
    }
    if len(templates) == 1 and len(parts) == sum(
        name in p["container"].manifest.name for name, p in parts.items()
    ):
        return str(templates.pop())
    return "{replica}"


def _declared_volumes(parts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The top-level ``volumes`` the replicas' claims need: each an external compose volume
    named as the claim, so the Kubernetes rendering mounts the same claim."""
    names = sorted(
        {
            str(v).split(":", 1)[0]
            for p in parts.values()
            for v in p["compose"].get("volumes", [])
            if not str(v).startswith("/")
        }
    )
    return {"volumes": {n: {"external": True, "name": n} for n in names}} if names else {}


def _round_trip(spec: TierSpec, parts: dict[str, dict[str, Any]], catalog: Catalog) -> list[str]:
    """Replica by replica, the flags the spec's rendering runs against the manifests'."""
    rendered = parse_manifests(render_kubernetes(spec), "(rendered)")
    again = {
        replica_of(e, spec): e
        for m in rendered
        for e in engine_containers(m)
        if e.site.role != "worker"
    }
    out: list[str] = []
    for name, p in parts.items():
        source: EngineContainer = p["container"]
        if source.site.nodes > 1 and not source.profile.nodes_flags:
            out.append(
                f"replica {name}: a group of {source.site.nodes} pods ({source.profile.title} "
                "across nodes by its own launcher script) renders as one pod: the spec has no "
                "multi-node launch for this engine"
            )
        e = again.get(name)
        if e is None:
            out.append(f"replica {name}: not rendered")
            continue
        want = canonical_flags(p["flags"], catalog)
        got = canonical_flags(_flags(e, catalog), catalog)
        host = e.profile.listen_host_flag
        if want.get(host) in ("127.0.0.1", "localhost", "::1"):
            want[host] = "0.0.0.0"  # the rendering listens on the pod's IP
        for flag in sorted(set(want) | set(got)):
            if want.get(flag) != got.get(flag):
                out.append(f"replica {name}: --{flag} {want.get(flag)!r} became {got.get(flag)!r}")
    return out
