"""Recognising credentials: the rules live in :mod:`tierctl.credentials` (used by the spec
checks too, which must not import ``contracts``); re-exported here for the contracts."""

from __future__ import annotations

from tierctl.credentials import (
    embedded_credential,
    is_secret_flag,
    is_switch,
    literal_secret,
    looks_secret_name,
    looks_secret_value,
    redact_argv,
    secret_positions,
)

__all__ = [
    "embedded_credential",
    "is_secret_flag",
    "is_switch",
    "literal_secret",
    "looks_secret_name",
    "looks_secret_value",
    "redact_argv",
    "secret_positions",
]
