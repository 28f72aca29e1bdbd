"""The interface every rollout driver implements."""

from __future__ import annotations

import re
from typing import Protocol

from tierctl.errors import InputError, RuntimeFailure
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.dryrun import DryRunResult


class HostUnreachable(RuntimeFailure):
    """The host gave no answer at all (no connection, a time-out, a stream cut off) through
    every retry: what it did with the call is unknown, and it says nothing about NEW. The
    executor then neither rolls back (nothing can reach the host) nor marks the step failed:
    resuming re-runs the step, whose calls are idempotent, once the host answers."""


class Driver(Protocol):
    """Applies compose changes one service at a time.

    Every method is scoped to the services it is given and never acts on others; an empty
    list is a programming error (compose tools read it as "every service").
    """

    name: str

    def dry_run(self, dep: Deployment, services: list[str]) -> DryRunResult:
        """What recreating ``services`` from ``dep`` would do, without doing it."""
        ...

    def apply(self, dep: Deployment, services: list[str]) -> None:
        """Recreate ``services`` from ``dep`` (create them when missing)."""
        ...

    def down(self, dep: Deployment, services: list[str]) -> None:
        """Stop and remove ``services`` as ``dep`` defines them."""
        ...

    def endpoint(self, dep: Deployment, service: str) -> str:
        """The base URL the gates use to reach an engine service."""
        ...

    def secrets(self) -> tuple[str, ...]:
        """Secret values this driver holds, to mask should they reach any output."""
        ...


# Compose's own rule for service names (compose-spec: ^[a-zA-Z0-9._-]+$); a name that starts
# with "-" would reach `docker compose` as an option, so the first character is stricter.
_SERVICE_NAME = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9._-]*")


def require_services(services: list[str]) -> None:
    """Refuse an empty service list (compose tools read it as every service) and any name
    that is not a compose service name (it would reach a command line as an option).
    """
    if not services:
        raise ValueError("a driver call needs at least one service; empty means all to compose")
    for name in services:
        if not _SERVICE_NAME.fullmatch(name):
            raise InputError(
                "not a compose service name",
                rule="service names match [a-zA-Z0-9_][a-zA-Z0-9._-]*",
                value=name,
                fix="rename the service in the compose file",
            )
