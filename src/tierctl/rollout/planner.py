"""Build a rollout plan between two compose files.

Order of steps, and why:

1. removed services, engines first: a scoped ``down`` with the OLD file, before anything is
   applied, because compose-manager removes a service missing from the applied file as an
   orphan after only a short grace;
2. changed engine replicas, canaries first, one replica per step, so the others carry traffic;
3. added engine replicas;
4. the collector, alone, when it changed or any engine's labels or log tags changed: it keeps
   old static labels until recreated;
5. other changed services (exporters, ...), one per step;
6. protected services (proxy, registrar) only when ``--allow`` names them; otherwise a plan
   that needs them changed is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierctl.engines import running_argv
from tierctl.errors import ContractViolation, InputError
from tierctl.rollout.diff import diff_service
from tierctl.rollout.gates import COLLECTOR_GATES, engine_gates
from tierctl.rollout.normalise import load_merged_services
from tierctl.rollout.plan_schema import Action, Plan, ServiceChange, Side, Step
from tierctl.rollout.roles import REPLICA_LABEL, VARIANT_LABEL, ServiceRole, infer_role
from tierctl.rollout.source import LoadedSource, read_source

#: Placeholder for an engine step's gates: :func:`engine_gates` fills them from its command.
ENGINE_GATES = ["<engine>"]


@dataclass(frozen=True)
class PlanOptions:
    """What the planner needs besides the two files.

    Attributes:
        protected_roles: Roles a rollout never recreates unless allowed.
        protected_services: Further service names never recreated unless allowed.
        allow: Protected services the operator allows this plan to change.
        roles: Explicit roles (from the spec or options); they win over inference.
        variant_label: The label key carrying the variant (the spec's ``telemetry.label``).
        profiles: The active compose profiles: only the services compose runs with them are
            planned; None: every service of the files.
    """

    protected_roles: frozenset[str] = frozenset({"proxy", "registrar"})
    protected_services: frozenset[str] = frozenset()
    allow: frozenset[str] = frozenset()
    roles: Mapping[str, ServiceRole] = field(default_factory=dict)
    variant_label: str = VARIANT_LABEL
    profiles: tuple[str, ...] | None = None


def plan_files(
    old: str | Sequence[str],
    new: str | Sequence[str],
    options: PlanOptions | None = None,
    repo: Path | None = None,
) -> Plan:
    """Read OLD and NEW (paths or ``git:REF:PATH``) and plan the rollout between them.

    Args:
        old: The compose file running now (several: merged like ``docker compose -f``).
        new: The compose file to roll out (several: merged the same way).
        options: Protection, allowances and roles.
        repo: The repository for ``git:`` sources.

    Returns:
        The plan.

    Raises:
        InputError: A source cannot be read or parsed.
        ContractViolation: The plan would change a protected service that is not allowed.
    """
    olds = [old] if isinstance(old, str) else list(old)
    news = [new] if isinstance(new, str) else list(new)
    return build_plan(
        [read_source(f, repo) for f in olds],
        [read_source(f, repo) for f in news],
        options or PlanOptions(),
    )


def _side_services(
    sources: LoadedSource | Sequence[LoadedSource], profiles: Sequence[str] | None
) -> dict[str, dict[str, Any]]:
    """One side's services: its files merged like ``docker compose -f a -f b``."""
    files = [sources] if isinstance(sources, LoadedSource) else list(sources)
    return load_merged_services(
        [(f.text, f.ref.spec, f.folder) for f in files], profiles=profiles
    ).services


def build_plan(
    old: LoadedSource | Sequence[LoadedSource],
    new: LoadedSource | Sequence[LoadedSource],
    options: PlanOptions,
) -> Plan:
    """Plan the rollout between two loaded sources (see the module docstring for the order).

    Phases: classify every service's change; refuse what touches protected services without
    an allowance; order the steps (one function per group of the module docstring); number
    them and attach argv, gates and rollbacks.
    """
    olds = [old] if isinstance(old, LoadedSource) else list(old)
    news = [new] if isinstance(new, LoadedSource) else list(new)
    a = _side_services(olds, options.profiles)
    b = _side_services(news, options.profiles)
    names = list(b) + [n for n in a if n not in b]
    _check_allow(options.allow, names)
    changes = [_change(n, a.get(n), b.get(n), options) for n in names]
    protected = {c.service for c in changes if _is_protected(c, options)}
    _refuse_protected(changes, protected, options.allow)
    engines = [c for c in changes if c.role == "engine" and c.service not in protected]
    steps = [
        *_removals(changes),
        *_engine_steps(engines),
        *_collector_steps(changes, protected, _telemetry_changed(engines)),
        *_other_steps(changes, protected),
        *_allowed_steps(changes, protected),
    ]
    built = [
        _step(i + 1, action, c, side, why, gates, a if side == "old" else b)
        for i, (action, c, side, why, gates) in enumerate(steps)
    ]
    touched = {s.service for s in built}
    by_name = {c.service: c for c in changes}
    return Plan(
        source=olds[0].ref,
        target=news[0].ref,
        source_overrides=[f.ref for f in olds[1:]],
        target_overrides=[f.ref for f in news[1:]],
        services=[by_name[n] for n in names],
        steps=built,
        untouched=[n for n in names if n not in touched],
        allowed=sorted(options.allow),
        variant_label=options.variant_label,
    )


#: One planned step before numbering: action, the change, the file it applies, why, gates.
_Draft = tuple[Action, ServiceChange, Side, str, list[str]]


def _check_allow(allow: frozenset[str], names: list[str]) -> None:
    unknown = sorted(allow - set(names))
    if unknown:
        raise InputError(
            f"`allow` names services that are in neither file: {', '.join(unknown)}",
            rule="`allow` names protected services of OLD or NEW",
            value=unknown,
            fix=f"use one of: {', '.join(names)}",
            params=("allow",),
        )


def _refuse_protected(
    changes: list[ServiceChange], protected: set[str], allow: frozenset[str]
) -> None:
    refused = [
        c
        for c in changes
        if c.service in protected and c.change != "unchanged" and c.service not in allow
    ]
    if refused:
        what = "; ".join(
            f"{c.service} ({c.role}, {c.change}: {', '.join(c.reasons) or c.change})"
            for c in refused
        )
        raise ContractViolation(
            f"the plan would change protected services: {what}",
            rule="a rollout never recreates the proxy, the registrar or other protected services",
            value=[c.service for c in refused],
            fix="render NEW without changing them, or pass "
            + " ".join(f"`allow` {c.service}" for c in refused)
            + " if that is intended",
            params=("allow",),
        )


def _removals(changes: list[ServiceChange]) -> list[_Draft]:
    """1. Removed services, engines first, each a scoped ``down`` with OLD."""
    removed = [c for c in changes if c.change == "removed"]
    return [
        ("down", c, "old", "removed in NEW: scoped down with OLD before applying", [])
        for c in sorted(removed, key=lambda c: c.role != "engine")
    ]


def _engine_steps(engines: list[ServiceChange]) -> list[_Draft]:
    """2-3. Changed engine replicas (canaries first), then added ones, one per step."""
    steps: list[_Draft] = []
    changed = [c for c in engines if c.change == "recreate"]
    for c in sorted(changed, key=lambda c: c.replica_role != "canary"):
        why = f"{c.replica_role or 'replica'} changed: {', '.join(c.reasons)}"
        steps.append(("recreate", c, "new", why, list(ENGINE_GATES)))
    for c in (c for c in engines if c.change == "added"):
        steps.append(("up", c, "new", "added in NEW", list(ENGINE_GATES)))
    return steps


def _telemetry_changed(engines: list[ServiceChange]) -> bool:
    """Whether an engine's labels or log tags changed, or an engine came or went."""
    return any(
        {"labels", "logging"} & set(c.reasons) or c.change in ("added", "removed") for c in engines
    )


def _collector_steps(
    changes: list[ServiceChange], protected: set[str], telemetry: bool
) -> list[_Draft]:
    """4. The collector, alone, when it changed or the engines' telemetry did."""
    steps: list[_Draft] = []
    for c in changes:
        if c.role != "collector" or c.service in protected or c.change == "removed":
            continue
        if c.change != "unchanged" or telemetry:
            why = (
                f"collector changed: {', '.join(c.reasons)}"
                if c.change == "recreate"
                else "added in NEW"
                if c.change == "added"
                else "engine labels changed; the collector keeps old static labels until recreated"
            )
            action: Action = "up" if c.change == "added" else "recreate"
            steps.append((action, c, "new", why, list(COLLECTOR_GATES)))
    return steps


def _other_steps(changes: list[ServiceChange], protected: set[str]) -> list[_Draft]:
    """5. Other changed or added services (exporters, ...), one per step."""
    return [
        (_apply(c), c, "new", f"changed: {', '.join(c.reasons) or c.change}", [])
        for c in changes
        if c.role not in ("engine", "collector")
        and c.service not in protected
        and c.change in ("recreate", "added")
    ]


def _allowed_steps(changes: list[ServiceChange], protected: set[str]) -> list[_Draft]:
    """6. Protected services the operator allowed."""
    return [
        (_apply(c), c, "new", f"protected, allowed by the operator: {', '.join(c.reasons)}", [])
        for c in changes
        if c.service in protected and c.change in ("recreate", "added")
    ]


def _apply(c: ServiceChange) -> Action:
    return "up" if c.change == "added" else "recreate"


def _is_protected(c: ServiceChange, options: PlanOptions) -> bool:
    return c.role in options.protected_roles or c.service in options.protected_services


def _change(
    name: str, old: dict[str, Any] | None, new: dict[str, Any] | None, options: PlanOptions
) -> ServiceChange:
    present = new if new is not None else old
    assert present is not None
    role = infer_role(name, present, options.roles)
    old_variant = _variant(old, options.variant_label)
    new_variant = _variant(new, options.variant_label)
    replica_label = (present.get("labels") or {}).get(REPLICA_LABEL)
    replica = str(replica_label) if role.role == "engine" and replica_label else None
    if old is None or new is None:
        return ServiceChange(
            service=name,
            change="added" if old is None else "removed",
            role=role.role,
            replica_role=role.replica_role,
            replica=replica,
            old_variant=old_variant,
            new_variant=new_variant,
        )
    d = diff_service(old, new)
    return ServiceChange(
        service=name,
        change="recreate" if d.reasons else "unchanged",
        role=role.role,
        replica_role=role.replica_role,
        replica=replica,
        reasons=list(d.reasons),
        details=list(d.details),
        old_variant=old_variant,
        new_variant=new_variant,
    )


def _variant(svc: Mapping[str, Any] | None, label: str) -> str | None:
    if svc is None:
        return None
    value = (svc.get("labels") or {}).get(label)
    return None if value is None else str(value)


def _step(
    index: int,
    action: Action,
    c: ServiceChange,
    side: Side,
    why: str,
    gates: list[str],
    services: Mapping[str, dict[str, Any]],
) -> Step:
    svc = services.get(c.service, {})
    argv = running_argv(svc)
    if gates == ENGINE_GATES:
        gates = engine_gates(argv)
    if action == "down":
        rollback = "up the service again from OLD, scoped to it"
    elif action == "up":
        rollback = "scoped down of the service (it did not exist in OLD)"
    else:
        rollback = "recreate the service from OLD, scoped to it"
    return Step(
        id=f"{index:02d}-{action}-{c.service}",
        action=action,
        service=c.service,
        role=c.role,
        side=side,
        why=why,
        gates=gates,
        container_name=svc.get("container_name"),
        variant=c.new_variant if side == "new" else c.old_variant,
        expected_argv=argv if c.role == "engine" else [],
        rollback=rollback,
    )
