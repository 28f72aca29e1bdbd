"""Reading what a ``docker compose --dry-run up`` would do from its output.

Compose prints one line per resource and state, e.g.
``DRY-RUN MODE -  Container model-r2  Recreated``. Container lines are mapped back to service
names through ``container_name`` or compose's ``<project>-<service>-<n>`` naming; networks and
volumes are ignored. A container the mapping does not know counts as an extra service, so an
unexpected action is refused rather than ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_LINE = re.compile(r"Container\s+(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)\s+(?P<state>[A-Za-z]+)")
_CHANGE = ("Creat", "Recreat")
_REMOVE = ("Remov", "Stop", "Kill")


@dataclass(frozen=True)
class DryRunResult:
    """What a dry run would do.

    Attributes:
        changed: Services that would be created or recreated.
        removed: Services that would be stopped or removed without being recreated.
        lines: The raw output, for messages.
    """

    changed: frozenset[str]
    removed: frozenset[str]
    lines: tuple[str, ...] = ()


def parse_dry_run(
    lines: Iterable[str], services: Mapping[str, Mapping[str, Any]], project: str | None = None
) -> DryRunResult:
    """Parse compose dry-run output.

    Args:
        lines: The output lines (stdout and stderr).
        services: The normalised services of the file applied, to map containers to services.
        project: The compose project name, for default container names.

    Returns:
        The services changed and removed.
    """
    by_container: dict[str, str] = {}
    for name, svc in services.items():
        by_container[str(svc.get("container_name") or name)] = name
        by_container[name] = name
        if project:
            for sep in ("-", "_"):
                by_container[f"{project}{sep}{name}{sep}1"] = name
    kept = tuple(lines)
    changed: set[str] = set()
    removed: set[str] = set()
    for line in kept:
        m = _LINE.search(line)
        if m is None:
            continue
        service = by_container.get(m.group("name"), m.group("name"))
        state = m.group("state")
        if state.startswith(_CHANGE):
            changed.add(service)
        elif state.startswith(_REMOVE):
            removed.add(service)
    return DryRunResult(frozenset(changed), frozenset(removed - changed), kept)


# Compose's dry run cannot copy a service's inline `configs: content:` into the container it
# only pretends to create: it fails after planning that container, with this line (measured
# on Compose 2.40.3 against Docker Engine 20.10; a `file:` config dry-runs cleanly).
_CONFIG_COPY = re.compile(r"DRY-RUN MODE -\s+Could not find the file / in container \S+\s*$")
_PLANNED = re.compile(r"DRY-RUN MODE -\s+Container\s+\S+\s+[A-Za-z]+\s*$")

#: Said instead, when a dry run stopped there (an agent or driver reports it with the plan).
CONFIG_COPY_NOTE = (
    "compose's dry run stopped at copying an inline config into the container it had "
    "planned (a Compose dry-run limitation, not a fault of the file); what it planned is above"
)


def stopped_at_config_copy(lines: Iterable[str]) -> bool:
    """Whether a failed dry run failed only where Compose copies inline configs, after it had
    planned its containers: every non-blank line is a planned container or that copy's line,
    and both kinds are there (any other line, an error of the file or the engine, is a real
    failure)."""
    kinds = set()
    for line in lines:
        if not line.strip():
            continue
        if _CONFIG_COPY.search(line):
            kinds.add("copy")
        elif _PLANNED.search(line):
            kinds.add("planned")
        else:
            return False
    return kinds == {"copy", "planned"}
