"""Render a tier spec into Kubernetes objects (``tierctl render --target kubernetes``).

The same spec that renders the compose file renders here, with the same argv per replica
(:func:`tierctl.spec.resolve_tier`), so a canary's flag lands on exactly the canary:

- one workload per replica: a ``Deployment`` (one pod, ``Recreate``: a GPU replica cannot
  surge onto GPUs it does not have), or a ``LeaderWorkerSet`` when the engine's flags span
  several nodes (the profile's nodes flag > 1; the leader's address and each pod's rank come
  from LWS's own environment);
- a ``Service`` per replica (what the proxy and a readout address), the proxy
  (``sglang-router``, by Kubernetes service discovery when every replica listens on one port,
  else through the replicas' Services), and a ``PodMonitor`` that scrapes the engines on the
  profile's metrics path with the variant copied from the pod label into every series;
- ``nvidia.com/gpu`` limits and a node selector for the spec's host, the variant in labels,
  probes from the engine profile (a startup probe as long as the model load; a liveness probe
  a tokenization burst cannot fail), secrets by ``secretKeyRef`` only.

The output is deterministic: the same spec gives the same bytes. What a compose fragment says
that Kubernetes has no place for (``network_mode``, ``ipc``, ``ulimits``, log drivers) is named
in the header, never silently dropped.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from tierctl.compose.forms import FormError
from tierctl.compose.long_forms import parse_duration_ns
from tierctl.engines import EngineProfile
from tierctl.errors import InputError, Location
from tierctl.proxies.sglang_router import (
    DEFAULT_METRICS_PORT,
    LIVENESS_PATH,
    READINESS_PATH,
    HealthChecks,
    RouterSettings,
    is_router_command,
    relocated_argv,
    router_argv,
)
from tierctl.render.compose import spec_digest
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec.effective import (
    ResolvedReplica,
    Tier,
    engine_profile,
    equals_form,
    launcher,
    replica_argv,
    resolve_tier,
)
from tierctl.spec.tier_spec import SecretRef, TierSpec

#: The Kubernetes release the objects are written for and validated against.
KUBERNETES_VERSION = "1.33"

TIER_LABEL = "tierctl/tier"
REPLICA_LABEL = "tierctl/replica"
ROLE_LABEL = "tierctl/role"
COMPONENT_LABEL = "app.kubernetes.io/component"
INSTANCE_LABEL = "app.kubernetes.io/instance"
#: LWS labels every pod of a group with its index; the leader is index 0.
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
#: The annotation holding the engine release the spec pins (``vllm==0.33.0``), so validate of
#: the rendering checks its flags against that release's catalog whatever the image says.
ENGINE_ANNOTATION = "tierctl/engine"
#: The annotation naming the engine's env files (the Secret ``TIER-env`` is made of them), so
#: ``tierctl import`` of the rendering writes them back into the spec.
ENV_FILE_ANNOTATION = "tierctl/env-file"
#: The env variables a group controller gives every pod its group's size in (LWS, and RBG's
#: leaderWorkerPattern), read as that size where a flag names one (``--nnodes $(...)``).
GROUP_SIZE_VARIABLES = ("LWS_GROUP_SIZE", "RBG_LWP_GROUP_SIZE")

#: A model load budget when the spec gives none (no healthcheck ``start_period``): a 70B model
#: from local disk loads in minutes, a long-context one with a big KV pool in tens of minutes.
DEFAULT_LOAD_S = 1800
#: A liveness probe is answered by the same event loop that tokenizes (the field report: a
#: burst of 1.4 MB prompts made a 3 s probe miss ~35 times in 25 minutes). It must neither time
#: out within a few seconds nor give up within a minute, or a burst restarts a healthy engine.
MIN_LIVENESS_TIMEOUT_S = 5
MIN_LIVENESS_WINDOW_S = 60
#: What the rendering uses: 10 s per probe, 6 misses 20 s apart (a 2-minute stall is survived).
LIVENESS = {"periodSeconds": 20, "timeoutSeconds": 10, "failureThreshold": 6}
READINESS = {"periodSeconds": 10, "timeoutSeconds": 10, "failureThreshold": 3}
STARTUP_PERIOD_S = 10

ROUTER_PORT = 8080
#: The router image when the spec's proxy does not run sglang-router (pin it in the spec).
ROUTER_IMAGE = "docker.io/lmsysorg/sglang-router:v0.3.2"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: Compose keys of an engine fragment that have a Kubernetes rendering here.
KUBE_KEY = "x-kubernetes"
_CARRIED = {"volumes", "shm_size", "healthcheck", "env_file", KUBE_KEY}
#: What ``x-kubernetes`` (a compose extension key of the engine's fragment, ignored by
#: compose) may hold: pod-spec fields the spec has no other place for (``tierctl import``
#: keeps a manifest's own node selector there).
KUBE_POD_KEYS = ("nodeSelector", "tolerations", "affinity")


@dataclass(frozen=True)
class KubeOptions:
    """Choices the spec leaves open for Kubernetes.

    Attributes:
        namespace: Written into every object (None: the namespace ``kubectl -n`` applies to).
        node_selector: Pin the replicas to the spec's host (``kubernetes.io/hostname``).
    """

    namespace: str | None = None
    node_selector: bool = True


def label_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be a Kubernetes label value (<= 63 characters, alphanumerics with
    ``-_.`` inside), or None."""
    if len(value) > 63:
        return f"{len(value)} characters (at most 63)"
    if not _LABEL_VALUE.match(value):
        return "not alphanumerics with - _ . inside, starting and ending alphanumeric"
    return None


