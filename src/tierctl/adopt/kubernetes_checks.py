"""What ``tierctl import`` of manifests must settle before it writes a spec, each refusal
located to the manifest's line: the engine release (the image tag, the workload's pin and
``--engine`` must agree), a script around the engine (a spec starts the engine's command
alone), and variables in the flags (the kubelet's ``$(VAR)`` and a shell's ``$VAR`` are filled
in where the pod runs; a spec's flags are literal). Also the pod-spec fields a spec keeps in
``x-kubernetes`` (the file's own node selector, tolerations, affinity) and its volumes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tierctl.catalog.store import load_catalog, shipped
from tierctl.contracts.kubernetes import container_name, engine_pin, image_release
from tierctl.engine_catalog import Catalog
from tierctl.errors import InputError, Location
from tierctl.kubernetes.containers import EngineContainer
from tierctl.render.kubernetes import GROUP_SIZE_VARIABLES

#: Commands of a script around the engine that change nothing the engine sees: tracing,
#: messages (``set -x``, ``echo``), a no-op. Any other command would not run from a spec.
_HARMLESS = frozenset({"set", "echo", "true", ":", "exec"})
_KUBELET_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_SHELL_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def who(e: EngineContainer) -> str:
    """``Kind/name container NAME`` for messages."""
    return f"{e.manifest.ref} container {container_name(e)}"


def token_location(e: EngineContainer, index: int) -> Location:
    """Where argv token ``index`` of ``e`` sits (its own line inside a script)."""
    if not e.token_paths:
        return e.manifest.location(*e.path)
    i = max(0, min(index, len(e.token_paths) - 1))
    location = e.manifest.location(*e.token_paths[i])
    line = e.token_lines[i] if i < len(e.token_lines) else None
    if line is not None:
        location.line = line
    return location


@dataclass(frozen=True)
class Release:
    """The release a spec pins, its catalog, and the image the spec names."""

    catalog: Catalog
    image: str
    #: The spec keeps the image as written (``:latest`` with ``--engine``).
    as_written: bool = False
    note: str | None = None


def release_of(e: EngineContainer, forced: Catalog | None) -> Release:
    """The engine release of ``e`` for a spec, or a located refusal.

    The workload's ``tierctl/engine`` pin (a tierctl rendering) names it; else the image tag
    (``v0.33.0``), which ``--engine`` must then agree with (the tag is what runs); else
    ``--engine`` (an image with no release in its tag, ``:latest``, or no image at all)."""
    kind, title = e.profile.kind, e.profile.title
    image = str(e.container.get("image") or "")
    at = e.manifest.location(*e.path, "image") if image else e.manifest.location(*e.path)
    ours = forced if forced is not None and forced.engine == kind else None
    pin = engine_pin(e)
    tagged = image_release(e.profile, image)
    version = pin.partition("==")[2] if pin is not None else tagged
    if version is not None:
        if tagged is not None and tagged != version:
            raise InputError(
                f"{who(e)}: the image {image!r} runs {title} {tagged}, but the workload's "
                f"{pin} pins {version}: a spec's version and its image's tag must agree",
                location=at,
                rule="the spec's version is the release its image runs",
                fix="render the manifests again from the spec, or change the image's tag",
            )
        if ours is not None and ours.version != version:
            raise InputError(
                f"{who(e)}: the image {image!r} runs {title} {version}, but `engine` names "
                f"{ours.version}: a spec's version and its image's tag must agree",
                location=at,
                rule="the spec's version is the release its image runs",
                fix=f"pass `engine` {kind}=={version}, or change the image's tag",
                params=("engine",),
            )
        if (kind, version) not in shipped():
            releases = ", ".join(v for k, v in shipped() if k == kind)
            raise InputError(
                f"{who(e)}: the image {image!r} runs {title} {version}, which has no shipped "
                f"flag catalog (shipped: {releases})",
                location=at,
                rule="a spec pins a release whose flags tierctl knows",
                fix=f"build its catalog (tierctl catalog build {kind}=={version}), or move "
                "the image to a shipped release",
            )
        if pin is not None and tagged is None and image:
            # A tierctl rendering of a spec that keeps its image as written (`:latest`).
            return Release(load_catalog(kind, version), image, as_written=True)
        return Release(load_catalog(kind, version), image)
    if ours is None:
        what = f"the image {image!r} names no release" if image else "no image is given"
        raise InputError(
            f"{who(e)}: {what}, so the spec cannot pin the {title} release it runs",
            location=at,
            rule="a spec pins the engine release",
            fix=f"pass `engine` {kind}==VERSION (the release the image runs), or tag the "
            "image with its release",
            params=("engine",),
        )
    if not image:
        image = f"{e.profile.images[0]}:v{ours.version}"
        note = (
            f"no image in the manifests (the controller's runtime sets it): the spec names "
            f"{image}; make it the runtime's"
        )
        return Release(ours, image, note=note)
    return Release(
        ours,
        image,
        as_written=True,
        note=f"the image {image} names no release: the spec pins {ours.ref} (`engine`) and "
        "keeps the image as written (image_policy: as-written); tag it with the release",
    )


def check_group(e: EngineContainer) -> None:
    """Refuse a group of pods that a spec cannot render: the engine across nodes by another
    launcher than its own multi-node flags (vLLM over Ray in an LWS, KServe's data-parallel
    workers), which the spec would render as one pod."""
    if e.site.nodes <= 1 or e.profile.nodes_flags:
        return
    raise InputError(
        f"{who(e)}: a group of {e.site.nodes} pods runs {e.profile.title} across nodes by "
        "its own launcher (a Ray cluster, a controller's data-parallel workers): a spec has "
        f"no multi-node launch for {e.profile.title}, and would render one pod",
        location=e.manifest.location(*e.site.path),
        rule="an imported replica renders as the pods the manifests run",
        fix="import a one-node replica, or keep this workload as written",
    )


def check_wrapper(e: EngineContainer) -> None:
    """Refuse an engine run by another framework's worker (Dynamo's ``python3 -m
    dynamo.vllm``): a spec starts the engine's own server, which would not join the
    wrapper's runtime (its frontend, discovery and KV transfer), and its flags are not all
    the engine's."""
    if not e.wrapper:
        return
    raise InputError(
        f"{who(e)} runs {e.profile.title} inside {e.profile.wrapper_title}'s worker "
        f"({' '.join(e.wrapper)}): a spec starts {e.profile.title}'s own server, which would "
        f"not join {e.profile.wrapper_title}'s runtime (frontend, discovery, KV transfer), "
        f"and {e.profile.wrapper_title}'s own flags are not {e.profile.title}'s",
        location=token_location(e, 0),
        rule="import carries an engine's own server, not another framework's worker",
        fix=f"keep this graph as written (validate checks its {e.profile.title} flags); "
        f"import a manifest that runs {' '.join(e.profile.default_launcher())} itself",
    )


