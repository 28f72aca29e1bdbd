"""What each compose service is: an engine replica (canary, control), the collector, the proxy.

The spec knows the roles; a compose file alone does not always say. Roles are taken, in order
of trust, from an explicit map (built from the spec, or ``--role``/``--canary`` options), from
the service's ``tierctl.role`` / ``tierctl.replica-role`` labels, and lastly from what the
service runs (an engine launcher in its command, a collector or exporter image, a name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tierctl.engines import profile_for_argv, running_argv

ROLE_LABEL = "tierctl.role"
REPLICA_ROLE_LABEL = "tierctl.replica-role"
REPLICA_LABEL = "tierctl.replica"
VARIANT_LABEL = "config_variant"

#: Service roles, as the spec names them; ``engine`` is an engine replica.
ROLES = (
    "engine",
    "proxy",
    "registrar",
    "collector",
    "gpu-exporter",
    "downloader",
    "nginx",
    "other",
)


@dataclass(frozen=True)
class ServiceRole:
    """The role of one service.

    Attributes:
        role: One of :data:`ROLES`.
        replica_role: ``canary``, ``control`` or ``None`` (engines only).
    """

    role: str
    replica_role: str | None = None


def is_engine_command(argv: list[str] | None) -> bool:
    """Whether a command runs an inference engine (one with a profile in :mod:`tierctl.engines`,
    or tierctl's simulated one)."""
    if not argv:
        return False
    if profile_for_argv(argv) is not None:
        return True
    for i, tok in enumerate(argv[:-1]):
        if tok == "sim" and argv[i + 1] == "serve" and i > 0 and "tierctl" in " ".join(argv[:i]):
            return True
    return False


def infer_role(
    name: str, svc: Mapping[str, Any], explicit: Mapping[str, ServiceRole] | None = None
) -> ServiceRole:
    """The role of one normalised service.

    Args:
        name: The service name.
        svc: The normalised service definition.
        explicit: Roles given by the spec or the operator; they win.

    Returns:
        The service's role.
    """
    if explicit and name in explicit:
        return explicit[name]
    labels = svc.get("labels") or {}
    replica_role = labels.get(REPLICA_ROLE_LABEL)
    labelled = labels.get(ROLE_LABEL)
    if labelled in ROLES:
        return ServiceRole(str(labelled), replica_role if labelled == "engine" else None)
    if labelled in ("canary", "control"):
        return ServiceRole("engine", str(labelled))
    if is_engine_command(running_argv(svc)):
        return ServiceRole("engine", replica_role)
    image = str(svc.get("image") or "").lower()
    lowered = name.lower()
    if any(
        k in image or k in lowered for k in ("otelcol", "opentelemetry", "prometheus", "collector")
    ):
        return ServiceRole("collector")
    if "registrar" in lowered or "registrar" in image:
        return ServiceRole("registrar")
    if "proxy" in lowered:
        return ServiceRole("proxy")
    if "dcgm" in image or "exporter" in lowered:
        return ServiceRole("gpu-exporter")
    if "nginx" in image or "nginx" in lowered:
        return ServiceRole("nginx")
    if "download" in lowered:
        return ServiceRole("downloader")
    return ServiceRole("other")
