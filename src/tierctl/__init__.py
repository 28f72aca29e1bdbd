"""tierctl: one declarative spec for an LLM serving tier on docker compose.

declare -> render -> validate -> simulate -> load-test -> roll out -> read out.
"""

from tierctl.errors import (
    ComposeInputError,
    ContractViolation,
    GateFailed,
    InputError,
    RuntimeFailure,
    SpecError,
    SpecErrors,
    TierctlError,
)
from tierctl.render import render_compose
from tierctl.spec import ResolvedReplica, Tier, TierSpec, load_spec, load_spec_text, resolve_tier

__all__ = [
    "ComposeInputError",
    "ContractViolation",
    "GateFailed",
    "InputError",
    "ResolvedReplica",
    "RuntimeFailure",
    "SpecError",
    "SpecErrors",
    "Tier",
    "TierSpec",
    "TierctlError",
    "load_spec",
    "load_spec_text",
    "render_compose",
    "resolve_tier",
]
