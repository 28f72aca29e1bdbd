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
    """A compose file on one side of a plan.

    Attributes:
        side: ``old`` or ``new``.
        ref: Where it was read from (path or git ref), with its digest.
        text: The file's text.
        services: The normalised services.
    """

    side: Side
    ref: SourceRef
    text: str
    services: dict[str, dict[str, Any]]

    def argv(self, service: str) -> list[str]:
        """The full command of a service as it runs (entrypoint then command; without an
        ``entrypoint`` key, the image's own: ``vllm/vllm-openai`` runs ``vllm serve``)."""
        return running_argv(self.services.get(service, {}))

    def engine_port(self, service: str) -> int:
        """The port an engine service listens on, from its ``--port`` flag."""
        value = parse_argv(self.argv(service)).flags.get("port")
        return int(value) if isinstance(value, str) and value.isdigit() else DEFAULT_ENGINE_PORT
