"""Everything the contracts look at, computed once: the spec's view and the files' view."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tierctl.compose import ComposeFile, ComposeService
from tierctl.compose.argv import FlagUse, flags_dict, parse_flags, split_launcher
from tierctl.engine_catalog import Catalog
from tierctl.spec.effective import ResolvedReplica, Tier, engine_profile, launcher


@dataclass(frozen=True)
class ReplicaView:
    """One replica: what the spec says and what the compose file carries."""

    expected: ResolvedReplica
    service: ComposeService | None
    argv: tuple[str, ...]  # actual command, () when missing
    flag_start: int
    uses: tuple[FlagUse, ...]
    flags: dict[str, Any]  # actual flags in the spec's effective-flags shape
    env: dict[str, str]  # actual environment (unset values as "")


@dataclass(frozen=True)
class Context:
    """Input of every contract check."""

    tier: Tier
    compose: ComposeFile
    catalog: Catalog | None
    replicas: dict[str, ReplicaView]

    def other_replicas(self, name: str) -> list[ReplicaView]:
        """Every replica except ``name``, in spec order."""
        return [v for n, v in self.replicas.items() if n != name]


def build_context(tier: Tier, compose: ComposeFile, catalog: Catalog | None) -> Context:
    """Pair each replica of the spec with its compose service and parse its argv once."""
    spec_launcher = launcher(tier.spec)
    profile = engine_profile(tier.spec)
    views: dict[str, ReplicaView] = {}
    for name, expected in tier.replicas.items():
        service = compose.services.get(expected.service)
        argv = service.command or () if service is not None else ()
        start = split_launcher(argv, spec_launcher)
        # The engine's positional arguments (vLLM's `vllm serve MODEL`) sit between the
        # launcher and the first flag; they are read under their spec names.
        positional: dict[str, str] = {}
        if start == len(spec_launcher):
            start, positional = profile.positional_span(argv, spec_launcher)
        uses = parse_flags(argv, start, catalog)
        env = {k: v or "" for k, v in (service.environment if service else {}).items()}
        views[name] = ReplicaView(
            expected=expected,
            service=service,
            argv=argv,
            flag_start=start,
            uses=tuple(uses),
            flags={**positional, **profile.spec_flags(flags_dict(uses), catalog)},
            env=env,
        )
    return Context(tier=tier, compose=compose, catalog=catalog, replicas=views)
