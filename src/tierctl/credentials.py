"""Recognising credentials, so they are flagged when literal and never echoed in reports.

A name says it holds a credential when one of its words (split at ``_``, ``-`` and ``.``) is
a credential word: ``HF_TOKEN``, ``OPENAI_API_KEY``, ``WEBUI_AUTH_TOKEN``. Words that only
start like one do not count (``TOKENIZERS_PARALLELISM``), and a name whose last word says it
holds where a credential is rather than the credential (``HF_TOKEN_PATH``, ``..._FILE``), or
a measure (``CHARS_PER_TOKEN_ESTIMATE``, ``MAX_TOKEN_COUNT``, ``AUTH_TIMEOUT``), is not one.
A switch value (``true``, ``false``, ``0``, ``1``, ``on``, ``off``) or a documentation
placeholder (``<hugging_face_token>``) is never a credential, so ``WEBUI_AUTH=false``
passes. A ``${VAR:-literal}`` default is a literal.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import re
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = [
    "embedded_credential",
    "is_secret_flag",
    "is_switch",
    "literal_secret",
    "looks_secret_name",
    "looks_secret_value",
    "mask",
    "mask_credentials",
    "mask_tree",
    "mask_userinfo",
    "redact_argv",
    "secret_forms",
    "secret_positions",
    "secret_spans",
    "url_password",
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
# A last word that names a measure of tokens or of a credential's life, not the credential:
# CHARS_PER_TOKEN_ESTIMATE, MAX_TOKEN_COUNT, AUTH_TIMEOUT, TOKEN_TTL.
_MEASURE_WORDS = frozenset(
    {"ESTIMATE", "COUNT", "LIMIT", "LIMITS", "SIZE", "LEN", "LENGTH", "BUDGET", "RATIO"}
    | {"RATE", "TIMEOUT", "TTL", "EXPIRY", "LIFETIME", "FACTOR", "MULTIPLIER", "THRESHOLD"}
)
_SWITCH = frozenset({"true", "false", "yes", "no", "on", "off", "0", "1", "none", "disabled"})
_WORD_SPLIT = re.compile(r"[_\-.]+")
# Shapes of real credentials: Hugging Face, OpenAI-style, GitHub, AWS, Slack, JWT.
_SECRET_VALUE = re.compile(
    r"^(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+"
    r"|Bearer\s+[A-Za-z0-9._~+/=-]{16,})$"
)
_SECRET_FLAG = re.compile(r"^--[a-z0-9-]*(token|api-key|secret|password)$")


@functools.lru_cache(maxsize=4096)
def looks_secret_name(name: str) -> bool:
    """Whether an env var name says it holds a credential (see the module docstring)."""
    words = [w for w in _WORD_SPLIT.split(name.upper()) if w]
    if not words or words[-1] in _LOCATION_WORDS or words[-1] in _MEASURE_WORDS:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))


# A documentation placeholder standing where the operator puts theirs: <secret>,
# <hugging_face_token>, <your-api-key>.
_PLACEHOLDER = re.compile(r"^<[A-Za-z0-9 _.-]{1,64}>$")


def is_switch(value: str) -> bool:
    """Whether a value is an on/off switch, empty, or a ``<placeholder>`` (never a
    credential)."""
    text = value.strip()
    return text.lower() in _SWITCH or not text or bool(_PLACEHOLDER.match(text))


@functools.lru_cache(maxsize=8192)
def literal_secret(name: str, value: str) -> bool:
    """Whether ``name=value`` puts a literal credential in a file.

    A ``${VAR}`` reference is not; ``${VAR:-default}`` with a non-switch default is (the
    default is written in the file and used whenever VAR is unset). Whatever the name, a value
    that carries a credential inside it is one (:func:`embedded_credential`: a header
    ``Authorization: Bearer ...``, a password in a URL).
    """
    if is_switch(value):
        return False
    if embedded_credential(value) is not None:
        return True
    for default in _reference_defaults(value):
        if not is_switch(default) and (looks_secret_name(name) or looks_secret_value(default)):
            return True
    if "${" in value or value.startswith("$"):
        return False
    return looks_secret_name(name) or looks_secret_value(value)


# A header that carries a credential, in a header line, a JSON object or a key=value list:
# ``Authorization: Bearer X``, ``{"X-Api-Key": "X"}``, ``Cookie=session=X``.
_HEADER_CREDENTIAL = re.compile(
    r"(?i)(?<![\w-])(?:proxy-authorization|authorization|x-api-key|api-key|x-auth-token"
    r"|x-access-token|cookie)[\"']?\s*[:=]\s*[\"']?\s*"
    r"(?:(?:bearer|basic|token|digest)\s+)?(?P<v>(?:[^\s\"',;}]|\}(?=[^\s\"',;}]))+)"
)
#: A value that is an interpolation reference (``${TOKEN}``, ``$TOKEN``), not a credential.
#: (The value's pattern stops before a ``}``, so ``${TOKEN}`` is seen as ``${TOKEN``.)
#: A default (``${T:-x}``) is a literal and is masked; a required reference's message is not.
_BRACED_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?\?[^${}]*)?")
_PLAIN_REFERENCE = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*")
_VALUE_END = frozenset(" \t\r\n\"',;)]")


def _is_reference(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is a whole interpolation reference and nothing else."""
    after = text[end + 1 : end + 2]
    if _BRACED_REFERENCE.fullmatch(text, start, end):
        return text[end : end + 1] == "}" and (after == "" or after in _VALUE_END)
    if _PLAIN_REFERENCE.fullmatch(text, start, end):
        return text[end : end + 1] in ("", *_VALUE_END)
    return False


