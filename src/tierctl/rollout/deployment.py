"""One side of a rollout as the drivers see it: the file, where it lives, its services."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tierctl.engines import running_argv
from tierctl.rollout.argv import parse_argv
from tierctl.rollout.plan_schema import Side, SourceRef

#: SGLang's default port when a command does not say.
DEFAULT_ENGINE_PORT = 30000


@dataclass(frozen=True)
class Deployment:
    """A compose file (and the override files merged over it) on one side of a plan.

    Attributes:
        side: ``old`` or ``new``.
        ref: Where the first file was read from (path or git ref), with its digest.
        text: The first file's text.
        services: The normalised services, every file merged (``docker compose -f A -f B``).
        overrides: The override files after the first, in ``-f`` order: (ref, text) each.
    """

    side: Side
    ref: SourceRef
    text: str
    services: dict[str, dict[str, Any]]
    overrides: tuple[tuple[SourceRef, str], ...] = ()

    @property
    def files(self) -> tuple[tuple[SourceRef, str], ...]:
        """Every file of the side, in ``-f`` order: the first, then the overrides."""
        return ((self.ref, self.text), *self.overrides)

    def argv(self, service: str) -> list[str]:
        """The full command of a service as it runs (entrypoint then command; without an
        ``entrypoint`` key, the image's own: ``vllm/vllm-openai`` runs ``vllm serve``)."""
        return running_argv(self.services.get(service, {}))

    def engine_port(self, service: str) -> int:
        """The port an engine service listens on, from its ``--port`` flag."""
        value = parse_argv(self.argv(service)).flags.get("port")
        return int(value) if isinstance(value, str) and value.isdigit() else DEFAULT_ENGINE_PORT