def _check_name(name: str, what: str, path: str) -> str:
    if len(name) > 63 or not _DNS1123.match(name):
        raise InputError(
            f"{what} {name!r} is not a Kubernetes object name",
            location=Location(path=path),
            rule="a Service name is a DNS-1123 label: lowercase alphanumerics and '-', "
            "at most 63 characters",
            value=name,
            fix="rename it in the spec (lowercase, '-' instead of '_' or '.')",
        )
    return name


def load_budget_s(spec: TierSpec) -> int:
    """Seconds a replica may take to load its model: the engine healthcheck's
    ``start_period`` when the spec gives one, else :data:`DEFAULT_LOAD_S`."""
    health = spec.engine.compose.get("healthcheck")
    period = health.get("start_period") if isinstance(health, dict) else None
    if isinstance(period, str):
        try:
            seconds = parse_duration_ns(period) // 1_000_000_000
        except (InputError, FormError):
            # Not a duration (sweep seed 5150301 input 14414: `start_period: -1.0e999`): the
            # compose checks report it; the manifest keeps the default budget.
            return DEFAULT_LOAD_S
        return max(int(seconds), STARTUP_PERIOD_S)
    return DEFAULT_LOAD_S


def engine_probes(profile: EngineProfile, load_s: int) -> dict[str, Any]:
    """The engine container's probes, from its profile's paths."""

    def get(path: str) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": "http"}}

    return {
        "startupProbe": {
            **get(profile.health_path),
            "periodSeconds": STARTUP_PERIOD_S,
            "timeoutSeconds": 10,
            "failureThreshold": math.ceil(load_s / STARTUP_PERIOD_S),
        },
        "livenessProbe": {**get(profile.health_path), **LIVENESS},
        "readinessProbe": {**get(profile.readiness_path), **READINESS},
    }


def secret_name(spec: TierSpec) -> str:
    """The one Secret the tier's ``{secret: NAME}`` env values are read from (key NAME)."""
    return f"{spec.tier}-secrets".replace("_", "-")


def _env(spec: TierSpec, replica: str) -> list[dict[str, Any]]:
    env: dict[str, Any] = dict(spec.engine.env)
    for name, value in spec.replicas[replica].env.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    out: list[dict[str, Any]] = []
    for name, value in env.items():
        if isinstance(value, SecretRef):
            ref = {"name": secret_name(spec), "key": value.secret}
            out.append({"name": name, "valueFrom": {"secretKeyRef": ref}})
        elif isinstance(value, bool):
            out.append({"name": name, "value": "true" if value else "false"})
        else:
            out.append({"name": name, "value": str(value)})
    return out


