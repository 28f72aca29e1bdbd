"""The tier spec: models, loading with located errors, and each replica's effective view."""

from tierctl.spec.effective import (
    ResolvedReplica,
    Tier,
    argv_from_flags,
    flag_tokens,
    resolve_tier,
)
from tierctl.spec.loader import load_spec, load_spec_text
from tierctl.spec.rules import RuleFailure, check_rules
from tierctl.spec.tier_spec import TierSpec

__all__ = [
    "ResolvedReplica",
    "RuleFailure",
    "Tier",
    "TierSpec",
    "argv_from_flags",
    "check_rules",
    "flag_tokens",
    "load_spec",
    "load_spec_text",
    "resolve_tier",
]