# A ``}`` inside a value (``${A}sk-...``) is part of it; one that closes a mapping is not.
_BEARER = re.compile(r"(?i)(?<![\w-])bearer\s+(?P<v>(?:[^\s\"',;}]|\}(?=[^\s\"',;}])){8,})")
_URL_PASSWORD = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^/\s:@]*:(?P<v>[^/\s@]+)@")
# A URL query parameter named for a credential: ``?token=X``, ``&api_key=X``, ``&sig=X``.
_QUERY_CREDENTIAL = re.compile(
    r"(?i)[?&;][a-z0-9_.-]*(?:token|key|secret|passw(?:or)?d|pwd|sig|signature|auth"
    r"|credential)s?[a-z0-9_.-]*=(?P<v>[^&#\s\"']+)"
)
# A credential flag with its value inside one string (``sh -c "... --api-key sk-X"``, an
# ``EXTRA_ARGS`` value): ``--api-key X``, ``--hf-token=X``.
_FLAG_CREDENTIAL = re.compile(
    r"(?i)(?<![\w-])--[a-z0-9-]*(?:token|api-key|secret|password)(?:=|\s+)[\"']?"
    r"(?P<v>[^\s\"';&|-][^\s\"';&|]*)"
)
# A userinfo without a scheme, before a registry host and a path: ``u:PW@registry.example/
# org/image:tag`` (an image reference someone wrote a login into; validate and import
# quoted it whole, file fuzzer #38). Not an image digest (``name:tag@sha256:...``), which
# has the same shape but a hash after its ``@``.
_BARE_USERINFO = re.compile(
    r"(?<![\w.+/:@%-])[A-Za-z0-9._-]+:(?P<v>[^\s/:@'\"]+)@"
    r"(?![a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-fA-F]{32,})"
    r"(?=[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?::[0-9]+)?/)"
)
_SCHEMES = frozenset({"bearer", "basic", "token", "digest"})
# Text one of the patterns cannot match without (lower case): an ASCII value holding none of
# it matches none of them.
_SCREEN = re.compile(
    "://|authorization|api-key|x-auth-token|x-access-token|cookie|bearer|token|secret|password"
)


@functools.lru_cache(maxsize=8192)
def embedded_credential(value: str) -> str | None:
    """What credential ``value`` carries inside it, or None: ``"an Authorization header"``
    (a header with a credential: ``EXTRA_HEADERS="Authorization: Bearer ..."``), ``"a bearer
    token"``, ``"a password in a URL"`` (``http://user:PASSWORD@host``), ``"a credential in a
    URL's query"`` (``?token=X``), or ``"a credential flag's value"`` (``--api-key X`` inside
    one string: ``sh -c``, ``EXTRA_ARGS``). A ``${VAR}``
    reference in the credential's place is not one (unless it has a literal default)."""
    # Each pattern needs a literal piece of text to match at all; most values (flag values,
    # paths, numbers) hold none of them, and a substring test is far cheaper than a search.
    # Only ASCII text is screened: the patterns' case-insensitive matching folds some
    # non-ASCII letters (U+0130, U+017F) that str.lower() does not map to the same text.
    if value.isascii() and not _SCREEN.search(value.lower()):
        return None
    for pattern, kind in (
        (_URL_PASSWORD, "a password in a URL"),
        (_QUERY_CREDENTIAL, "a credential in a URL's query"),
        (_HEADER_CREDENTIAL, "a credential header"),
        (_BEARER, "a bearer token"),
        (_FLAG_CREDENTIAL, "a credential flag's value"),
    ):
        for m in pattern.finditer(value):
            if _literal_part(m.group("v")):
                return kind
    return None


def _literal_part(text: str) -> bool:
    """Whether ``text`` (a credential's place) holds a literal, not a reference."""
    if text.lower() in _SCHEMES or is_switch(text):
        return False
    if text.startswith("$"):
        return any(not is_switch(d) for d in _reference_defaults(text))
    return True


