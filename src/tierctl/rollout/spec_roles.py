"""Roles and protection taken from a tier spec, when the operator passes ``--spec``.

The spec is the authority: replicas are engines with their canary/control role, every other
service has its declared role, a service whose ``rollout`` policy is ``never`` (the default
for the proxy and the registrar) is protected, and the variant is read from the label the
spec's ``telemetry.label`` names.
"""

from __future__ import annotations

from pathlib import Path

from tierctl.rollout.planner import PlanOptions
from tierctl.rollout.roles import ServiceRole
from tierctl.spec import load_spec, resolve_tier


def options_from_spec(path: str | Path, allow: frozenset[str] = frozenset()) -> PlanOptions:
    """Plan options from a tier spec.

    Args:
        path: The tier spec.
        allow: Protected services the operator allows the plan to change.

    Returns:
        Options whose roles, protected services and variant label come from the spec.

    Raises:
        SpecError: The spec is invalid (exit 2, located).
    """
    tier = resolve_tier(load_spec(path))
    roles: dict[str, ServiceRole] = {
        r.service: ServiceRole("engine", r.role) for r in tier.replicas.values()
    }
    protected: set[str] = set()
    for name, svc in tier.services.items():
        roles[name] = ServiceRole(str(svc.role))
        if svc.recreate_policy == "never":
            protected.add(name)
    return PlanOptions(
        protected_roles=frozenset(),
        protected_services=frozenset(protected),
        allow=allow,
        roles=roles,
        variant_label=tier.spec.telemetry.label,
    )