def check_script(e: EngineContainer) -> None:
    """Refuse an engine inside a script with other commands (``pip install ...; vllm
    serve``): the spec starts the engine's command itself, without them."""
    other = [c for c in e.script_other if c and c[0] not in _HARMLESS]
    if not other:
        return
    shown = "; ".join(" ".join(c)[:40] for c in other[:3])
    raise InputError(
        f"{who(e)} runs the engine from a shell script with other commands ({shown}): a "
        "spec starts the engine's command alone, so they would not run",
        location=token_location(e, 0),
        rule="import carries an engine command, not a script",
        fix="move the other commands into the image (or an initContainer) and import the "
        "engine's command; or write the spec's entrypoint by hand",
    )


def resolve_variables(
    e: EngineContainer,
    flags: dict[str, Any],
    locate: Callable[[str], Location],
    shelled: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """``flags`` with their variables filled in as the pod would: the kubelet's ``$(VAR)``
    from the container's literal env values (``$$`` stays ``$``), and, inside a shell
    script (or for ``shelled`` flags: an env string of extra flags, which the runtime's
    script expands), ``$VAR``/``${VAR}``/``${VAR:-default}`` likewise. Refused, located: a
    variable the spec cannot give (a ``valueFrom`` one, a controller's, one nothing sets), a
    shell variable with no shell to expand it (the engine would get it literally), and a
    controller's template (``{{ ... }}``)."""
    literal: dict[str, str] = {}
    derived: dict[str, str] = {}
    for item in e.container.get("env") or []:
        if not isinstance(item, dict) or "name" not in item:
            continue
        if "value" in item:
            literal[str(item["name"])] = str(item["value"] or "")
        else:
            derived[str(item["name"])] = _origin(item.get("valueFrom"))
    groups = {name: str(e.site.nodes) for name in GROUP_SIZE_VARIABLES} if e.site.nodes > 1 else {}

    def fill(flag: str, value: str) -> str:
        def known(name: str, default: str | None) -> str:
            if name in literal:
                return literal[name]
            if name in groups:
                return groups[name]
            if default is not None:
                return default
            where = derived.get(name, "nothing in the container's env (the image or a controller)")
            raise InputError(
                f"{who(e)}: --{flag} {value!r} takes ${name} from {where}: a spec's flags "
                "are literal (only a secret comes from elsewhere)",
                location=locate(flag),
                rule="an imported flag's value is what the pod would run",
                fix=f"write the value of {name} into the flag, then import",
            )

        if "{{" in value:
            raise InputError(
                f"{who(e)}: --{flag} {value[:80]!r} holds a controller's template "
                "({{ ... }}), which the controller fills in: a spec's flags are literal",
                location=locate(flag),
                rule="an imported flag's value is what the pod would run",
                fix="write the value the controller renders into the flag, then import",
            )
        out = _KUBELET_VAR.sub(lambda m: known(m.group(1), None), value.replace("$$", "\0"))
        if e.shell or flag in shelled:
            out = _SHELL_VAR.sub(lambda m: known(m.group(1) or m.group(3), m.group(2)), out)
        elif _SHELL_VAR.search(out):
            raise InputError(
                f"{who(e)}: --{flag} {value[:80]!r} holds a shell variable, but no shell runs "
                "the command: the engine gets it as written",
                location=locate(flag),
                rule="an imported flag's value is what the pod would run",
                fix="use $(VAR) (the kubelet's expansion), or run the command through sh -c",
            )
        return out.replace("\0", "$")

    resolved: dict[str, Any] = {}
    for flag, value in flags.items():
        if isinstance(value, str) and "$" in value:
            resolved[flag] = fill(flag, value)
        elif isinstance(value, list):
            resolved[flag] = [
                fill(flag, v) if isinstance(v, str) and "$" in v else v for v in value
            ]
        else:
            resolved[flag] = value
    return resolved


def _origin(value_from: Any) -> str:
    if not isinstance(value_from, dict):
        return "the pod"
    field = value_from.get("fieldRef")
    if isinstance(field, dict):
        return f"the pod's {field.get('fieldPath', 'fields')} (valueFrom fieldRef)"
    for key in ("configMapKeyRef", "secretKeyRef", "resourceFieldRef"):
        if key in value_from:
            return f"a valueFrom {key}"
    return "a valueFrom"


#: Pod-spec fields a spec keeps under the engine fragment's ``x-kubernetes`` (compose
#: ignores an ``x-`` key; render's Kubernetes target writes them into the pod).
PLACEMENT_KEYS = ("nodeSelector", "tolerations", "affinity")
_GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def placement(e: EngineContainer) -> dict[str, Any]:
    """The pod's own placement (node selector without the hostname, which is the spec's
    ``host``; tolerations without the GPU one the rendering adds; affinity)."""
    out: dict[str, Any] = {}
    selector = {
        str(k): str(v)
        for k, v in (e.site.spec.get("nodeSelector") or {}).items()
        if k != "kubernetes.io/hostname"
    }
    if selector:
        out["nodeSelector"] = selector
    tolerations = [t for t in e.site.spec.get("tolerations") or [] if t != _GPU_TOLERATION]
    if tolerations:
        out["tolerations"] = tolerations
    if e.site.spec.get("affinity"):
        out["affinity"] = e.site.spec["affinity"]
    return out


def volumes(e: EngineContainer) -> tuple[list[str], str | None, list[str]]:
    """(compose volumes, shm_size, not carried) from the container's mounts: a hostPath is
    ``PATH:MOUNT``, a claim a named volume ``CLAIM:MOUNT`` (``:ro`` kept), a memory emptyDir
    on /dev/shm the shm size."""
    pod_volumes = {
        str(v.get("name")): v for v in e.site.spec.get("volumes") or [] if isinstance(v, dict)
    }
    out: list[str] = []
    shm: str | None = None
    lost: list[str] = []
    for mount in e.container.get("volumeMounts") or []:
        if not isinstance(mount, dict):
            continue
        volume = pod_volumes.get(str(mount.get("name")), {})
        target = str(mount.get("mountPath", ""))
        mode = ":ro" if mount.get("readOnly") else ""
        if "hostPath" in volume:
            out.append(f"{volume['hostPath'].get('path')}:{target}{mode}")
        elif "persistentVolumeClaim" in volume:
            out.append(f"{volume['persistentVolumeClaim'].get('claimName')}:{target}{mode}")
        elif target == "/dev/shm" and isinstance(volume.get("emptyDir"), dict):
            limit = str(volume["emptyDir"].get("sizeLimit") or "")
            shm = limit.removesuffix("i").lower() or None
            if shm is None:
                lost.append(f"{who(e)}: /dev/shm has no size limit (compose's default 64m applies)")
        else:
            kinds = ", ".join(k for k in volume if k != "name") or "no volume"
            lost.append(f"{who(e)}: volume {mount.get('name')} at {target} ({kinds})")
    return out, shm, lost