_DEFAULT = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?[-+]([^}]*)\}")


def _reference_defaults(value: str) -> list[str]:
    """The literal defaults of ``${VAR:-x}`` / ``${VAR-x}`` / ``${VAR:+x}`` in ``value``."""
    if "${" not in value:
        return []
    return [m.group(1) for m in _DEFAULT.finditer(value) if m.group(1)]


def carries_credential(value: str) -> bool:
    """Whether ``value`` has a credential's shape (``sk-...``, ``hf_...``, a JWT) or carries
    one inside it (:func:`embedded_credential`): what the hygiene contract flags whatever
    the value's name."""
    return looks_secret_value(value) or embedded_credential(value) is not None


def shown_value(value: str) -> str:
    """``value`` quoted for a message, or ``(a credential: not shown)`` when it
    :func:`carries_credential`: a check that echoes a value (a stray engine argument) never
    prints what another one masks."""
    return "(a credential: not shown)" if carries_credential(value) else repr(value)


def looks_secret_value(value: str) -> bool:
    """Whether a value has the shape of a known kind of token."""
    return bool(_SECRET_VALUE.match(value))


@functools.lru_cache(maxsize=4096)
def is_secret_flag(token: str) -> bool:
    """Whether a flag (``--hf-token``, ``--api-key=...``) carries a credential."""
    return bool(_SECRET_FLAG.match(token.split("=", 1)[0]))


