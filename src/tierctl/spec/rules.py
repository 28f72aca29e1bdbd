"""Pairing rules: when a replica's flags/env match ``when``, ``require`` must match too."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tierctl.spec.effective import flag_tokens
from tierctl.spec.tier_spec import Condition, Rule, TierSpec


@dataclass(frozen=True)
class RuleFailure:
    """A rule whose condition holds on a replica while its requirement does not."""

    index: int
    rule: Rule
    missing: tuple[str, ...]  # e.g. ("env SGLANG_DSA_INDEXER_QSPLIT=1 (found: unset)",)

    @property
    def name(self) -> str:
        """The rule's id, or its position in the spec."""
        return self.rule.id or f"rules[{self.index}]"


def _flag_matches(flags: dict[str, Any], name: str, wanted: Any) -> bool:
    have = flags.get(name)
    if wanted is False:
        return have is None or have is False
    return have is not None and flag_tokens(name, have) == flag_tokens(name, wanted)


def unmet(cond: Condition, flags: dict[str, Any], env: Mapping[str, str | None]) -> list[str]:
    """The parts of ``cond`` that do not hold, described for a message (empty = holds)."""
    out: list[str] = []
    for name, wanted in cond.args.items():
        if not _flag_matches(flags, name, wanted):
            found = " ".join(flag_tokens(name, flags[name])) if name in flags else "unset"
            out.append(f"{' '.join(flag_tokens(name, wanted)) or f'no --{name}'} (found: {found})")
    for key, wanted_env in cond.env.items():
        if env.get(key) != wanted_env:
            out.append(f"env {key}={wanted_env} (found: {env.get(key, 'unset')})")
    return out


def check_rules(
    spec: TierSpec, flags: dict[str, Any], env: Mapping[str, str | None]
) -> list[RuleFailure]:
    """Every rule of ``spec`` broken by one replica's effective flags and env."""
    failures: list[RuleFailure] = []
    for index, rule in enumerate(spec.rules):
        if unmet(rule.when, flags, env):
            continue
        missing = unmet(rule.require, flags, env)
        if missing:
            failures.append(RuleFailure(index, rule, tuple(missing)))
    return failures
