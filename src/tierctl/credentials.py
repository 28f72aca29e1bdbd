"""Recognising credentials, so they are flagged when literal and never echoed in reports.

A name says it holds a credential when one of its words (split at ``_``, ``-`` and ``.``) is
a credential word: ``HF_TOKEN``, ``OPENAI_API_KEY``, ``WEBUI_AUTH_TOKEN``. Words that only
start like one do not count (``TOKENIZERS_PARALLELISM``), and a name whose last word says it
holds where a credential is rather than the credential (``HF_TOKEN_PATH``, ``..._FILE``) is
not one. A switch value (``true``, ``false``, ``0``, ``1``, ``on``, ``off``) is never a
credential, so ``WEBUI_AUTH=false`` passes. A ``${VAR:-literal}`` default is a literal.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

__all__ = [
    "is_secret_flag",
    "is_switch",
    "literal_secret",
    "looks_secret_name",
    "looks_secret_value",
    "mask",
    "redact_argv",
    "secret_forms",
    "secret_positions",
]

_SECRET_WORDS = frozenset(
    {"TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASS", "APIKEY"}
    | {"CREDENTIAL", "CREDENTIALS", "AUTH", "BEARER", "PRIVATEKEY", "ACCESSKEY", "SECRETKEY"}
    | {"AUTHORIZATION", "COOKIE"}
)
# Two-word credentials: API_KEY, ACCESS_KEY, PRIVATE_KEY, SECRET_KEY (KEY alone is too wide:
# CACHE_KEY, PARTITION_KEY).
_SECRET_PAIRS = frozenset({("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY")})
# A last word that names where the credential is, not the credential.
_LOCATION_WORDS = frozenset({"PATH", "FILE", "DIR", "URL", "URI", "ENDPOINT", "HOST", "NAME"})
_SWITCH = frozenset({"true", "false", "yes", "no", "on", "off", "0", "1", "none", "disabled"})
_WORD_SPLIT = re.compile(r"[_\-.]+")
# Shapes of real credentials: Hugging Face, OpenAI-style, GitHub, AWS, Slack, JWT.
_SECRET_VALUE = re.compile(
    r"^(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+"
    r"|Bearer\s+[A-Za-z0-9._~+/=-]{16,})$"
)
_SECRET_FLAG = re.compile(r"^--[a-z0-9-]*(token|api-key|secret|password)$")


def looks_secret_name(name: str) -> bool:
    """Whether an env var name says it holds a credential (see the module docstring)."""
    words = [w for w in _WORD_SPLIT.split(name.upper()) if w]
    if not words or words[-1] in _LOCATION_WORDS:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))


def is_switch(value: str) -> bool:
    """Whether a value is an on/off switch or empty (never a credential)."""
    return value.strip().lower() in _SWITCH or not value.strip()


def literal_secret(name: str, value: str) -> bool:
    """Whether ``name=value`` puts a literal credential in a file.

    A ``${VAR}`` reference is not; ``${VAR:-default}`` with a non-switch default is (the
    default is written in the file and used whenever VAR is unset).
    """
    if is_switch(value):
        return False
    for default in _reference_defaults(value):
        if not is_switch(default) and (looks_secret_name(name) or looks_secret_value(default)):
            return True
    if "${" in value or value.startswith("$"):
        return False
    return looks_secret_name(name) or looks_secret_value(value)


_DEFAULT = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?[-+]([^}]*)\}")


def _reference_defaults(value: str) -> list[str]:
    """The literal defaults of ``${VAR:-x}`` / ``${VAR-x}`` / ``${VAR:+x}`` in ``value``."""
    return [m.group(1) for m in _DEFAULT.finditer(value) if m.group(1)]


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
        if not value:
            continue
        defaults = _reference_defaults(value)
        if "${" not in value or any(not is_switch(d) for d in defaults):
            out.append((i, value))
    return out


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The argv with literal credentials replaced by ``<literal, N chars>``."""
    out = list(argv)
    for i, value in secret_positions(argv):
        masked = f"<literal, {len(value)} chars>"
        out[i] = out[i].replace(value, masked) if out[i] != value else masked
    return out


def secret_forms(secret: str) -> list[str]:
    """Every way ``secret`` may appear in text tierctl writes, longest first: as is, JSON-escaped
    (a value holding ``"``, ``\\`` or non-ASCII is written escaped in a journal line or an
    echoed request body), and as Python's repr writes it inside quotes."""
    import json

    forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    forms.add(repr(secret)[1:-1])
    return sorted((f for f in forms if f), key=len, reverse=True)


def mask(text: str, secrets: Sequence[str], replacement: str = "***") -> str:
    """``text`` with every form of every secret (:func:`secret_forms`) replaced."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        for form in secret_forms(secret):
            text = text.replace(form, replacement)
    return text


def mask_tree(node: Any, secrets: Sequence[str], replacement: str = "***") -> Any:
    """``node`` (JSON-like: dicts, lists, strings) with every string :func:`mask`-ed.

    Masking each string before the document is serialised catches a secret that the text
    already holds escaped (an echoed request body): escaping it once more would hide it from
    :func:`mask` on the serialised line.
    """
    if isinstance(node, str):
        return mask(node, secrets, replacement)
    if isinstance(node, dict):
        return {k: mask_tree(v, secrets, replacement) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [mask_tree(v, secrets, replacement) for v in node]
    return node