def nodes_of(profile: EngineProfile, flags: dict[str, Any]) -> int:
    """How many nodes one replica spans (its profile's nodes flag; 1 when not a count)."""
    for name in profile.nodes_flags:
        if name in flags:
            try:
                return max(1, int(str(flags[name])))
            except ValueError:
                return 1
    return 1


def pod_flags(spec: TierSpec, r: ResolvedReplica) -> dict[str, Any]:
    """The replica's flags as a pod runs them: a loopback listen address becomes 0.0.0.0
    (a pod is reached on its own IP: by its Service, the proxy and the kubelet's probes)."""
    profile = engine_profile(spec)
    flags = dict(r.flags)
    host = flags.get(profile.listen_host_flag)
    if isinstance(host, str) and host in _LOOPBACK:
        flags[profile.listen_host_flag] = "0.0.0.0"
    return flags


def _argv(spec: TierSpec, flags: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(command, args): the launcher as the container's command, the rest as its args."""
    argv = equals_form(replica_argv(spec, flags), spec.engine.equals_flags)
    head = len(launcher(spec))
    if spec.engine.entrypoint:
        return list(spec.engine.entrypoint), argv
    # No entrypoint, or compose's `entrypoint: []` (the image's cleared): the launcher is the
    # container's command. An empty `command` would run the image's ENTRYPOINT after all.
    return argv[:head], argv[head:]


def _gpus(spec: TierSpec, r: ResolvedReplica) -> int:
    """GPUs per pod: the replica's (a spec's GPUs are those of one host, as TP x PP x DP per
    node is checked against them), or what its flags need when it reserves all."""
    if isinstance(r.gpu_count, int):
        return r.gpu_count
    needed = engine_profile(spec).gpus_needed(r.flags)
    if needed is None:
        raise InputError(
            f"replica {r.name} reserves gpu_count: all, which Kubernetes cannot ask for",
            location=Location(path=f"replicas.{r.name}.gpu_count"),
            rule="a pod asks for a number of nvidia.com/gpu",
            value="all",
            fix="give the replica's GPUs (gpus: [...] or gpu_count: N)",
        )
    return needed


def _volumes(spec: TierSpec, r: ResolvedReplica) -> tuple[list[Any], list[Any], list[str]]:
    """(volumes, mounts, not carried) from the fragment's bind mounts and ``shm_size``."""
    fragment = _fragment(spec, r)
    volumes: list[Any] = []
    mounts: list[Any] = []
    dropped: list[str] = []
    listed = fragment.get("volumes") or []
    if not isinstance(listed, list):
        # validate's TC007 names it; the pod carries none (``volumes: 99...9`` raised
        # TypeError here, fresh sweep seed 2026120209 input 18407)
        dropped.append(f"volumes {str(listed)[:60]!r} (not a list)")
        listed = []
    for item in listed:
        parts = split_volume(item)
        if parts is None:
            dropped.append(f"volume {str(item)[:60]!r} (not SOURCE:/PATH)")
            continue
        source, target, mode = parts
        if source.startswith("/"):
            name = f"host-{len(volumes)}"
            volumes.append({"name": name, "hostPath": {"path": source, "type": "Directory"}})
        else:
            # A named compose volume (the model cache), or a path a variable gives
            # (``${MODEL_DIR:?...}``, which only the host knows): a claim the cluster holds.
            name = f"vol-{len(volumes)}"
            claim = volume_claim(spec, source)
            volumes.append({"name": name, "persistentVolumeClaim": {"claimName": claim}})
        mount: dict[str, Any] = {"name": name, "mountPath": target}
        if "ro" in mode.split(","):
            mount["readOnly"] = True
        mounts.append(mount)
    shm = fragment.get("shm_size")
    if shm is not None:
        size = str(shm).upper().rstrip("B")
        limit = f"{size[:-1]}{size[-1]}i" if size[-1:] in "KMGT" else size
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": limit}})
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    return volumes, mounts, dropped


_VARIABLE = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def split_volume(item: Any) -> tuple[str, str, str] | None:
    """(source, target, mode) of a compose short-syntax volume, a ``${VAR...}`` source read
    whole (its ``:?message`` holds colons), or None when it is not SOURCE:/PATH[:MODE]."""
    if not isinstance(item, str):
        return None
    if item.startswith("${"):
        end = item.find("}")
        if end < 0 or item[end + 1 : end + 2] != ":":
            return None
        source, rest = item[: end + 1], item[end + 2 :]
    else:
        source, _, rest = item.partition(":")
    target, _, mode = rest.partition(":")
    if not source or not target.startswith("/"):
        return None
    return source, target, mode


def volume_claim(spec: TierSpec, volume: str) -> str:
    """The PersistentVolumeClaim a named compose volume (or a variable's path: its
    variable's name) renders as (``TIER-VOLUME``)."""
    declared = spec.volumes.get(volume)
    if isinstance(declared, dict) and isinstance(declared.get("name"), str):
        # The compose volume's own name (`name: CLAIM`, as import declares a claim it read).
        return re.sub(r"[^a-z0-9-]+", "-", declared["name"].lower()).strip("-")[:63]
    found = _VARIABLE.match(volume)
    name = found.group(1) if found else volume
    prefix = f"{spec.tier}-".lower()
    # Already the tier's (an imported rendering's claim): kept, not prefixed again.
    claim = name.lower() if name.lower().startswith(prefix) else f"{prefix}{name}".lower()
    return re.sub(r"[^a-z0-9-]+", "-", claim).strip("-")[:63]


def env_secret(spec: TierSpec) -> str:
    """The Secret holding the engine's ``env_file`` variables (``TIER-env``)."""
    return f"{spec.tier}-env".replace("_", "-")


def _fragment(spec: TierSpec, r: ResolvedReplica) -> dict[str, Any]:
    return {**spec.engine.compose, **spec.replicas[r.name].compose}


def replica_labels(spec: TierSpec, r: ResolvedReplica) -> dict[str, str]:
    """The labels of a replica's workload and pods (the variant among them)."""
    labels = {
        COMPONENT_LABEL: "engine",
        INSTANCE_LABEL: r.service,
        TIER_LABEL: spec.tier,
        REPLICA_LABEL: r.name,
        ROLE_LABEL: r.role or "none",
    }
    if "service-labels" in spec.telemetry.places:
        problem = label_value_problem(r.variant)
        if problem:
            raise InputError(
                f"replica {r.name}'s variant {r.variant!r} cannot be a Kubernetes label "
                f"value: {problem}",
                location=Location(path="telemetry.variant"),
                rule="a label value is at most 63 alphanumerics with - _ . inside",
                value=r.variant,
                fix="shorten the variant template, or leave service-labels out of places",
            )
        labels[spec.telemetry.label] = r.variant
    return labels


def _node_selector(spec: TierSpec, r: ResolvedReplica, nodes: int) -> dict[str, str]:
    """The pod's node selector: the fragment's own (``x-kubernetes.nodeSelector``), and the
    spec's host as ``kubernetes.io/hostname`` for a one-pod replica. A loopback host
    (``localhost``) names no node, and a group across nodes cannot sit on one host."""
    extra = _fragment(spec, r).get(KUBE_KEY)
    own = extra.get("nodeSelector") if isinstance(extra, dict) else None
    selector = {str(k): str(v) for k, v in own.items()} if isinstance(own, dict) else {}
    if spec.host and spec.host not in _LOOPBACK and nodes == 1 and KubeOptions().node_selector:
        selector.setdefault("kubernetes.io/hostname", spec.host)
    return selector


def _pod_spec(
    spec: TierSpec, r: ResolvedReplica, flags: dict[str, Any], *, serves: bool, nodes: int = 1
) -> tuple[dict[str, Any], list[str]]:
    profile = engine_profile(spec)
    command, args = _argv(spec, flags)
    container: dict[str, Any] = {"name": "engine", "image": r.image}
    if command:
        container["command"] = command
    container["args"] = args
    env = _env(spec, r.name)
    if env:
        container["env"] = env
    if _fragment(spec, r).get("env_file"):
        # The env file's variables, from a Secret made of it (it may hold tokens).
        container["envFrom"] = [{"secretRef": {"name": env_secret(spec)}}]
    if serves:
        container["ports"] = [{"name": "http", "containerPort": r.port, "protocol": "TCP"}]
        container |= engine_probes(profile, load_budget_s(spec))
    gpus = _gpus(spec, r)
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    volumes, mounts, dropped = _volumes(spec, r)
    if mounts:
        container["volumeMounts"] = mounts
    pod: dict[str, Any] = {"containers": [container]}
    selector = _node_selector(spec, r, nodes)
    if selector:
        pod["nodeSelector"] = selector
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    tolerations = tolerations if gpus else []
    extra = _fragment(spec, r).get(KUBE_KEY)
    extra = extra if isinstance(extra, dict) else {}
    for item in extra.get("tolerations") or []:
        if item not in tolerations:
            tolerations.append(item)
    if tolerations:
        pod["tolerations"] = tolerations
    if isinstance(extra.get("affinity"), dict):
        pod["affinity"] = extra["affinity"]
    if volumes:
        pod["volumes"] = volumes
    return pod, dropped


def _meta(name: str, labels: dict[str, str], options: KubeOptions) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if options.namespace:
        meta["namespace"] = options.namespace
    meta["labels"] = labels
    return meta


def _selector(spec: TierSpec, r: ResolvedReplica) -> dict[str, str]:
    return {TIER_LABEL: spec.tier, REPLICA_LABEL: r.name}


def multinode_flags(profile: EngineProfile, flags: dict[str, Any], rank: str) -> dict[str, Any]:
    """A multi-node pod's flags: the leader's address from LWS and this pod's rank."""
    out = dict(flags)
    if profile.leader_address_flag:
        old = str(flags.get(profile.leader_address_flag, ""))
        port = old.rpartition(":")[2] if ":" in old else "29500"
        address = "$(LWS_LEADER_ADDRESS)"
        out[profile.leader_address_flag] = (
            f"{address}:{port}" if profile.leader_address_has_port else address
        )
    if profile.node_rank_flag:
        out[profile.node_rank_flag] = rank
    return out


_multinode_flags = multinode_flags  # the name this module's own callers use


def replica_workload(
    spec: TierSpec, r: ResolvedReplica, options: KubeOptions
) -> tuple[dict[str, Any], list[str]]:
    """The replica's workload (a Deployment, or an LWS across nodes) and what was not carried."""
    profile = engine_profile(spec)
    flags = pod_flags(spec, r)
    nodes = nodes_of(profile, flags)
    labels = replica_labels(spec, r)
    meta = _meta(r.service, labels, options)
    # The release the spec pins: validate of this file checks the flags against its catalog
    # (an image by digest or a custom tag names none).
    meta["annotations"] = {ENGINE_ANNOTATION: f"{spec.engine.kind}=={spec.engine.version}"}
    files = _env_file_names(_fragment(spec, r).get("env_file"))
    if files:
        meta["annotations"][ENV_FILE_ANNOTATION] = ",".join(files)
    if nodes == 1:
        pod, dropped = _pod_spec(spec, r, flags, serves=True)
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": _selector(spec, r)},
                "template": {"metadata": {"labels": labels}, "spec": pod},
            },
        }, dropped
    leader, dropped = _pod_spec(
        spec, r, _multinode_flags(profile, flags, "0"), serves=True, nodes=nodes
    )
    worker, _ = _pod_spec(
        spec, r, _multinode_flags(profile, flags, "$(LWS_WORKER_INDEX)"), serves=False, nodes=nodes
    )
    if spec.host and spec.host not in _LOOPBACK:
        dropped.append(f"host {spec.host} (a group of {nodes} pods runs on {nodes} nodes)")
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": nodes,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {"metadata": {"labels": labels}, "spec": leader},
                "workerTemplate": {"metadata": {"labels": labels}, "spec": worker},
            },
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"partition": 0, "maxUnavailable": 1},
            },
            "startupPolicy": "LeaderCreated",
        },
    }, dropped


