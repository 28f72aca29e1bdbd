"""``tierctl validate`` of Kubernetes manifests: schemas, then the engine contracts inside.

Every object is checked against its schema (TC007: the core API's, strict, or tierctl's of a
custom resource). Every container that runs an engine, in whatever shape holds it
(:mod:`tierctl.kubernetes.containers`), is checked as a compose service's engine is:

- TC004 engine-flag-catalog: each flag of its argv, of a shell-script token, and of an env
  string of extra flags, against the pinned release's catalog (did-you-mean included);
- TC006 hygiene: TP x PP x DP against its ``nvidia.com/gpu`` (or Dynamo's ``gpu``); probes that
  would kill a loading engine (no startup probe and a liveness probe that gives up before a
  model loads) or restart a busy one (a liveness probe a tokenization burst can fail); a
  loopback listen address (nothing outside the pod reaches it); a credential written into an
  env value or an argv token instead of a ``secretKeyRef``;
- with a spec, TC001 argv-pinning and TC002 variant-truthfulness per replica: each replica's
  workload runs exactly the spec's flags (the canary's flag on the control is found) and its
  pods carry its variant label.

Each finding is located to ``file:line`` of the manifest. The report says what was not
checked (kinds no schema knows, engines without a catalog, GPU counts not given).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tierctl.catalog.store import catalog_for_image, load_catalog, resolve_catalog, shipped
from tierctl.compose.argv import FlagUse, parse_flags
from tierctl.contracts.flag_catalog import flag_findings
from tierctl.contracts.report import RULES, Report, Violation
from tierctl.contracts.standalone import SPEC_ONLY
from tierctl.credentials import (
    embedded_credential,
    is_secret_flag,
    literal_secret,
    looks_secret_name,
)
from tierctl.engine_catalog import Catalog
from tierctl.engines import EngineProfile
from tierctl.kubernetes.containers import (
    EngineContainer,
    engine_containers,
    pod_sites,
    split_scripts,
)
from tierctl.kubernetes.manifests import Manifest, parse_manifests, read_manifests
from tierctl.kubernetes.schemas import has_schema, schema_findings
from tierctl.render.kubernetes import (
    ENGINE_ANNOTATION,
    GROUP_SIZE_VARIABLES,
    KUBERNETES_VERSION,
    MIN_LIVENESS_TIMEOUT_S,
    MIN_LIVENESS_WINDOW_S,
    REPLICA_LABEL,
    label_value_problem,
    load_budget_s,
    pod_flags,
)
from tierctl.spec import load_spec, resolve_tier
from tierctl.spec.effective import ResolvedReplica, engine_catalog, equals_form, replica_argv
from tierctl.spec.rules import check_rules
from tierctl.spec.tier_spec import TierSpec

#: Without a spec, a model is assumed to need at least this long to load (a small model from
#: local NVMe loads in one to two minutes; CUDA graph capture and compilation add minutes).
MIN_LOAD_S = 300
_K8S_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass
class ManifestFindings:
    violations: list[Violation] = field(default_factory=list)
    warnings: list[Violation] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)


def _v(m: Manifest, path: tuple[str | int, ...], rule: str, message: str, **kw: Any) -> Violation:
    return Violation(rule=rule, service=m.ref, message=message, location=m.location(*path), **kw)


def _schema(m: Manifest, version: str, out: ManifestFindings) -> None:
    if not m.kind or not m.api_version:
        out.violations.append(
            _v(
                m,
                (),
                "TC007",
                "not a Kubernetes object: apiVersion and kind are required",
                fix="give the object its apiVersion and kind",
            )
        )
        return
    if not has_schema(version, m):
        out.unchecked.append(
            f"{m.source}: {m.ref} ({m.api_version}): no schema knows this kind; its fields are "
            "not checked (its containers still are)"
        )
    for finding in schema_findings(version, m):
        out.violations.append(
            _v(
                m,
                finding.path,
                "TC007",
                f"{finding.message} (Kubernetes {version} schema, strict)"
                if m.group
                in (
                    "",
                    "apps",
                    "batch",
                    "rbac.authorization.k8s.io",
                    "policy",
                    "autoscaling",
                    "networking.k8s.io",
                )
                else f"{finding.message} ({m.api_version} {m.kind} schema)",
                fix="fix the field as the API defines it (an unknown field is refused in strict "
                "mode: a typo, or a field of another kind or version)",
            )
        )
    for site in pod_sites(m):
        for key, value in site.labels.items():
            problem = label_value_problem(value)
            if problem:
                labels = (*site.path[:-1], "metadata", "labels", key)
                out.violations.append(
                    _v(
                        m,
                        labels,
                        "TC007",
                        f"label {key}={value!r} is refused by the API server: {problem}",
                        found=value,
                        fix="shorten the value to a valid label value",
                    )
                )


_SHELL_VAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


_SUBSTITUTION = re.compile(r"\$\(.*\)")


def _as_compose_refs(use: FlagUse, shell: bool = False) -> FlagUse:
    """Kubernetes's ``$(VAR)`` read as a reference filled in at deploy time (like ``${VAR}``);
    in a shell script, the shell's ``$VAR`` and ``${VAR}`` too (filled in at start). Outside a
    shell ``$VAR`` stays literal, as the kubelet passes it."""
    if not any("$" in v for v in use.values):
        return use
    values = tuple(_K8S_VAR.sub(r"${\1}", v) for v in use.values)
    if shell:
        # A command substitution or arithmetic (`$((A * B))`) is the shell's value too.
        values = tuple(_SUBSTITUTION.sub("${_}", v) for v in values)
        values = tuple(_SHELL_VAR.sub(r"${\1}", v) for v in values)
    return replace(use, values=values)


def _release_key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version))


@dataclass(frozen=True)
class CatalogChoice:
    """The catalog an engine container's flags are checked against, and why.

    Attributes:
        catalog: None when no catalog fits (``unchecked`` says why).
        note: a warning that it is not the container's own release (the newest shipped
            one stands in, as compose's validate does).
        unchecked: why the flags are not checked.
    """

    catalog: Catalog | None
    note: str | None = None
    unchecked: str | None = None


def engine_image(profile: EngineProfile, image: str) -> bool:
    """Whether ``image`` is a build of ``profile``'s engine: one of its images, or a
    repository named after it (``aibrix/vllm-openai-aibrix-kvcache``); ``ubuntu:22.04``
    running the engine from a script is not."""
    if profile.matches_image(image):
        return True
    repo = image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0].lower()
    return profile.kind in repo


def image_release(profile: EngineProfile, image: str) -> str | None:
    """The release an engine image's tag names (``v0.10.2-20251022`` -> ``0.10.2``), or None
    (no tag, ``latest``, a date, or an image that is not the engine's)."""
    return profile.image_version(image) if image and engine_image(profile, image) else None


def engine_pin(e: EngineContainer) -> str | None:
    """The ``KIND==VERSION`` the workload's ``tierctl/engine`` annotation pins (the spec's
    release, written by render's Kubernetes target), or None."""
    meta = e.manifest.data.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, dict) else None
    pin = notes.get(ENGINE_ANNOTATION) if isinstance(notes, dict) else None
    if isinstance(pin, str) and pin.startswith(f"{e.profile.kind}=="):
        return pin
    return None