def secret_positions(
    argv: Sequence[str], resolve: Callable[[str], str] | None = None
) -> list[tuple[int, str]]:
    """(index, literal value) of every credential in an argv, references excluded.

    ``resolve`` maps a flag token to the flag it selects in the engine's parser (an
    abbreviation to its whole name: vLLM's ``--max-num-batched-token`` is
    ``--max-num-batched-tokens``, not a token flag); without it a token is its own name."""

    def secret_flag(token: str) -> bool:
        name = token.split("=", 1)[0]
        return is_secret_flag(resolve(name) if resolve is not None else name)

    out: list[tuple[int, str]] = []
    for i, token in enumerate(argv):
        if token.startswith("--") and "=" in token and secret_flag(token):
            value = token.split("=", 1)[1]
        elif (i > 0 and secret_flag(argv[i - 1]) and not token.startswith("--")) or (
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


# An encoded form shorter than this is too common a string to mask wherever it appears (the
# base64 of a 2-character secret is 3 characters of any word); the raw secret is always masked.
_MIN_ENCODED = 6
# A run of this many characters of a form (raw or encoded) is masked wherever it appears: an
# echo cut short (a truncated line, a 300-character error body) still holds most of a secret.
FRAGMENT_CHARS = 8
# What URL encoders leave unescaped: Python's quote (``_.-~``, and ``/`` by default) and
# JavaScript's encodeURIComponent (``-_.!~*'()``).
_URL_SAFE = ("", "/", "-_.!~*'()")


def _base64_cores(data: bytes) -> set[str]:
    """The base64 characters (standard and URL-safe alphabets) that ``data`` alone decides, at
    each of the 3 byte alignments it may have inside a larger encoded blob.

    A base64 character covers 6 bits; at offset ``k`` bytes the characters from
    ``ceil(8k/6)`` to ``floor(8(k+n)/6)`` hold only the secret's bits, whatever surrounds it.
    """
    out: set[str] = set()
    for k in range(3):
        # Zero bytes around it stand for the unknown neighbours; the slice drops every
        # character they touch, and the '=' padding.
        padded = b"\0" * k + data + b"\0\0"
        start, end = -(-8 * k // 6), (8 * (k + len(data))) // 6
        for encoded in (base64.b64encode(padded), base64.urlsafe_b64encode(padded)):
            out.add(encoded.decode()[start:end])
    return out


def secret_forms(secret: str) -> list[str]:
    """Every way ``secret`` may appear in text tierctl prints or writes, longest first.

    As is; JSON-escaped (a value holding ``"``, ``\\`` or non-ASCII is written escaped in a
    journal line or an echoed request body) and as Python's repr writes it inside quotes;
    URL-encoded (``%XX`` in upper and lower case, ``+`` for a space, with the safe sets of
    common encoders); hex (lower and upper case); base64 in the standard and URL-safe
    alphabets, at each of the 3 alignments a secret can have inside a larger base64 blob (the
    characters its bytes alone decide: :func:`_base64_cores`). Encoded forms shorter than
    ``_MIN_ENCODED`` characters are left out (too common to mask).
    """
    data = secret.encode("utf-8", "surrogatepass")
    plain = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    plain.add(repr(secret)[1:-1])
    encoded: set[str] = {data.hex(), data.hex().upper()}
    for safe in _URL_SAFE:
        for quoted in (quote(data, safe=safe), quote_plus(data, safe=safe)):
            encoded |= {quoted, _lower_escapes(quoted)}
    encoded |= _base64_cores(data)
    forms = {f for f in plain if f} | {f for f in encoded if len(f) >= _MIN_ENCODED}
    return sorted(forms, key=lambda f: (-len(f), f))


_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def _lower_escapes(quoted: str) -> str:
    return _ESCAPE.sub(lambda m: m.group(0).lower(), quoted)


def secret_spans(text: str, secrets: Sequence[str]) -> list[tuple[int, int]]:
    """The merged ``[start, end)`` spans of ``text`` that hold a secret in any form.

    A form of at most ``FRAGMENT_CHARS`` characters is found whole; a longer one is found by
    any run of ``FRAGMENT_CHARS`` of its characters (so a cut-off echo is caught too), and
    overlapping runs join into one span.
    """
    whole: set[str] = set()
    grams: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        for form in secret_forms(secret):
            if len(form) <= FRAGMENT_CHARS:
                whole.add(form)
            else:
                grams.update(
                    form[i : i + FRAGMENT_CHARS] for i in range(len(form) - FRAGMENT_CHARS + 1)
                )
    spans: list[tuple[int, int]] = []
    for form in whole:
        at = text.find(form)
        while at >= 0:
            spans.append((at, at + len(form)))
            at = text.find(form, at + 1)
    if grams:
        n = FRAGMENT_CHARS
        # A cheap pre-filter: only positions whose first two characters begin some run.
        starts = {g[:2] for g in grams}
        for i in range(len(text) - n + 1):
            if text[i : i + 2] in starts and text[i : i + n] in grams:
                spans.append((i, i + n))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def mask(text: str, secrets: Sequence[str], replacement: str = "***") -> str:
    """``text`` with every form of every secret (:func:`secret_forms`), and every run of
    ``FRAGMENT_CHARS`` characters of one, replaced (see :func:`secret_spans`)."""
    spans = secret_spans(text, secrets)
    if not spans:
        return text
    out: list[str] = []
    at = 0
    for start, end in spans:
        out += [text[at:start], replacement]
        at = end
    out.append(text[at:])
    return "".join(out)


# ``:/+``: a URL taken as a path (``repo: http://u:pw@host``) is printed with one slash.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*:/+)([^/\s:@]*):([^/\s@]+)@")
# A userinfo of a user alone (``http://TOKEN@host``): the way many services take a token (a
# GitHub token, a Grafana key), so the user is masked whole. No ``:`` (that is the pattern
# above), no ``/?#`` (the ``@`` of a path or a query is no userinfo's).
_USER_ONLY = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*:/+)([^/\s:@?#]+)@")


def mask_userinfo(text: str, replacement: str = "***") -> str:
    """``text`` with the credential of every URL's userinfo replaced: the password of
    ``http://u:pw@host`` (``http://u:***@host``), the user of ``http://TOKEN@host`` (a user
    alone is often a token: ``http://***@host``).

    Any text that may hold a URL (an endpoint the operator gave, an error naming it) passes
    through this before it is printed or written.
    """
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{replacement}@", text)
    return _USER_ONLY.sub(
        lambda m: m.group(0) if m.group(2) == replacement else f"{m.group(1)}{replacement}@",
        text,
    )


def mask_credentials(text: str, replacement: str = "***") -> str:
    """``text`` with every credential it carries in plain sight replaced: a URL's password, or
    its user when it has no password (:func:`mask_userinfo`), a credential header's value (``Authorization: Bearer ***``,
    ``X-Api-Key=***``), a bearer token, a URL query's credential (``?token=***``) and a
    credential flag's value (``--api-key ***``). For text built from what the operator wrote (an
    error naming a field's value): a value that holds a credential is never echoed whole."""

    def hide(m: re.Match[str]) -> str:
        start, end = m.span("v")
        if _is_reference(m.string, start, end):
            # ``Bearer ${TOKEN}`` names where the secret comes from (the fix tierctl itself
            # suggests): it holds none, so it stays readable.
            return m.group(0)
        return m.string[m.start() : start] + replacement + m.string[end : m.end()]

    text = mask_userinfo(text, replacement)
    for pattern in (
        _HEADER_CREDENTIAL,
        _BEARER,
        _QUERY_CREDENTIAL,
        _FLAG_CREDENTIAL,
        _BARE_USERINFO,
    ):
        text = pattern.sub(hide, text)
    return text


def url_password(url: str) -> str | None:
    """The password in ``url``'s userinfo (``http://u:pw@host``), if it has one."""
    m = _USERINFO.search(url)
    return m.group(3) if m else None


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