def replica_service(spec: TierSpec, r: ResolvedReplica, options: KubeOptions) -> dict[str, Any]:
    """The replica's Service (its leader pod only, for an LWS)."""
    selector = _selector(spec, r)
    if nodes_of(engine_profile(spec), r.flags) > 1:
        selector[LWS_WORKER_INDEX_LABEL] = "0"
    labels = {COMPONENT_LABEL: "engine", TIER_LABEL: spec.tier, REPLICA_LABEL: r.name}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(_check_name(r.service, "service", "engine.service"), labels, options),
        "spec": {
            "selector": selector,
            "ports": [{"name": "http", "port": r.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _scrape(tier: Tier) -> tuple[int, dict[str, str]]:
    for service in tier.services.values():
        if service.scrape is not None:
            return service.scrape.interval_s, dict(service.scrape.labels)
    return 15, {}


def _meta_label(key: str) -> str:
    """Prometheus's discovery label of a pod label (non-alphanumerics become ``_``)."""
    return "__meta_kubernetes_pod_label_" + re.sub(r"[^A-Za-z0-9_]", "_", key)


def pod_monitor(tier: Tier, options: KubeOptions) -> dict[str, Any]:
    """The PodMonitor scraping every engine pod, the variant and names copied into series."""
    spec = tier.spec
    profile = engine_profile(spec)
    interval, static = _scrape(tier)
    relabel: list[dict[str, Any]] = [
        {"sourceLabels": [_meta_label(INSTANCE_LABEL)], "targetLabel": "container_name"},
    ]
    if "collector-scrape-config" in spec.telemetry.places:
        relabel.append(
            {
                "sourceLabels": [_meta_label(spec.telemetry.label)],
                "targetLabel": spec.telemetry.label,
            }
        )
    relabel += [
        {"sourceLabels": [_meta_label(REPLICA_LABEL)], "targetLabel": "replica"},
        {"sourceLabels": [_meta_label(ROLE_LABEL)], "targetLabel": "role"},
    ]
    names = {"host": spec.host, "tier": spec.tier}
    for key, template in sorted(static.items()):
        value = re.sub(r"\{(host|tier)\}", lambda m: names[m.group(1)], template)
        relabel.append({"targetLabel": key, "replacement": value, "action": "replace"})
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": _meta(f"{spec.tier}-engines", {TIER_LABEL: spec.tier}, options),
        "spec": {
            "selector": {"matchLabels": {TIER_LABEL: spec.tier, COMPONENT_LABEL: "engine"}},
            "podMetricsEndpoints": [
                {
                    "port": "http",
                    "path": profile.metrics_path,
                    "interval": f"{interval}s",
                    "relabelings": relabel,
                }
            ],
        },
    }


def _spec_router_command(tier: Tier) -> list[str] | None:
    """The spec's proxy command when it runs sglang-router, else None."""
    for service in tier.services.values():
        command = service.compose.get("command")
        if service.role == "proxy" and isinstance(command, list) and is_router_command(command):
            return [str(token) for token in command]
    return None


def _router_image(tier: Tier) -> str:
    for service in tier.services.values():
        if service.role != "proxy":
            continue
        image = str(service.compose.get("image", ""))
        command = service.compose.get("command")
        if "sglang-router" in image or (isinstance(command, list) and "sglang-router" in command):
            return image
    return ROUTER_IMAGE


def router_objects(tier: Tier, options: KubeOptions) -> list[dict[str, Any]]:
    """The proxy: sglang-router by Kubernetes service discovery (one port on every replica:
    it watches the tier's engine pods, needing a Role to list them), or through the replicas'
    Services (their ports differ)."""
    spec = tier.spec
    profile = engine_profile(spec)
    name = f"{spec.tier}-router".replace("_", "-")
    labels = {COMPONENT_LABEL: "proxy", TIER_LABEL: spec.tier}
    ports = {r.port for r in tier.replicas.values()}
    discovery = len(ports) == 1
    extra: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    if discovery:
        selector = [f"{TIER_LABEL}={spec.tier}", f"{COMPONENT_LABEL}=engine"]
        if any(nodes_of(profile, r.flags) > 1 for r in tier.replicas.values()):
            selector.append(f"{LWS_WORKER_INDEX_LABEL}=0")
        extra = (
            "--service-discovery",
            "--selector",
            *selector,
            "--service-discovery-port",
            str(next(iter(ports))),
            "--service-discovery-namespace",
            "$(POD_NAMESPACE)",
        )
    else:
        urls = tuple(f"http://{r.service}:{r.port}" for r in tier.replicas.values())
    settings = RouterSettings(
        worker_urls=urls,
        host="0.0.0.0",
        port=ROUTER_PORT,
        metrics_port=DEFAULT_METRICS_PORT,
        health=HealthChecks(endpoint=profile.health_path),
        log_level="info",
        extra=extra,
    )
    argv = router_argv(settings)
    port, metrics = ROUTER_PORT, DEFAULT_METRICS_PORT
    own = _spec_router_command(tier)
    if own is not None:
        # The spec's own router command, its flags as written (not the defaults').
        argv, given, given_metrics = relocated_argv(own, urls, extra)
        port, metrics = given or ROUTER_PORT, given_metrics or DEFAULT_METRICS_PORT
    container: dict[str, Any] = {
        "name": "router",
        "image": _router_image(tier),
        "command": argv[:1],
        "args": argv[1:],
        "env": [
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            }
        ],
        "ports": [
            {"name": "http", "containerPort": port, "protocol": "TCP"},
            {"name": "metrics", "containerPort": metrics, "protocol": "TCP"},
        ],
        "livenessProbe": {"httpGet": {"path": LIVENESS_PATH, "port": "http"}, **LIVENESS},
        "readinessProbe": {"httpGet": {"path": READINESS_PATH, "port": "http"}, **READINESS},
    }
    pod: dict[str, Any] = {"containers": [container]}
    out: list[dict[str, Any]] = []
    if discovery:
        pod["serviceAccountName"] = name
        out += _router_rbac(name, labels, options)
    out.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(name, labels, options),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {TIER_LABEL: spec.tier, COMPONENT_LABEL: "proxy"}},
                "template": {"metadata": {"labels": labels}, "spec": pod},
            },
        }
    )
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(name, labels, options),
            "spec": {
                "selector": {TIER_LABEL: spec.tier, COMPONENT_LABEL: "proxy"},
                "ports": [
                    {"name": "http", "port": ROUTER_PORT, "targetPort": "http", "protocol": "TCP"}
                ],
            },
        }
    )
    return out


