"""The engine containers inside every workload shape, located.

An engine's argv sits in different places per shape: a pod template's containers (Deployment,
StatefulSet, Argo Rollout, Job, a bare Pod), LWS's leader and worker templates, KServe
``LLMInferenceService``'s ``template``/``worker`` pod specs (and its prefill pool's), RBG's
roles, Dynamo's ``extraPodSpec.mainContainer``. Inside a container the flags come from
``command`` + ``args`` (or the image's entrypoint + ``args``), from one shell-script token
(``sh -c "vllm serve ..."``), or from an environment string that a launcher script appends
(``VLLM_ADDITIONAL_ARGS``). Which container runs which engine is the engine profiles' call
(launcher, image), never this module's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierctl.compose.shellwords import ShellWordsError, split_shell_words
from tierctl.engines import PROFILES, EngineProfile, profile_for_argv
from tierctl.kubernetes.manifests import Manifest

Path = tuple[str | int, ...]

#: Environment variables whose value is a string of extra engine flags (KServe's vLLM
#: runtime and launcher scripts append them to the command).
ARGS_ENV = ("VLLM_ADDITIONAL_ARGS", "SGLANG_ADDITIONAL_ARGS", "EXTRA_ARGS", "ENGINE_ARGS")
#: Kinds whose ``spec.template`` is a pod template.
_TEMPLATE_KINDS = {
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
    "Rollout",
    "ReplicationController",
}


@dataclass(frozen=True)
class PodSite:
    """A pod spec inside an object: where it is, its labels, how many nodes it spans."""

    path: Path
    spec: dict[str, Any]
    labels: dict[str, str]
    nodes: int = 1
    #: "leader"/"worker" for a multi-node group, "" otherwise.
    role: str = ""
    #: Parallel sizes the shape sets outside the argv (KServe's ``parallelism``), by axis.
    parallelism: dict[str, int] = field(default_factory=dict)
    #: A KubeRay head or worker group's pod: the engine's ranks span the Ray cluster's pods.
    ray_cluster: bool = False
    #: Whether the parallel sizes are per pod even across nodes (KServe's ``dataLocal`` is
    #: the ranks on one node); False where a group's pods share them (vLLM over Ray in LWS).
    per_pod: bool = False
    #: The key of the pod's one container beside (or instead of) a ``containers`` list:
    #: Dynamo's ``mainContainer``, OME's ``runner``.
    main: str = ""
    #: A container the object never writes as one, with the path its fields sit under
    #: (llmaz's BackendRuntime: its ``command`` and image beside each recommended config's
    #: ``args``, which are at ``spec.recommendedConfigs[K].args``).
    lone: tuple[Path, dict[str, Any]] | None = None


@dataclass(frozen=True)
class EngineContainer:
    """One container that runs an engine, with its argv read as the engine reads it."""

    manifest: Manifest
    site: PodSite
    path: Path  # of the container
    container: dict[str, Any]
    profile: EngineProfile
    argv: tuple[str, ...]
    #: Where each argv token sits (a path in the object), for located findings.
    token_paths: tuple[Path, ...]
    #: The env strings of extra flags: (variable, path of its value, words).
    env_args: tuple[tuple[str, Path, tuple[str, ...]], ...] = ()
    #: The file line of each argv token where it is finer than its path's (the words of a
    #: multi-line script: each on its own line); None where the path's line is the answer.
    token_lines: tuple[int | None, ...] = ()
    #: The engine runs inside a shell script (``sh -c``, ``bash -lc --``): its ``$VAR`` and
    #: ``${VAR}`` are the shell's, filled from the environment at start.
    shell: bool = False
    #: The script's other commands (``set -x``, ``pip install ...``), each its words.
    script_other: tuple[tuple[str, ...], ...] = ()
    #: The launcher of another framework's worker around the engine's parser, as written
    #: (NVIDIA Dynamo's ``python3 -m dynamo.vllm``); () for the engine's own launcher.
    wrapper: tuple[str, ...] = ()

    @property
    def env(self) -> dict[str, str]:
        """The container's literal env values (valueFrom entries as "")."""
        out: dict[str, str] = {}
        for item in self.container.get("env") or []:
            if isinstance(item, dict) and "name" in item:
                out[str(item["name"])] = str(item.get("value", "") or "")
        return out


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _labels(template: Any) -> dict[str, str]:
    labels = _map(_map(_map(template).get("metadata")).get("labels"))
    return {str(k): str(v) for k, v in labels.items()}