def choose_catalog(
    e: EngineContainer, spec: TierSpec | None, forced: Catalog | None
) -> CatalogChoice:
    """The spec's release; else the workload's pin; else the image tag's release; else
    ``--engine``'s; else the newest shipped catalog with a warning (compose's rule). An image
    tag naming a release older than every shipped catalog is not checked (a newer catalog
    would call its removed flags typos), and ``--engine`` never overrides the release an
    image tag names (that release is what runs)."""
    kind = e.profile.kind
    if spec is not None and spec.engine.kind == kind:
        return CatalogChoice(engine_catalog(spec))
    pin = engine_pin(e)
    if pin is not None and (kind, pin.partition("==")[2]) in shipped():
        return CatalogChoice(load_catalog(kind, pin.partition("==")[2]))
    image = str(e.container.get("image") or "")
    # A wrapper's image (Dynamo's vllm-runtime:1.3.1) is tagged with the wrapper's release.
    version = None if e.wrapper else image_release(e.profile, image)
    ours = forced if forced is not None and forced.engine == kind else None
    if version is not None:
        if (kind, version) in shipped():
            return CatalogChoice(load_catalog(kind, version))
        if ours is not None and ours.version == version:
            return CatalogChoice(ours)
        releases = sorted((v for k, v in shipped() if k == kind), key=_release_key)
        if releases and _release_key(version) < _release_key(releases[0]):
            return CatalogChoice(
                None,
                unchecked=f"its image {image!r} runs {kind} {version}, older than every "
                f"shipped catalog ({', '.join(releases)}): a newer release's catalog would "
                "call its removed flags typos"
                + (f"; `engine` {ours.ref} is not its release" if ours is not None else ""),
            )
        if ours is not None:
            return CatalogChoice(
                ours,
                note=f"flags checked against {ours.ref} (`engine`); the image tag names {version}",
            )
    elif ours is not None:
        return CatalogChoice(ours)
    catalog, note = catalog_for_image(kind, version, image or None)
    if note is not None and image and not engine_image(e.profile, image):
        note = (
            f"flags checked against {catalog.ref if catalog else kind}, the newest shipped "
            f"catalog; the image {image!r} is not the engine's, so its tag names no release"
        )
    if catalog is None:
        return CatalogChoice(None, unchecked=f"no shipped catalog of {kind}")
    if e.wrapper:
        note = (
            f"flags checked against {catalog.ref}, the newest shipped catalog: "
            f"{' '.join(e.wrapper)} is {e.profile.wrapper_title}'s worker, whose image tag "
            f"({image or 'none'}) names {e.profile.wrapper_title}'s release, not "
            f"{e.profile.title}'s; its own flags are not judged"
        )
    elif not image:
        note = (
            f"flags checked against {catalog.ref}, the newest shipped catalog; no image is "
            "given (the controller's runtime sets it)"
        )
    return CatalogChoice(catalog, note=note)