def _router_rbac(name: str, labels: dict[str, str], options: KubeOptions) -> list[dict[str, Any]]:
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
    subject: dict[str, Any] = {"kind": "ServiceAccount", "name": name}
    if options.namespace:
        subject["namespace"] = options.namespace
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, labels, options)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(name, labels, options),
            "rules": [rule],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(name, labels, options),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [subject],
        },
    ]


@dataclass(frozen=True)
class KubeRendering:
    """The objects of a tier, what of the spec has no Kubernetes rendering, and what the
    cluster must hold before the objects are applied (a claim, a Secret)."""

    objects: list[dict[str, Any]]
    not_carried: list[str]
    needs: tuple[str, ...] = ()


def _env_file_names(value: Any) -> list[str]:
    """The file names of a compose ``env_file`` (a string, or a list of strings or
    ``{path: ...}`` entries)."""
    if not value:
        return []
    items = value if isinstance(value, list) else [value]
    return [str(i.get("path", "")) if isinstance(i, dict) else str(i) for i in items]


def _needs(spec: TierSpec) -> tuple[str, ...]:
    """What the rendering refers to that it does not create: the PersistentVolumeClaims of
    named volumes, and the Secret of the env files."""
    out: list[str] = []
    fragments = [spec.engine.compose, *(r.compose for r in spec.replicas.values())]
    for fragment in fragments:
        listed = fragment.get("volumes")
        for item in listed if isinstance(listed, list) else []:
            parts = split_volume(item)
            if parts is not None and not parts[0].startswith("/"):
                claim = volume_claim(spec, parts[0])
                what = "the path" if parts[0].startswith("$") else "compose volume"
                found = _VARIABLE.match(parts[0])
                shown = f"${{{found.group(1)}}}" if found else parts[0]
                out.append(f"the PersistentVolumeClaim {claim} ({what} {shown}, at {parts[1]})")
        names = _env_file_names(fragment.get("env_file"))
        if names:
            flags = " ".join(f"--from-env-file={n}" for n in names)
            out.append(
                f"the Secret {env_secret(spec)} from the env file: kubectl create secret "
                f"generic {env_secret(spec)} {flags}"
            )
    return tuple(dict.fromkeys(out))


