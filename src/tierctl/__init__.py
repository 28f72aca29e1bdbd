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
    TierctlError,
)

__all__ = [
    "ComposeInputError",
    "ContractViolation",
    "GateFailed",
    "InputError",
    "RuntimeFailure",
    "SpecError",
    "TierctlError",
]