def _catalog(e: EngineContainer, spec: TierSpec | None, forced: Catalog | None) -> Catalog | None:
    return choose_catalog(e, spec, forced).catalog


def _who(e: EngineContainer) -> str:
    return f"{e.manifest.ref} container {container_name(e)}"


def container_name(e: EngineContainer) -> str:
    """The container's name; Dynamo's ``mainContainer`` (which its operator names ``main``)
    by its service."""
    if e.path and e.path[-1] == "mainContainer" and not e.container.get("name"):
        return f"main of {e.path[-3]}" if len(e.path) >= 3 else "main"
    return str(e.container.get("name") or "?")


def _flags(
    e: EngineContainer, catalog: Catalog | None, out: ManifestFindings, guessed: bool = False
) -> dict[str, Any]:
    """TC004 on the argv and the env strings; the flags as the spec writes them.

    ``guessed``: the catalog is not the container's own release (the newest stands in for
    an unpinned tag): a misspelt flag (one with a near spelling) is still a violation, but
    a flag the guessed release lacks or a value it types otherwise is a warning, since the
    release the image runs may take it (``--swap-space`` before its removal)."""
    start = e.profile.split_command(e.argv).flags_start
    uses = [_as_compose_refs(u, e.shell) for u in parse_flags(e.argv, start, catalog)]
    if e.wrapper:
        # The wrapper's own flags (Dynamo's --is-prefill-worker) are not the engine's.
        uses = [u for u in uses if u.token.split("=", 1)[0] not in e.profile.wrapper_flags]
    flags = e.profile.command_flags(e.argv, catalog)
    last = len(e.token_paths) - 1
    groups: list[tuple[list[FlagUse], Callable[[FlagUse], tuple[str | int, ...]]]] = [
        (uses, lambda u: e.token_paths[min(u.index, last)] if last >= 0 else e.path)
    ]
    for _, path, words in e.env_args:
        env_uses = [_as_compose_refs(u) for u in parse_flags(words, 0, catalog)]
        groups.append((env_uses, functools.partial(_constant, path)))
        flags.update(e.profile.command_flags((*e.profile.default_launcher(), *words), catalog))
    if catalog is None:
        return flags
    for n, (group, where) in enumerate(groups):
        for finding in flag_findings(catalog, group):
            location = e.manifest.location(*where(finding.use))
            line = _token_line(e, finding.use.index) if n == 0 else None
            if line is not None:
                location = replace(location, line=line)
            # A misspelling: no catalogued release has the flag, and a spelling of one is
            # within two edits (a flag removed before the oldest catalog, SGLang 0.4's
            # --enable-deepep-moe near --deepep-mode, is no typo: its release may take it).
            typo = "nor of any catalogued release" in finding.message and _misspelt(
                finding.use.token, finding.fix or ""
            )
            (out.warnings if guessed and not typo else out.violations).append(
                Violation(
                    rule="TC004",
                    service=e.manifest.ref,
                    message=f"{_who(e)}: {finding.message}",
                    location=location,
                    found=finding.found,
                    fix=finding.fix,
                )
            )
    return flags