def kube_objects(spec: TierSpec, options: KubeOptions | None = None) -> KubeRendering:
    """Every object of the tier, in a fixed order: per replica its workload and Service,
    then the proxy, then the PodMonitor."""
    options = options or KubeOptions()
    tier = resolve_tier(spec)
    objects: list[dict[str, Any]] = []
    dropped: list[str] = []
    for r in tier.replicas.values():
        workload, lost = replica_workload(spec, r, options)
        objects += [workload, replica_service(spec, r, options)]
        dropped += [f"{r.name}: {what}" for what in lost]
    if any(s.role == "proxy" for s in tier.services.values()):
        objects += router_objects(tier, options)
    objects.append(pod_monitor(tier, options))
    fragment_keys = sorted(set(spec.engine.compose) - _CARRIED)
    if fragment_keys:
        dropped.append("engine compose keys " + ", ".join(fragment_keys))
    others = [n for n, s in tier.services.items() if s.role not in ("proxy", "collector")]
    if others:
        dropped.append("services " + ", ".join(others) + " (no Kubernetes rendering)")
    if "log-tags" in spec.telemetry.places:
        dropped.append("log-tags (the variant is a pod label; log collectors read it there)")
    return KubeRendering(objects, sorted(set(dropped), key=dropped.index), _needs(spec))


