"""Searching text for a secret the way someone reading it would: in every encoding.

Independent of :mod:`tierctl.credentials` on purpose (it is the oracle for its masking): the
text is read as is, URL-decoded, each JSON string literal unescaped, and each base64 (both
alphabets) or hex run decoded at every alignment; a secret is found when any run of
``fragment_chars`` of its characters is in any of those readings.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
from urllib.parse import unquote_plus

_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]{4,}")
_HEX_RUN = re.compile(r"[0-9A-Fa-f]{2,}")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def decodings(text: str, min_bytes: int = 1) -> list[bytes]:
    """Every reading of ``text`` (see the module docstring) that can hold ``min_bytes`` bytes.

    A base64 or hex run too short to decode to ``min_bytes`` bytes cannot hold a fragment
    that long, so it is not decoded (nearly every word of a log is such a run); each distinct
    run is decoded once.
    """
    out = [text.encode("utf-8", "surrogatepass"), unquote_plus(text).encode("utf-8", "replace")]
    for literal in _JSON_STRING.findall(text):
        with contextlib.suppress(ValueError):
            out.append(json.loads(literal).encode("utf-8", "surrogatepass"))
    for run in set(_B64_RUN.findall(text)):
        if len(run) // 4 * 3 < min_bytes:
            continue
        std = run.replace("-", "+").replace("_", "/")
        for k in range(4):
            chunk = std[k:]
            with contextlib.suppress(binascii.Error, ValueError):
                out.append(base64.b64decode(chunk[: len(chunk) // 4 * 4]))
    for run in set(_HEX_RUN.findall(text)):
        if len(run) // 2 < min_bytes:
            continue
        for k in range(2):
            chunk = run[k:]
            out.append(bytes.fromhex(chunk[: len(chunk) // 2 * 2]))
    return out


def holds_fragment(text: str, secret: str, fragment_chars: int = 8) -> bool:
    """Whether any ``fragment_chars`` characters of ``secret`` in a row (as UTF-8) are in a
    reading of ``text``."""
    return holds_any(text, [secret], fragment_chars)


def holds_any(text: str, secrets: list[str], fragment_chars: int = 8) -> bool:
    """:func:`holds_fragment` for several secrets, reading ``text`` once (the readings joined
    by NUL bytes, which no fragment holds: one substring search per fragment)."""
    if not secrets:
        return False
    shortest = min(min(fragment_chars, len(s)) for s in secrets)
    blob = b"\0".join(decodings(text, min_bytes=shortest))
    for secret in secrets:
        n = min(fragment_chars, len(secret))
        for i in range(len(secret) - n + 1):
            if secret[i : i + n].encode() in blob:
                return True
    return False