_SUGGESTED = re.compile(r"--[A-Za-z0-9][\w.-]*")


def _misspelt(token: str, fix: str) -> bool:
    """Whether ``token`` is within two edits (a transposition counting one) of a spelling
    that ``fix`` ("did you mean --a or --b?") suggests."""
    if not fix.startswith("did you mean"):
        return False
    word = token.split("=", 1)[0].lstrip("-").replace("_", "-")
    head = fix.split("?", 1)[0]
    return any(_edits(word, s.lstrip("-").replace("_", "-")) <= 2 for s in _SUGGESTED.findall(head))


def _edits(a: str, b: str) -> int:
    """Optimal-string-alignment distance between ``a`` and ``b`` (insert, delete,
    substitute, swap two neighbours: one edit each)."""
    if abs(len(a) - len(b)) > 2:
        return 3  # more than two edits apart: not a misspelling
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, prev2[j - 2] + 1)
            row.append(cost)
        prev2, prev = prev, row
    return prev[-1]


def _token_line(e: EngineContainer, index: int) -> int | None:
    """The file line of argv token ``index`` when finer than its path's (a script's word)."""
    if 0 <= index < len(e.token_lines):
        return e.token_lines[index]
    return None


def _constant(path: tuple[str | int, ...], _use: FlagUse) -> tuple[str | int, ...]:
    return path


def _gpus_given(e: EngineContainer) -> int | None:
    resources = e.container.get("resources")
    for key in ("limits", "requests"):
        box = resources.get(key) if isinstance(resources, dict) else None
        if isinstance(box, dict):
            for name in ("nvidia.com/gpu", "gpu"):
                if name in box:
                    try:
                        return int(str(box[name]))
                    except ValueError:
                        return None
    if e.manifest.kind == "DynamoGraphDeployment" and e.site.path[1] == "services":
        # v1alpha1 sizes a service's GPUs beside its pod (v1beta1 in the container itself).
        service = e.manifest.data["spec"]["services"][e.site.path[2]]
        limits = (service.get("resources") or {}).get("limits") or {}
        if "gpu" in limits:
            try:
                return int(str(limits["gpu"]))
            except ValueError:
                return None
    return None


def _flag_key(e: EngineContainer, name: str) -> str:
    """``name`` as the profile's parallel flags spell it: vLLM's parser reads
    ``--pipeline_parallel_size`` as ``--pipeline-parallel-size`` (the LWS GPU example, the
    production-stack chart's ``--gpu_memory_utilization``), so without this its PP was 1."""
    return name.replace("_", "-") if e.profile.flag_underscores else name


_ENV_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _expand(e: EngineContainer, value: Any) -> Any:
    """A flag value with the kubelet's ``$(VAR)`` expansion from the container's literal env
    (``--tp $(TP_SIZE)``); a reference to a valueFrom or unknown variable stays as written."""
    if not isinstance(value, str) or "$(" not in value:
        return value
    env = e.env

    def sub(match: re.Match[str]) -> str:
        found = env.get(match.group(1))
        return found if found else match.group(0)

    return _ENV_REF.sub(sub, value)