def _count(value: Any, default: int = 1) -> int:
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        return default


def pod_sites(m: Manifest) -> Iterator[PodSite]:
    """Every pod spec inside an object, by its shape."""
    spec = _map(m.data.get("spec"))
    own = _labels(m.data)
    if m.kind in _TEMPLATE_KINDS:
        template = _map(spec.get("template"))
        yield PodSite(("spec", "template", "spec"), _map(template.get("spec")), _labels(template))
    elif m.kind == "Pod":
        yield PodSite(("spec",), spec, own)
    elif m.kind == "LeaderWorkerSet":
        lwt = _map(spec.get("leaderWorkerTemplate"))
        size = _count(lwt.get("size"))
        pair = "leaderTemplate" in lwt
        for key, role in (("leaderTemplate", "leader"), ("workerTemplate", "worker")):
            if key in lwt:
                t = _map(lwt[key])
                path = ("spec", "leaderWorkerTemplate", key, "spec")
                # Without a leaderTemplate the workerTemplate is every pod's, the leader's too.
                yield PodSite(path, _map(t.get("spec")), _labels(t), size, role if pair else "")
    elif m.kind == "LLMInferenceService":
        yield from _llmisvc(spec, own, ("spec",))
        prefill = _map(spec.get("prefill"))
        if prefill:
            yield from _llmisvc(prefill, own, ("spec", "prefill"))
    elif m.kind == "RoleBasedGroup":
        for i, item in enumerate(spec.get("roles") or []):
            entry = _map(item)
            if "template" not in entry:
                referred = _rbg_template_ref(spec, entry, i, own)
                if referred is not None:
                    yield referred
                    continue
                # v1alpha2 wraps it: standalonePattern.template, leaderWorkerPattern, ...
                yield from _found_pods(entry, ("spec", "roles", i), own, 1, "")
                continue
            t = _map(entry.get("template"))
            size = _count(_map(entry.get("leaderWorkerSet")).get("size"))
            yield PodSite(
                ("spec", "roles", i, "template", "spec"), _map(t.get("spec")), _labels(t), size
            )
    elif m.kind == "DynamoGraphDeployment":
        for name, entry in _map(spec.get("services")).items():
            service = _map(entry)
            nodes = _count(_map(service.get("multinode")).get("nodeCount"))
            pod = _map(service.get("extraPodSpec"))
            yield PodSite(("spec", "services", name, "extraPodSpec"), pod, own, nodes)
        # v1beta1 lists components, each with a plain pod template (examples/.../v1beta1/).
        for i, item in enumerate(spec.get("components") or []):
            entry = _map(item)
            nodes = _count(_map(entry.get("multinode")).get("nodeCount"))
            t = _map(entry.get("podTemplate"))
            at: Path = ("spec", "components", i, "podTemplate", "spec")
            yield PodSite(at, _map(t.get("spec")), {**own, **_labels(t)}, nodes)
    elif m.api_version.startswith("inference.llmaz.io/") and m.kind == "BackendRuntime":
        yield from _backend_runtime(spec, own)
    elif m.api_version.startswith("ome.io/") and m.kind in _OME_KINDS:
        yield from _ome(spec, own)
    elif not _podless(m):
        # A kind with no shape here (LWS's DisaggregatedSet, a newer operator's CRD): every
        # pod spec found in it, so its engines and env are still checked, as the schema
        # step's "its containers still are" says.
        yield from _found_pods(spec, ("spec",), own, 1, "")


#: OME's kinds whose components (``engineConfig``, ``decoderConfig``, ``routerConfig``; an
#: InferenceService's ``engine``, ``decoder``, ``router``) are pod specs with one ``runner``.
_OME_KINDS = {"ClusterServingRuntime", "ServingRuntime", "InferenceService"}
_OME_COMPONENTS = ("engineConfig", "decoderConfig", "routerConfig", "engine", "decoder", "router")


