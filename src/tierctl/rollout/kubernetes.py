"""The rollout of a spec change on Kubernetes: which objects change, canary first, the kubectl
commands, what to watch, how to roll back (``tierctl kube plan OLD NEW``).

Both specs are rendered (:func:`tierctl.render.kubernetes.kube_objects`) and compared object
by object. Each replica is its own workload, so a change of one replica's flags changes that
replica's objects only: the plan applies them one replica at a time (the canary first, the
control last), each with a server-side dry run, a diff, a label-scoped apply and a wait as
long as the model load; the tier's shared objects (proxy, PodMonitor) follow.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from tierctl.render.kubernetes import REPLICA_LABEL, kube_objects, load_budget_s
from tierctl.spec.tier_spec import TierSpec

Key = tuple[str, str]  # (kind, name)


@dataclass(frozen=True)
class KubeStep:
    """One step: the objects it applies, the label that selects them, what to run."""

    title: str
    objects: tuple[Key, ...]
    commands: tuple[str, ...]
    watch: tuple[str, ...] = ()
    rollback: tuple[str, ...] = ()


@dataclass(frozen=True)
class KubePlan:
    """Which objects change and the steps that apply them."""

    changed: tuple[Key, ...]
    added: tuple[Key, ...]
    removed: tuple[Key, ...]
    untouched: tuple[Key, ...]
    steps: tuple[KubeStep, ...] = field(default=())

    def markdown(self, manifest: str) -> str:
        """The runbook: the change, then each step's commands, watch list and rollback."""
        lines = [f"# Kubernetes rollout of {manifest}", ""]
        if not self.steps:
            return "\n".join([*lines, "Nothing changes: every object renders the same.", ""])
        for title, keys in (
            ("Changes", self.changed),
            ("New", self.added),
            ("Removed", self.removed),
            ("Untouched", self.untouched),
        ):
            if keys:
                lines.append(f"- {title}: " + ", ".join(f"{k}/{n}" for k, n in keys))
        for i, step in enumerate(self.steps, 1):
            lines += ["", f"## {i}. {step.title}", "", "```sh", *step.commands, "```"]
            if step.watch:
                lines += ["", "Watch:", "", *(f"- `{w}`" for w in step.watch)]
            if step.rollback:
                lines += ["", "Roll back:", "", "```sh", *step.rollback, "```"]
        return "\n".join([*lines, ""])


def _by_key(objects: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def _replica_of(obj: dict[str, Any]) -> str | None:
    value = obj["metadata"].get("labels", {}).get(REPLICA_LABEL)
    return str(value) if value is not None else None


def _workload(keys: list[Key]) -> Key | None:
    return next((k for k in keys if k[0] in ("Deployment", "LeaderWorkerSet")), None)


def old_rendering(old_manifest: str | None, old_spec: str) -> str:
    """How a rollback reads the old objects: the file the user kept, else OLD's rendering
    made on the spot (no file is assumed: nothing wrote one)."""
    if old_manifest is not None:
        return "kubectl apply -f " + shlex.quote(old_manifest)
    return f"tierctl render --target kubernetes {shlex.quote(old_spec)} | kubectl apply -f -"


def _replica_step(spec: TierSpec, name: str, keys: list[Key], manifest: str, old: str) -> KubeStep:
    role = spec.replicas[name].role
    selector = f"{REPLICA_LABEL}={name}"
    workload = _workload(keys)
    timeout = load_budget_s(spec) + 300
    commands = [
        f"kubectl apply --dry-run=server -f {manifest} -l {selector}",
        f"kubectl diff -f {manifest} -l {selector}",
        f"kubectl apply -f {manifest} -l {selector}",
    ]
    rollback = [f"{old} -l {selector}"]
    if workload is not None:
        kind = "deployment" if workload[0] == "Deployment" else "leaderworkerset"
        if kind == "deployment":
            commands.append(f"kubectl rollout status deployment/{workload[1]} --timeout={timeout}s")
            rollback.insert(0, f"kubectl rollout undo deployment/{workload[1]}")
        else:
            commands.append(
                f"kubectl wait --for=condition=Available leaderworkerset/{workload[1]} "
                f"--timeout={timeout}s"
            )
    label = spec.telemetry.label
    watch = (
        f"kubectl get pods -l {selector} -L {label} -w",
        f"kubectl logs -l {selector} -c engine --tail=50 -f",
    )
    return KubeStep(
        title=f"replica {name}" + (f" ({role})" if role else ""),
        objects=tuple(keys),
        commands=tuple(commands),
        watch=watch,
        rollback=tuple(rollback),
    )


def kube_plan(
    old: TierSpec,
    new: TierSpec,
    manifest: str = "tier.k8s.yaml",
    old_manifest: str | None = None,
    old_spec: str = "OLD_SPEC",
) -> KubePlan:
    """The plan from ``old``'s rendering to ``new``'s (``manifest``: where the new rendering
    is; ``old_manifest``: a kept copy of the previous one, for rollback, else the rollback
    renders ``old_spec``, the old spec's path, on the spot)."""
    old_objects = old_rendering(old_manifest, old_spec)
    before = _by_key(kube_objects(old).objects)
    after = _by_key(kube_objects(new).objects)
    changed = [k for k in after if k in before and after[k] != before[k]]
    added = [k for k in after if k not in before]
    removed = [k for k in before if k not in after]
    untouched = [k for k in after if k in before and after[k] == before[k]]
    moving = set(changed) | set(added)
    per_replica: dict[str, list[Key]] = {}
    shared: list[Key] = []
    for key in after:
        if key not in moving:
            continue
        replica = _replica_of(after[key])
        if replica is not None and replica in new.replicas:
            per_replica.setdefault(replica, []).append(key)
        else:
            shared.append(key)
    order = {"canary": 0, None: 1, "control": 2}
    names = sorted(
        per_replica, key=lambda n: (order[new.replicas[n].role], list(new.replicas).index(n))
    )
    steps = [_replica_step(new, n, per_replica[n], manifest, old_objects) for n in names]
    if shared:
        objs = " ".join(f"{k.lower()}/{n}" for k, n in shared)
        steps.append(
            KubeStep(
                title="the tier's shared objects (proxy, monitoring)",
                objects=tuple(shared),
                commands=(
                    f"kubectl apply --dry-run=server -f {manifest}",
                    f"kubectl diff -f {manifest}",
                    f"kubectl apply -f {manifest}",
                ),
                watch=(f"kubectl get {objs}",),
            )
        )
    if removed:
        objs = " ".join(f"{k.lower()}/{n}" for k, n in removed)
        steps.append(
            KubeStep(
                title="objects no longer rendered",
                objects=tuple(removed),
                commands=(f"kubectl delete {objs}",),
            )
        )
    return KubePlan(tuple(changed), tuple(added), tuple(removed), tuple(untouched), tuple(steps))
