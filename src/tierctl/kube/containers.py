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

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tierctl.contracts.standalone import shell_script_argv as _shell_script_argv
from tierctl.engines import PROFILES, EngineProfile, profile_for_argv
from tierctl.kube.manifests import Manifest

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
        for key, role in (("leaderTemplate", "leader"), ("workerTemplate", "worker")):
            if key in lwt:
                t = _map(lwt[key])
                path = ("spec", "leaderWorkerTemplate", key, "spec")
                yield PodSite(path, _map(t.get("spec")), _labels(t), size, role)
    elif m.kind == "LLMInferenceService":
        yield from _llmisvc(spec, own, ())
        prefill = _map(spec.get("prefill"))
        if prefill:
            yield from _llmisvc(prefill, own, ("prefill",))
    elif m.kind == "RoleBasedGroup":
        for i, item in enumerate(spec.get("roles") or []):
            entry = _map(item)
            if "template" not in entry:
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
    elif m.kind not in _NO_PODS:
        # A kind with no shape here (LWS's DisaggregatedSet, a newer operator's CRD): every
        # pod spec found in it, so its engines and env are still checked, as the schema
        # step's "its containers still are" says.
        yield from _found_pods(spec, ("spec",), own, 1, "")


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
        yield PodSite(at, value, labels, nodes, role)
        return
    if isinstance(value.get("leaderWorkerTemplate"), dict):
        lwt = value["leaderWorkerTemplate"]
        size = _count(lwt.get("size"))
        pair = "leaderTemplate" in lwt
        for key, sub_role in (("leaderTemplate", "leader"), ("workerTemplate", "worker")):
            t = _map(lwt.get(key))
            if t:
                path = (*at, "leaderWorkerTemplate", key, "spec")
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
            yield PodSite((*at, "spec", key), _map(spec[key]), labels, nodes, role, sizes)


def _containers(m: Manifest, site: PodSite) -> Iterator[tuple[Path, dict[str, Any]]]:
    if m.kind == "DynamoGraphDeployment":
        main = site.spec.get("mainContainer")
        if isinstance(main, dict):
            yield (*site.path, "mainContainer"), main
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
    profile = profile_for_argv(whole)
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


def _token_path(c_path: Path, n_command: int, i: int | None) -> Path:
    if i is None:
        return (*c_path, "image")
    return (*c_path, "command", i) if i < n_command else (*c_path, "args", i - n_command)


def engine_containers(m: Manifest) -> Iterator[EngineContainer]:
    """Every container of ``m`` that runs an engine (by launcher or image)."""
    for site in pod_sites(m):
        for c_path, c in _containers(m, site):
            profile, argv, index = engine_of(c)
            if profile is None:
                profile, argv, index = _kserve_runtime(m, c)
            if profile is None:
                continue
            n_command = len(_strings(c.get("command")))
            paths = tuple(_token_path(c_path, n_command, i) for i in index)
            inner = _shell_script_argv(profile, argv)
            if inner is not None:
                at, words = inner
                argv = words
                paths = (paths[at],) * len(words)
            elif c.get("command") and not profile.matches_command(argv):
                continue  # the engine's image running something else (a Ray worker script)
            yield EngineContainer(
                m, site, c_path, c, profile, argv, paths, tuple(_env_args(c, c_path))
            )


#: The engine of an ``LLMInferenceService`` that names no runtime: KServe's default
#: ``LLMInferenceServiceConfig`` templates run vLLM (docs/samples/llmisvc/single-node-gpu).
KSERVE_DEFAULT_ENGINE = "vllm"


def _kserve_runtime(
    m: Manifest, c: dict[str, Any]
) -> tuple[EngineProfile | None, tuple[str, ...], tuple[int | None, ...]]:
    """The engine KServe runs in an ``LLMInferenceService``'s ``main`` container that gives no
    image and no command (the samples' shape: the runtime config supplies both, the user only
    ``args``): its ``runtime`` names the engine (``kserve-llm-sglang``), else KServe's default;
    the argv is that engine's launcher followed by the user's ``args``."""
    if m.kind != "LLMInferenceService" or c.get("image") or c.get("command"):
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
