"""The tier spec: models, loading with located errors, and each replica's effective view.

The names are imported on first use (PEP 562 ``__getattr__``), so importing one submodule
(``spec.checks``' regexes, say) does not build the spec's pydantic models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: Each exported name -> the module that defines it.
_WHERE = {
    "ResolvedReplica": "tierctl.spec.effective",
    "Tier": "tierctl.spec.effective",
    "argv_from_flags": "tierctl.spec.effective",
    "flag_tokens": "tierctl.spec.effective",
    "resolve_tier": "tierctl.spec.effective",
    "load_spec": "tierctl.spec.loader",
    "load_spec_text": "tierctl.spec.loader",
    "RuleFailure": "tierctl.spec.rules",
    "check_rules": "tierctl.spec.rules",
    "TierSpec": "tierctl.spec.tier_spec",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(where), name)


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