def _ome(spec: dict[str, Any], labels: dict[str, str]) -> Iterator[PodSite]:
    """OME's components: a pod spec whose container is ``runner``, or a multi-node
    ``leader`` and ``worker`` (``worker.size`` worker pods beside the leader, on LWS)."""
    for key in _OME_COMPONENTS:
        comp = _map(spec.get(key))
        if "runner" in comp:
            yield PodSite(("spec", key), comp, labels, main="runner")
        if "leader" in comp or "worker" in comp:
            nodes = 1 + _count(_map(comp.get("worker")).get("size"), 0)
            for sub in ("leader", "worker"):
                pod = _map(comp.get(sub))
                if pod:
                    yield PodSite(("spec", key, sub), pod, labels, nodes, sub, main="runner")


def _backend_runtime(spec: dict[str, Any], labels: dict[str, str]) -> Iterator[PodSite]:
    """llmaz's BackendRuntime: each recommended config is a container its controller
    writes, ``spec.command`` then the config's ``args``, on ``spec.image:spec.version``, with
    the runtime's probes."""
    image = str(spec.get("image") or "")
    if image and spec.get("version"):
        image = f"{image}:{spec['version']}"
    probes: dict[str, Any] = {
        k: spec[k] for k in ("startupProbe", "livenessProbe", "readinessProbe") if k in spec
    }
    for k, item in enumerate(spec.get("recommendedConfigs") or []):
        config = _map(item)
        container: dict[str, Any] = {
            "name": str(config.get("name") or k),
            "image": image,
            "command": spec.get("command") or [],
            "args": config.get("args") or [],
            **({"resources": config["resources"]} if "resources" in config else {}),
            **probes,
        }
        at: Path = ("spec", "recommendedConfigs", k)
        yield PodSite(at, config, labels, lone=(at, container))


def _rbg_template_ref(
    spec: dict[str, Any], entry: dict[str, Any], i: int, labels: dict[str, str]
) -> PodSite | None:
    """An RBG v1alpha2 role whose pattern names one of ``spec.roleTemplates``
    (``templateRef: {name, patch}``): the template's pod spec with the patch merged over it
    as the controller merges it (containers by name, their env by name), so the patch's
    container runs the template's image."""
    for key in ("standalonePattern", "leaderWorkerPattern"):
        pattern = _map(entry.get(key))
        ref = _map(pattern.get("templateRef"))
        if not ref:
            continue
        found = next(
            (
                _map(t.get("template"))
                for t in spec.get("roleTemplates") or []
                if _map(t).get("name") == ref.get("name")
            ),
            None,
        )
        if found is None:
            return None
        patch = _map(ref.get("patch"))
        merged = _merge_pod(_map(found.get("spec")), _map(patch.get("spec")))
        nodes = _count(pattern.get("size")) if key == "leaderWorkerPattern" else 1
        path: Path = ("spec", "roles", i, key, "templateRef", "patch", "spec")
        return PodSite(path, merged, {**labels, **_labels(found), **_labels(patch)}, nodes)
    return None