def kube_output_name(output: str) -> str:
    """Where ``render --target kubernetes --write`` writes, beside the compose output:
    ``compose.yaml`` -> ``compose.k8s.yaml``."""
    path = PurePosixPath(output)
    return str(path.with_name(f"{path.stem}.k8s{path.suffix or '.yaml'}"))


def render_kubernetes(
    spec: TierSpec, spec_path: str | Path | None = None, options: KubeOptions | None = None
) -> str:
    """Render ``spec`` to a multi-document Kubernetes YAML text (deterministic)."""
    rendering = kube_objects(spec, options)
    digest = spec_digest(spec)
    if spec_path is not None:
        out_dir = (Path(spec_path).parent / kube_output_name(spec.output)).parent
        spec_ref = Path(os.path.relpath(Path(spec_path), out_dir)).as_posix()
    else:
        spec_ref = "<spec>"
    header = [
        f"# Generated by tierctl from {spec_ref} (spec sha256 {digest[:16]}).",
        "# Do not edit by hand: change the spec, then run `tierctl render --target kubernetes "
        f"--write {spec_ref}`.",
        f"# Tier {spec.tier}: {', '.join(spec.replicas)} ({spec.engine.kind} "
        f"{spec.engine.version}), Kubernetes {KUBERNETES_VERSION}.",
    ]
    envs: list[dict[str, Any]] = [dict(spec.engine.env)]
    envs += [dict(r.env) for r in spec.replicas.values()]
    if any(isinstance(v, SecretRef) for env in envs for v in env.values()):
        header.append(f"# Secrets are read from the Secret {secret_name(spec)} (create it first).")
    header += [f"# Create first: {what}." for what in rendering.needs]
    header += [f"# Not carried: {what}." for what in rendering.not_carried]
    docs = [dump_yaml(obj) for obj in rendering.objects]
    return "\n".join(header) + "\n---\n" + "---\n".join(docs)