def _gpu_fit(e: EngineContainer, flags: dict[str, Any], out: ManifestFindings) -> None:
    # LWS (and RBG's leaderWorkerPattern) give every pod its group's size in the env
    # (LWS_GROUP_SIZE, RBG_LWP_GROUP_SIZE: the examples' --nnodes).
    sizes = {f"$({name})": str(e.site.nodes) for name in GROUP_SIZE_VARIABLES}
    if e.shell:
        sizes |= {f"${name}": str(e.site.nodes) for name in GROUP_SIZE_VARIABLES}
        sizes |= {f"${{{name}}}": str(e.site.nodes) for name in GROUP_SIZE_VARIABLES}
    merged = {
        _flag_key(e, k): sizes[v]
        if isinstance(v, str)
        and v in sizes
        and (e.site.nodes > 1 or e.manifest.kind == "LeaderWorkerSet")
        else _expand(e, v)
        for k, v in flags.items()
    }
    for axis, names in e.profile.parallel_flags:
        if axis in e.site.parallelism and not any(n in merged for n in names):
            merged[names[0]] = e.site.parallelism[axis]
    nodes_flag = next((n for n in e.profile.nodes_flags if n in merged), None)
    if e.site.nodes > 1 and nodes_flag is None and e.profile.nodes_flags:
        merged[e.profile.nodes_flags[0]] = e.site.nodes
    needed = e.profile.gpus_needed(merged)
    if needed is not None and e.site.nodes > 1 and not e.profile.nodes_flags and not e.site.per_pod:
        # The group's nodes share the parallel ranks (vLLM over Ray: TP x PP across pods).
        needed = -(-needed // e.site.nodes)
    have = _gpus_given(e)
    if e.site.ray_cluster:
        out.unchecked.append(
            f"{_who(e)}: GPU fit: a Ray cluster's pod (its ranks span the cluster's pods)"
        )
        return
    if needed is None:
        out.unchecked.append(f"{_who(e)}: GPU fit: a parallelism flag is not a number")
        return
    if have is None:
        if needed > 1:
            out.unchecked.append(f"{_who(e)}: GPU fit (needs {needed}): no nvidia.com/gpu given")
        return
    if have != needed:
        more = "only " if have < needed else ""
        out.violations.append(
            _v(
                e.manifest,
                (*e.path, "resources"),
                "TC006",
                f"{_who(e)}: {e.profile.title} needs {needed} GPUs per pod (TP x PP x DP from "
                f"its flags) but the container is given {more}{have}",
                expected=str(needed),
                found=str(have),
                fix=f"ask for {needed} nvidia.com/gpu, or change the parallel sizes",
            )
        )


def _int(probe: dict[str, Any], key: str, default: int) -> int:
    try:
        return int(probe.get(key, default))
    except (TypeError, ValueError):
        return default


def _probes(e: EngineContainer, load_s: int, out: ManifestFindings, judged: bool) -> None:
    """Probe timings that risk a restart. ``judged`` (a spec gives the load budget, and the
    rendering follows tierctl's probe rule) makes them violations; without a spec they are
    warnings (``--strict`` fails them): the file shows neither the model's load time nor a
    tokenizer stall, and a violation is a defect."""
    found = out.violations if judged else out.warnings
    c, m = e.container, e.manifest
    live = c.get("livenessProbe")
    startup = c.get("startupProbe")
    if isinstance(live, dict):
        timeout = _int(live, "timeoutSeconds", 1)
        window = _int(live, "failureThreshold", 3) * _int(live, "periodSeconds", 10)
        if timeout < MIN_LIVENESS_TIMEOUT_S or window < MIN_LIVENESS_WINDOW_S:
            found.append(
                _v(
                    m,
                    (*e.path, "livenessProbe"),
                    "TC006",
                    f"{_who(e)}: the liveness probe gives up after {timeout} s per try and "
                    f"{window} s of misses: the engine answers it on the event loop that "
                    "tokenizes, so a burst of long prompts fails it and the kubelet restarts a "
                    "healthy engine",
                    found=f"timeoutSeconds {timeout}, {window} s",
                    fix=f"timeoutSeconds >= {MIN_LIVENESS_TIMEOUT_S} and failureThreshold x "
                    f"periodSeconds >= {MIN_LIVENESS_WINDOW_S} (tierctl renders 10 s, 6 x 20 s)",
                )
            )
        if not isinstance(startup, dict):
            allowed = _int(live, "initialDelaySeconds", 0) + window
            if allowed < load_s:
                found.append(
                    _v(
                        m,
                        (*e.path, "livenessProbe"),
                        "TC006",
                        f"{_who(e)}: no startup probe, and the liveness probe kills the engine "
                        f"{allowed} s after start: a model load takes longer (at least "
                        f"{load_s} s assumed)",
                        fix="add a startupProbe on the health path with failureThreshold x "
                        "periodSeconds as long as the model load",
                    )
                )
    if isinstance(startup, dict):
        allowed = _int(startup, "initialDelaySeconds", 0) + _int(
            startup, "failureThreshold", 3
        ) * _int(startup, "periodSeconds", 10)
        if allowed < load_s:
            found.append(
                _v(
                    m,
                    (*e.path, "startupProbe"),
                    "TC006",
                    f"{_who(e)}: the startup probe gives the engine {allowed} s to load its "
                    f"model; at least {load_s} s are needed",
                    fix="raise the startup probe's failureThreshold",
                )
            )


def _listen(e: EngineContainer, flags: dict[str, Any], out: ManifestFindings) -> None:
    host = flags.get(e.profile.listen_host_flag)
    if e.site.role != "worker" and isinstance(host, str) and host in _LOOPBACK:
        out.violations.append(
            _v(
                e.manifest,
                e.path,
                "TC006",
                f"{_who(e)}: --{e.profile.listen_host_flag} {host} listens on the pod's loopback"
                ": its Service, the proxy and the kubelet's HTTP probes cannot reach it",
                found=host,
                fix=f"--{e.profile.listen_host_flag} 0.0.0.0",
            )
        )


def _split_scripts(m: Manifest, out: ManifestFindings) -> None:
    """An engine command handed to ``sh -c`` word by word: the shell runs the first word
    alone (``python3``, which reads its stdin and exits), so the container never serves."""
    for path, profile, words in split_scripts(m):
        out.violations.append(
            _v(
                m,
                path,
                "TC006",
                f"{m.ref}: `sh -c` is given {profile.title}'s command as {len(words)} separate "
                f"arguments: the shell runs only {words[0]!r} as its script and the rest "
                f"({' '.join(words[1:4])} ...) become $0, $1, ..., so {profile.title} never "
                "starts",
                found=" ".join(words)[:120],
                fix='give the command as one script string (args: ["python3 -m ..."]), or '
                "drop the shell and put the words in command/args",
            )
        )


def secret_findings(m: Manifest, out: ManifestFindings) -> None:
    """A credential written into a container's env value or argv (not a secretKeyRef)."""
    for site in pod_sites(m):
        containers = site.spec.get("containers") or []
        if m.kind == "DynamoGraphDeployment" and isinstance(site.spec.get("mainContainer"), dict):
            containers = [*containers, site.spec["mainContainer"]]
        for i, c in enumerate(containers):
            if not isinstance(c, dict):
                continue
            c_path = (*site.path, "containers", i)
            for j, item in enumerate(c.get("env") or []):
                if not isinstance(item, dict) or not isinstance(item.get("value"), str):
                    continue
                name = str(item.get("name", ""))
                if literal_secret(name, item["value"]):
                    out.violations.append(
                        _v(
                            m,
                            (*c_path, "env", j, "value"),
                            "TC006",
                            f"{m.ref}: env {name} carries a literal credential (value not shown)",
                            fix="read it from a Secret: valueFrom.secretKeyRef {name, key}",
                        )
                    )
            argv = [str(a) for a in [*(c.get("command") or []), *(c.get("args") or [])]]
            for k, token in enumerate(argv):
                flag = token.split("=", 1)[0]
                value = (
                    token.split("=", 1)[1]
                    if "=" in token
                    else (argv[k + 1] if k + 1 < len(argv) else "")
                )
                if (
                    (is_secret_flag(flag) or looks_secret_name(flag.lstrip("-")))
                    and value
                    and not value.startswith("$(")
                    and literal_secret(flag.lstrip("-"), value)
                ) or embedded_credential(token) is not None:
                    # The second: one token holding the credential with its flag
                    # (`sh -c "vllm serve ... --api-key sk-..."`).
                    n_command = len(c.get("command") or [])
                    at: tuple[str | int, ...] = (
                        (*c_path, "command", k)
                        if k < n_command
                        else (*c_path, "args", k - n_command)
                    )
                    out.violations.append(
                        _v(
                            m,
                            at,
                            "TC006",
                            f"{m.ref}: {_argv_place(flag, k)} carries a literal credential in "
                            "the argv (value not shown)",
                            fix="pass it from a Secret: env valueFrom.secretKeyRef, then "
                            "$(NAME) in args",
                        )
                    )


def _argv_place(flag: str, k: int) -> str:
    """How a message names argv token ``k``: the flag when it is one, else its index (a
    `sh -c` string holding the credential is never printed)."""
    return flag if flag.startswith("-") and " " not in flag else f"argument {k}"


def replica_of(e: EngineContainer, spec: TierSpec) -> str | None:
    tier = e.site.labels.get(REPLICA_LABEL)
    if tier in spec.replicas:
        return tier
    for name in spec.replicas:
        if spec.engine.service.replace("{replica}", name) == e.manifest.name:
            return name
    return None


def _expected_flags(spec: TierSpec, r: ResolvedReplica, e: EngineContainer) -> dict[str, Any]:
    from tierctl.render.kubernetes import multinode_flags as _multinode_flags
    from tierctl.render.kubernetes import nodes_of

    flags = pod_flags(spec, r)
    if nodes_of(e.profile, flags) > 1:
        rank = "$(LWS_WORKER_INDEX)" if e.site.role == "worker" else "0"
        flags = _multinode_flags(e.profile, flags, rank)
    argv = equals_form(replica_argv(spec, flags), spec.engine.equals_flags)
    return e.profile.command_flags(argv, engine_catalog(spec))


def _pinning(
    spec: TierSpec, engines: list[tuple[EngineContainer, dict[str, Any]]], out: ManifestFindings
) -> int:
    tier = resolve_tier(spec)
    seen: set[str] = set()
    for e, actual in engines:
        name = replica_of(e, spec)
        if name is None:
            continue
        seen.add(name)
        r = tier.replicas[name]
        catalog = engine_catalog(spec)
        expected = canonical_flags(_expected_flags(spec, r, e), catalog)
        found = canonical_flags(actual, catalog)
        for flag in [*expected, *(f for f in found if f not in expected)]:
            want, got = expected.get(flag), found.get(flag)
            if want == got:
                continue
            owner = [
                o
                for o in tier.replicas.values()
                if o.name != name
                and got is not None
                and canonical_flags(_expected_flags(spec, o, e), catalog).get(flag) == got
            ]
            note = f" (the value of {owner[0].role or 'replica'} {owner[0].name})" if owner else ""
            out.violations.append(
                _v(
                    e.manifest,
                    _token_path(e, flag),
                    "TC001",
                    f"replica {name}: --{flag} expected {_show(want)}, found {_show(got)}{note}",
                    expected=_show(want),
                    found=_show(got),
                    fix="render the manifests from the spec (render's Kubernetes target), or "
                    "change the spec",
                )
            )
        for failure in check_rules(spec, actual, e.env):
            out.violations.append(
                _v(
                    e.manifest,
                    (*e.path, "env"),
                    "TC005",
                    f"replica {name}: pairing rule {failure.name} requires "
                    f"{'; '.join(failure.missing)}: {failure.rule.because}",
                    fix="set what the rule requires in the spec and render again",
                )
            )
        label = spec.telemetry.label
        if "service-labels" in spec.telemetry.places and e.site.labels.get(label) != r.variant:
            labels = (*e.site.path[:-1], "metadata", "labels")
            out.violations.append(
                _v(
                    e.manifest,
                    labels,
                    "TC002",
                    f"replica {name}: pod label {label} is {e.site.labels.get(label)!r}, its "
                    f"flags make it {r.variant!r}",
                    expected=r.variant,
                    found=e.site.labels.get(label),
                    fix="label the pods with the rendered variant",
                )
            )
    for name, r in tier.replicas.items():
        if name not in seen:
            out.violations.append(
                Violation(
                    rule="TC001",
                    service=r.service,
                    message=f"replica {name} ({r.service}) has no workload in the manifests",
                    fix="render it from the spec (render's Kubernetes target)",
                )
            )
    return len(seen)


def canonical_flags(flags: dict[str, Any], catalog: Catalog | None) -> dict[str, Any]:
    """Flags by the catalog's primary spelling (an abbreviation or alias read as its flag)."""
    if catalog is None:
        return flags
    out: dict[str, Any] = {}
    for name, value in flags.items():
        flag = catalog.lookup(f"--{name}")
        out[flag.name.lstrip("-") if flag is not None else name] = value
    return out


def _token_path(e: EngineContainer, flag: str) -> tuple[str | int, ...]:
    """Where ``--flag`` (or its ``--flag=value`` form) sits in the container, else its args."""
    for i, token in enumerate(e.argv):
        if token == f"--{flag}" or token.startswith(f"--{flag}="):
            return e.token_paths[i]
    return (*e.path, "args")


def _show(value: Any) -> str:
    if value is None:
        return "absent"
    if value is True:
        return "on (bare flag)"
    return repr(" ".join(value) if isinstance(value, list) else str(value))


@dataclass(frozen=True)
class KubeCheck:
    """Settings of a Kubernetes validation.

    Attributes:
        version: The Kubernetes release whose core schemas are used ("1.33").
        engine: ``KIND==VERSION`` or a catalog file for engines whose image names no release.
        strict: warnings fail too.
    """

    version: str = KUBERNETES_VERSION
    engine: str | None = None
    strict: bool = False


def check_manifests(
    manifests: Sequence[Manifest],
    files: Sequence[str],
    *,
    spec: TierSpec | None = None,
    spec_ref: str = "(none)",
    settings: KubeCheck | None = None,
) -> Report:
    """Every check of the module docstring over ``manifests``."""
    settings = settings or KubeCheck()
    forced = resolve_catalog(settings.engine) if settings.engine else None
    out = ManifestFindings()
    engines: list[tuple[EngineContainer, dict[str, Any]]] = []
    catalogs: set[str] = set()
    load_s = load_budget_s(spec) if spec is not None else MIN_LOAD_S
    for m in manifests:
        _schema(m, settings.version, out)
        secret_findings(m, out)
        _split_scripts(m, out)
        found = list(engine_containers(m))
        if not found and m.kind == "DynamoGraphDeployment":
            out.unchecked.append(
                f"{m.source}: {m.ref}: no worker runs SGLang or vLLM (by their own launcher "
                "or Dynamo's python3 -m dynamo.vllm / dynamo.sglang): engine flags not checked"
            )
        for e in found:
            choice = choose_catalog(e, spec, forced)
            catalog = choice.catalog
            if catalog is None:
                out.unchecked.append(f"{_who(e)}: engine flags (TC004): {choice.unchecked}")
            else:
                catalogs.add(catalog.ref)
            if choice.note is not None:
                out.warnings.append(
                    _v(
                        m,
                        (*e.path, "image"),
                        "TC004",
                        f"{_who(e)}: {choice.note}",
                        found=str(e.container.get("image") or "(no image)"),
                        fix=(
                            f"pass `engine` {e.profile.kind}==VERSION, the {e.profile.title} "
                            f"release the {e.profile.wrapper_title} image bundles"
                            if e.wrapper
                            else "pin the release in the image tag, or pass `engine` "
                            f"{e.profile.kind}==VERSION"
                        ),
                    )
                )
            flags = _flags(e, catalog, out, guessed=choice.note is not None)
            _gpu_fit(e, flags, out)
            if e.site.role != "worker":
                _probes(e, load_s, out, spec is not None)
            _listen(e, flags, out)
            engines.append((e, flags))
    replicas = len(engines)
    if spec is not None:
        replicas = _pinning(spec, engines, out)
        out.unchecked.append(
            "TC003 shared-runtime: not run on Kubernetes manifests (each replica is its own "
            "workload; the engine contracts above compare them flag by flag)"
        )
    else:
        out.unchecked.append(
            "spec contracts ("
            + ", ".join(f"{r} {RULES[r]}" for r in SPEC_ONLY)
            + "): need a tier spec"
        )
    if not engines:
        out.unchecked.append(
            "engine checks: no container runs SGLang or vLLM (by launcher or image)"
        )
    if settings.strict:
        out.violations += out.warnings
        out.warnings = []
    return Report(
        spec=spec_ref,
        files=tuple(files),
        catalog=", ".join(sorted(catalogs)) or None,
        services_checked=len(manifests),
        replicas_checked=replicas,
        violations=tuple(out.violations),
        warnings=tuple(out.warnings),
        unchecked=tuple(dict.fromkeys(out.unchecked)),
        params=("engine",),
        reader=f"Kubernetes {settings.version} schemas (strict) and tierctl's custom-resource schemas",
    )


def validate_manifests(
    paths: Sequence[str | Path],
    *,
    spec_path: str | Path | None = None,
    stdin: str | None = None,
    settings: KubeCheck | None = None,
) -> Report:
    """``tierctl validate`` of manifest files, directories or ``-`` (``stdin``'s text).

    Raises:
        InputError: unusable input (exit 2).
    """
    manifests = read_manifests(paths, stdin)
    spec = load_spec(spec_path) if spec_path is not None else None
    return check_manifests(
        manifests,
        [str(p) for p in paths],
        spec=spec,
        spec_ref=str(spec_path) if spec_path else "(none)",
        settings=settings,
    )


def validate_manifest_text(
    text: str, source: str, *, spec: TierSpec, spec_path: str | Path
) -> Report:
    """The rendering's gate: a rendered manifest text checked against its own spec."""
    return check_manifests(
        parse_manifests(text, source), [source], spec=spec, spec_ref=str(spec_path)
    )