def _merge_pod(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``patch`` over ``base`` as a strategic merge does for a pod spec's containers (by
    name; a container's env by name, its other fields replaced)."""
    out = {**base, **{k: v for k, v in patch.items() if k != "containers"}}
    if not isinstance(patch.get("containers"), list):
        return out
    named = {c.get("name"): c for c in base.get("containers") or [] if isinstance(c, dict)}
    containers: list[Any] = []
    for c in patch["containers"]:
        if not isinstance(c, dict) or c.get("name") not in named:
            containers.append(c)
            continue
        merged = dict(named[c["name"]])
        for key, value in c.items():
            if key == "env" and isinstance(value, list) and isinstance(merged.get("env"), list):
                names = {e.get("name") for e in value if isinstance(e, dict)}
                kept = [
                    e for e in merged["env"] if not (isinstance(e, dict) and e.get("name") in names)
                ]
                merged["env"] = [*kept, *value]
            else:
                merged[key] = value
        containers.append(merged)
    out["containers"] = containers
    return out


#: Kinds that hold no pod spec (their walk would only cost time).
_NO_PODS = {
    "Service",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "Namespace",
    "PersistentVolumeClaim",
    "Ingress",
    "HTTPRoute",
    "Gateway",
    "InferencePool",
    "InferenceModel",
    "InferenceObjective",
    "PodMonitor",
    "ServiceMonitor",
    "AnalysisTemplate",
    "ClusterAnalysisTemplate",
    "Canary",
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "NetworkPolicy",
    "List",
}


#: The API groups whose objects of the kinds above hold no pod ("" is the core group).
_NO_POD_GROUPS = {
    "",
    "autoscaling",
    "policy",
    "monitoring.coreos.com",
    "argoproj.io",
    "flagger.app",
}


def _podless(m: Manifest) -> bool:
    """Whether ``m`` is a kind that holds no pod spec: by its kind and group, so another
    group's ``Service`` (llmaz's inference.llmaz.io Service, a LWS-like workload) is read."""
    group = m.api_version.rpartition("/")[0]
    known = group in _NO_POD_GROUPS or group.endswith((".k8s.io", ".x-k8s.io"))
    return m.kind in _NO_PODS and (known or not m.api_version)


def _found_pods(
    value: Any, at: Path, labels: dict[str, str], nodes: int, role: str
) -> Iterator[PodSite]:
    """Pod specs (a mapping with a ``containers`` list) anywhere under ``value``; an LWS-like
    ``leaderWorkerTemplate`` gives its size and the leader/worker roles."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _found_pods(item, (*at, i), labels, nodes, role)
        return
    if not isinstance(value, dict):
        return
    if isinstance(value.get("containers"), list):
        ray = any(k in ("headGroupSpec", "workerGroupSpecs") for k in at)
        yield PodSite(at, value, labels, nodes, role, ray_cluster=ray)
        return
    # A group of pods sized beside its template: RBG v1alpha2's leaderWorkerPattern
    # (``size``), AIBrix StormService roles (``podGroupSize``).
    if isinstance(value.get("podGroupSize"), int) and "template" in value:
        nodes = _count(value["podGroupSize"])
    elif at and at[-1] == "leaderWorkerPattern" and "template" in value:
        nodes = _count(value.get("size"))
    lwt_here = "leaderTemplate" in value and "workerTemplate" in value and "size" in value
    if isinstance(value.get("leaderWorkerTemplate"), dict) or lwt_here:
        # LWS's leaderWorkerTemplate; llmaz's workloadTemplate is one (size beside both).
        lwt = value if lwt_here else value["leaderWorkerTemplate"]
        size = _count(lwt.get("size"))
        pair = "leaderTemplate" in lwt
        for key, sub_role in (("leaderTemplate", "leader"), ("workerTemplate", "worker")):
            t = _map(lwt.get(key))
            if t:
                path = (*at, *(() if lwt_here else ("leaderWorkerTemplate",)), key, "spec")
                yield PodSite(
                    path,
                    _map(t.get("spec")),
                    {**labels, **_labels(t)},
                    size,
                    sub_role if pair else "",
                )
        return
    for key, item in value.items():
        if key != "metadata":
            sub = {**labels, **_labels(item)} if isinstance(item, dict) else labels
            yield from _found_pods(item, (*at, key), sub, nodes, role)


def _llmisvc(spec: dict[str, Any], labels: dict[str, str], at: Path) -> Iterator[PodSite]:
    par = _map(spec.get("parallelism"))
    axes = {"tp": "tensor", "pp": "pipeline", "dp": "dataLocal"}
    sizes = {axis: _count(par[key]) for axis, key in axes.items() if key in par}
    nodes = 1
    if "worker" in spec and "data" in par and "dataLocal" in par:
        nodes = max(1, _count(par["data"]) // _count(par["dataLocal"]))
    for key in ("template", "worker"):
        if key in spec:
            role = "worker" if key == "worker" else ("leader" if "worker" in spec else "")
            # KServe's sizes are per pod: dataLocal ranks on each node, tensor inside each.
            yield PodSite((*at, key), _map(spec[key]), labels, nodes, role, sizes, per_pod=True)


def _containers(m: Manifest, site: PodSite) -> Iterator[tuple[Path, dict[str, Any]]]:
    if site.lone is not None:
        yield site.lone
    key = site.main or ("mainContainer" if m.kind == "DynamoGraphDeployment" else "")
    main = site.spec.get(key) if key else None
    if isinstance(main, dict):
        yield (*site.path, key), main
    for i, c in enumerate(site.spec.get("containers") or []):
        if isinstance(c, dict):
            yield (*site.path, "containers", i), c


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def engine_of(
    container: dict[str, Any],
) -> tuple[EngineProfile | None, tuple[str, ...], tuple[int | None, ...]]:
    """The engine a container runs, its argv, and each token's index in ``command``/``args``
    (``args`` indices offset by ``len(command)``; None for the image's entrypoint)."""
    command = _strings(container.get("command"))
    args = _strings(container.get("args"))
    whole = (*command, *args)
    index: tuple[int | None, ...] = tuple(range(len(whole)))
    profile = profile_for_argv(whole) or _wrapped(whole)
    if profile is not None:
        return profile, whole, index
    image = str(container.get("image") or "")
    for candidate in PROFILES.values():
        if candidate.matches_image(image):
            if command or not candidate.image_launcher:
                return candidate, whole, index
            head = candidate.image_launcher
            return (
                candidate,
                (*head, *args),
                (*(None,) * len(head), *range(len(command), len(whole))),
            )
    return None, whole, index


def _wrapped(argv: Sequence[str]) -> EngineProfile | None:
    """The engine whose parser another framework's worker runs (``python3 -m dynamo.vllm``),
    or None."""
    return next((p for p in PROFILES.values() if p.wrapper_launcher(argv)), None)


def _starts(profile: EngineProfile, argv: Sequence[str]) -> bool:
    """Whether ``argv`` starts ``profile``'s engine: its own launcher or a wrapper's."""
    return profile.matches_command(argv) or bool(profile.wrapper_launcher(argv))


def _token_path(c_path: Path, n_command: int, i: int | None) -> Path:
    if i is None:
        return (*c_path, "image")
    return (*c_path, "command", i) if i < n_command else (*c_path, "args", i - n_command)


def engine_containers(m: Manifest) -> Iterator[EngineContainer]:
    """Every container of ``m`` that runs an engine (by launcher, image or shell script)."""
    for site in pod_sites(m):
        for c_path, c in _containers(m, site):
            found = _engine_in(m, c, c_path)
            if found is None:
                continue
            profile, argv, paths, lines, other = found
            env_args = list(_env_args(c, c_path))
            if lines:  # a shell script: `$EXTRA` expands to the words of its value
                taken = _shell_env_args(c, c_path, argv, {n for n, _, _ in env_args})
                env_args += taken
                # Its flags are read from the env value (located there), not as a word.
                names = {n for n, _, _ in taken}
                keep = [i for i, t in enumerate(argv) if _var_name(t) not in names]
                argv = tuple(argv[i] for i in keep)
                paths = tuple(paths[i] for i in keep)
                lines = tuple(lines[i] for i in keep if i < len(lines))
            yield EngineContainer(
                m,
                site,
                c_path,
                c,
                profile,
                argv,
                paths,
                tuple(env_args),
                token_lines=lines,
                shell=bool(lines),
                script_other=other,
                wrapper=profile.wrapper_launcher(argv),
            )


_Found = tuple[
    EngineProfile,
    tuple[str, ...],
    tuple[Path, ...],
    tuple[int | None, ...],
    tuple[tuple[str, ...], ...],
]


def _engine_in(m: Manifest, c: dict[str, Any], c_path: Path) -> _Found | None:
    """(profile, argv, token paths, token lines, the script's other words) of the engine a
    container runs, or None: by its argv, its image, KServe's runtime, or a shell script
    (``bash -lc -- "...; vllm serve ..."``) whose one command starts an engine."""
    profile, argv, index = engine_of(c)
    if profile is None:
        # KServe's runtime, where it applies; else the argv stays (a shell script on an image
        # that is no engine's: its empty argv lost `sh -c "python3 -m dynamo.vllm ..."`).
        runtime = _kserve_runtime(m, c)
        if runtime[0] is not None:
            profile, argv, index = runtime
    n_command = len(_strings(c.get("command")))
    paths = tuple(_token_path(c_path, n_command, i) for i in index)
    at = shell_script_index(argv)
    if at is None and profile is not None and profile.split_command(argv).flags_start >= len(argv):
        # No shell named, but no flag either: a script token behind an entrypoint that
        # runs it through a shell (``args: ["vllm serve ..."]``).
        at = next((i for i, t in enumerate(argv) if any(ch.isspace() for ch in t)), None)
    if at is None and profile is None and m.kind == "DynamoGraphDeployment" and len(argv) == 1:
        # One script string as a Dynamo worker's only arg: Dynamo's operator runs a
        # mainContainer without command through `/bin/sh -c` (its docs: `args: ["python3 -m
        # dynamo.vllm --model ..."]`).
        at = 0 if not c.get("command") and any(ch.isspace() for ch in argv[0]) else None
    if at is not None:
        for candidate in [profile] if profile is not None else list(PROFILES.values()):
            script = script_command(candidate, argv[at])
            if script is None:
                continue
            words = script.engine
            lines = word_lines(m, paths[at], script.words)[script.start : script.end]
            return candidate, words, (paths[at],) * len(words), lines, script.other
        if shell_script_index(argv) is not None:
            return None  # a shell running something else (ray start, a wrapper script)
    if profile is None:
        return None
    if c.get("command") and not _starts(profile, argv):
        return None  # the engine's image running something else (a Ray worker script)
    return profile, argv, paths, (), ()


def split_scripts(m: Manifest) -> Iterator[tuple[Path, EngineProfile, tuple[str, ...]]]:
    """Containers whose ``sh -c`` is given the engine's command as separate arguments
    (``command: [/bin/sh, -c]``, ``args: [python3, -m, ...]``): the shell runs only the
    first as its script, the rest become ``$0``, ``$1``..., so the engine never starts.
    Each as (path of the script token, the engine, the words)."""
    for site in pod_sites(m):
        for c_path, c in _containers(m, site):
            argv = (*_strings(c.get("command")), *_strings(c.get("args")))
            at = shell_script_index(argv)
            if at is None or len(argv) - at < 2 or any(ch.isspace() for ch in argv[at]):
                continue
            words = argv[at:]
            for profile in PROFILES.values():
                if _starts(profile, words) and not _starts(profile, words[:1]):
                    n_command = len(_strings(c.get("command")))
                    yield _token_path(c_path, n_command, at), profile, words
                    break


#: Shells whose ``-c`` option runs its next argument as a script.
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def shell_script_index(argv: Sequence[str]) -> int | None:
    """Where the script of ``sh -c SCRIPT`` sits in ``argv`` (``bash -lc -- SCRIPT``,
    ``/bin/sh -ec SCRIPT``, ``bash -o pipefail -c SCRIPT``), or None when ``argv`` is no
    shell running a script."""
    if not argv or argv[0].rsplit("/", 1)[-1] not in _SHELLS:
        return None
    script = False
    i = 1
    while i < len(argv):
        token = argv[i]
        if token in ("-o", "+o"):
            i += 2
            continue
        if token == "--":
            return i + 1 if script and i + 1 < len(argv) else None
        if len(token) > 1 and token[0] in "-+" and not token.startswith("--"):
            script = script or "c" in token[1:]
            i += 1
            continue
        return i if script else None
    return None


@dataclass(frozen=True)
class Script:
    """A shell script's words, and which of them are the engine's command."""

    words: tuple[str, ...]
    start: int
    end: int
    #: Each command's (start, end) in ``words``, the engine's among them.
    commands: tuple[tuple[int, int], ...] = ()

    @property
    def engine(self) -> tuple[str, ...]:
        """The engine command's words (without a leading ``exec``)."""
        return self.words[self.start : self.end]

    @property
    def other(self) -> tuple[tuple[str, ...], ...]:
        """Every other command of the script, each its words (an ``exec`` or a variable
        assignment before the engine's command is one of them)."""
        out = [self.words[a:b] for a, b in self.commands if (a, b) != (self.start, self.end)]
        return tuple(c for c in out if c)


def script_command(profile: EngineProfile, script: str) -> Script | None:
    """The words of ``script`` split as a shell does (one ``;&|`` segment or line at a time,
    go-shellwords rules, comments dropped), and the one command that starts ``profile``'s
    engine; None when none does. A leading ``exec`` is the shell's, not the command's."""
    # A backslash-newline continues the line; `$(...)` and `$((...))` are one word's part
    # (the splitter, compose's go-shellwords, refuses the arithmetic's nested parentheses).
    rest, table = _mask_substitutions(script.replace("\\\n", ""))
    # The script runs its positional parameters (`exec "$@"`): what `set --` puts there first.
    positional_exec = bool(re.search(r'(^|[;&|\n])\s*(exec\s+)?"\$@"\s*($|[;&|\n])', script))
    words: list[str] = []
    commands: list[tuple[int, int]] = []
    span: tuple[int, int] | None = None
    while rest:
        seen = rest
        line, newline, after = rest.partition("\n")
        if line.lstrip().startswith("#"):
            rest = after
            continue
        try:
            found, cut = split_shell_words(line)
            rest = (line[cut:] + newline + after) if cut >= 0 else after
        except ShellWordsError:
            try:  # a quote running on past the line's end
                found, cut = split_shell_words(rest)
            except ShellWordsError:
                break
            rest = rest[cut:] if cut >= 0 else ""
        found = _uncommented(found)
        head = 0
        while head < len(found) and (found[head] == "exec" or _ASSIGNMENT.match(found[head])):
            head += 1
        if found[head : head + 2] == ["set", "--"] and positional_exec:
            head += 2  # `set -- vllm serve ...` then `exec "$@"`: the command, kept in $@
        # `set` runs nothing (`set -- vllm serve` alone only stores the words).
        runs = found[head : head + 1] != ["set"]
        if span is None and runs and found[head:] and _starts(profile, found[head:]):
            commands.append((len(words), len(words) + head))
            words += found[:head]
            span = (len(words), len(words) + len(found) - head)
            commands.append(span)
            words += found[head:]
        else:
            commands.append((len(words), len(words) + len(found)))
            words += found
        rest = _after_operators(rest)
        if rest == seen:  # a character no rule here consumes (``(``): never loop on it
            rest = rest[1:]
    if span is None:
        return None
    return Script(tuple(_unmask(w, table) for w in words), *span, commands=tuple(commands))


_MASK = "\ue000{}\ue001"
_MASKED = re.compile("\ue000(\\d+)\ue001")


def _mask_substitutions(script: str) -> tuple[str, list[str]]:
    """``script`` with each ``$(...)`` / ``$((...))`` outside single quotes (parentheses
    balanced) replaced by a placeholder no splitter treats specially, and the originals."""
    out: list[str] = []
    table: list[str] = []
    i, quote = 0, ""
    while i < len(script):
        ch = script[i]
        if ch == "'" and quote != '"':
            quote = "" if quote == "'" else "'"
        elif ch == '"' and quote != "'":
            quote = "" if quote == '"' else '"'
        elif quote != "'" and script.startswith("$(", i):
            end = _closing(script, i + 1)
            if end is not None:
                table.append(script[i : end + 1])
                out.append(_MASK.format(len(table) - 1))
                i = end + 1
                continue
        out.append(ch)
        i += 1
    return "".join(out), table


def _closing(text: str, start: int) -> int | None:
    """The index of the ``)`` that closes the ``(`` at ``start``, or None."""
    depth = 0
    for j in range(start, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return None


def _unmask(word: str, table: list[str]) -> str:
    return _MASKED.sub(lambda m: table[int(m.group(1))], word) if table else word


#: A redirection where a command's words stop (``2>&1``, ``> /tmp/log``, ``<<<x``): its
#: operator and target, neither a command nor the command's argument.
_REDIRECT = re.compile(r"\s*\d*(?:[<>]{1,3}|&>>?)&?\s*(?:\d+-?|-|[^\s;&|<>]+)?")


def _after_operators(rest: str) -> str:
    """``rest`` past the control operators and redirections at its start (``;``, ``&&``,
    ``|``, ``2>&1``): a redirection ``N>&M`` split no word, so ``script_command`` looped on
    ``2>&1 | tee log`` for ever."""
    while True:
        before = rest
        rest = rest.lstrip(";&| \t\n")
        found = _REDIRECT.match(rest)
        if found is not None and found.end() > 0 and rest[: found.end()].strip():
            rest = rest[found.end() :]
        if rest == before:
            return rest


def _uncommented(words: list[str]) -> list[str]:
    """``words`` up to a shell comment (a word starting with ``#``)."""
    for i, word in enumerate(words):
        if word.startswith("#"):
            return words[:i]
    return words


def word_lines(m: Manifest, path: Path, words: Sequence[str]) -> tuple[int | None, ...]:
    """The file line of each word of a multi-line string at ``path`` (a ``|`` or ``>`` block,
    a folded or quoted scalar): each word is looked for in the file's lines after the
    previous one, so a flag is located to its own line; a word not found as written (an
    escape in a quoted scalar) takes the previous word's line."""
    base = m.lines.line((*m.prefix, *path))
    source = m.source_lines
    if base is None or not source:
        return (None,) * len(words)
    base = max(base, 1)
    row, col = base - 1, 0
    # The string ends where the next key or item of the document starts.
    after = [line for _, line in m.lines.items() if line > base]
    limit = min(len(source), min(after) - 1 if after else len(source))
    out: list[int | None] = []
    for word in words:
        probe = word.split("\n", 1)[0]
        for j in range(row, limit):
            at = source[j].find(probe, col if j == row else 0) if probe else -1
            if at >= 0:
                row, col = j, at + len(probe)
                break
        out.append(row + 1)
    return tuple(out)


#: The engine of an ``LLMInferenceService`` that names no runtime: KServe's default
#: ``LLMInferenceServiceConfig`` templates run vLLM (docs/samples/llmisvc/single-node-gpu).
KSERVE_DEFAULT_ENGINE = "vllm"


def _kserve_runtime(
    m: Manifest, c: dict[str, Any]
) -> tuple[EngineProfile | None, tuple[str, ...], tuple[int | None, ...]]:
    """The engine KServe runs in an ``LLMInferenceService``'s ``main`` container that gives no
    command (the samples' shape: the runtime config supplies it, and the image unless the
    file names one such as ``llm-d-cuda``; the user gives ``args`` or env flags): its ``runtime`` names the engine (``kserve-llm-sglang``), else KServe's default;
    the argv is that engine's launcher followed by the user's ``args``."""
    if m.kind != "LLMInferenceService" or c.get("command"):
        return None, (), ()
    if c.get("name") != "main":
        return None, (), ()
    runtime = str(_map(m.data.get("spec")).get("runtime") or "").lower()
    kind = next((k for k in PROFILES if k in runtime), None if runtime else KSERVE_DEFAULT_ENGINE)
    if kind is None:
        return None, (), ()
    profile = PROFILES[kind]
    args = _strings(c.get("args"))
    head = profile.default_launcher()
    return profile, (*head, *args), (*(None,) * len(head), *range(len(args)))


_WHOLE_VAR = re.compile(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))")


def _var_name(token: str) -> str | None:
    """The variable a word is exactly (``$X``, ``${X}``), or None."""
    found = _WHOLE_VAR.fullmatch(token)
    return (found.group(1) or found.group(2)) if found else None


def _shell_env_args(
    c: dict[str, Any], c_path: Path, argv: Sequence[str], seen: set[str]
) -> list[tuple[str, Path, tuple[str, ...]]]:
    """Flags a shell script takes from its env (``vllm serve m $EXTRA_FLAGS``): a word that is
    one variable whose literal value starts with a flag, split as the shell splits it."""
    values = {
        str(item["name"]): (i, item["value"])
        for i, item in enumerate(c.get("env") or [])
        if isinstance(item, dict) and isinstance(item.get("value"), str) and "name" in item
    }
    out: list[tuple[str, Path, tuple[str, ...]]] = []
    for token in argv:
        name = _var_name(token)
        if name is None or name in seen or name not in values:
            continue
        i, value = values[name]
        words = tuple(value.split())
        if words and words[0].startswith("--"):
            seen.add(name)
            out.append((name, (*c_path, "env", i, "value"), words))
    return out


def _env_args(c: dict[str, Any], c_path: Path) -> Iterator[tuple[str, Path, tuple[str, ...]]]:
    from tierctl.compose.shellwords import ShellWordsError, split_shell_words

    for i, item in enumerate(c.get("env") or []):
        if not isinstance(item, dict) or item.get("name") not in ARGS_ENV:
            continue
        value = item.get("value")
        if not isinstance(value, str):
            continue
        try:
            words, _ = split_shell_words(value)
        except ShellWordsError:
            words = value.split()
        yield str(item["name"]), (*c_path, "env", i, "value"), tuple(words)
