"""Recognising credentials, so they are flagged when literal and never echoed in reports."""

from __future__ import annotations

import re
from collections.abc import Sequence

_SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH)", re.I
)
# Shapes of real credentials: Hugging Face, OpenAI-style, GitHub, AWS, Slack, JWT.
_SECRET_VALUE = re.compile(
    r"^(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+)$"
)
_SECRET_FLAG = re.compile(r"^--[a-z0-9-]*(token|api-key|secret|password)$")


def looks_secret_name(name: str) -> bool:
    """Whether an env var name says it holds a credential."""
    return bool(_SECRET_NAME.search(name))


def looks_secret_value(value: str) -> bool:
    """Whether a value has the shape of a known kind of token."""
    return bool(_SECRET_VALUE.match(value))


def is_secret_flag(token: str) -> bool:
    """Whether a flag (``--hf-token``, ``--api-key=...``) carries a credential."""
    return bool(_SECRET_FLAG.match(token.split("=", 1)[0]))


def secret_positions(argv: Sequence[str]) -> list[tuple[int, str]]:
    """(index, literal value) of every credential in an argv, references excluded."""
    out: list[tuple[int, str]] = []
    for i, token in enumerate(argv):
        if token.startswith("--") and "=" in token and is_secret_flag(token):
            value = token.split("=", 1)[1]
        elif (i > 0 and is_secret_flag(argv[i - 1]) and not token.startswith("--")) or (
            looks_secret_value(token)
        ):
            value = token
        else:
            continue
        if value and "${" not in value:
            out.append((i, value))
    return out


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The argv with literal credentials replaced by ``<literal, N chars>``."""
    out = list(argv)
    for i, value in secret_positions(argv):
        masked = f"<literal, {len(value)} chars>"
        out[i] = out[i].replace(value, masked) if out[i] != value else masked
    return out
