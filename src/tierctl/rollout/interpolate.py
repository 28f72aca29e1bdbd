"""Compose variable interpolation, the subset ``docker compose config`` applies to values.

Supported: ``$$`` (a literal dollar), ``$VAR``, ``${VAR}``, ``${VAR:-default}``,
``${VAR-default}``, ``${VAR:+alt}``, ``${VAR+alt}``, ``${VAR:?message}``, ``${VAR?message}``,
with nested expressions inside defaults.

A plan compares files, not hosts, so the environment is injected and empty by default: defaults
apply, and a required variable that is not set (``${HF_TOKEN:?...}``, how the renderer writes
secrets) stays as its literal expression. That keeps secret values out of plans and journals and
still shows when the expression itself changed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tierctl.errors import ComposeInputError, Location

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def interpolate(value: str, env: Mapping[str, str], *, where: Location | None = None) -> str:
    """Interpolate one string value the way compose does.

    Args:
        value: The raw string from the compose file.
        env: Variables visible to interpolation.
        where: Where the value sits, for error messages.

    Returns:
        The interpolated string.

    Raises:
        ComposeInputError: An unterminated ``${`` or an invalid expression.
    """
    out, _ = _scan(value, 0, env, where, closing=False)
    return out


def _scan(
    text: str, pos: int, env: Mapping[str, str], where: Location | None, *, closing: bool
) -> tuple[str, int]:
    """Scan from ``pos``; when ``closing``, stop at the ``}`` that ends an enclosing expression."""
    out: list[str] = []
    i = pos
    while i < len(text):
        ch = text[i]
        if closing and ch == "}":
            return "".join(out), i
        if ch != "$":
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "{":
            piece, i = _braced(text, i, env, where)
            out.append(piece)
        else:
            m = _NAME.match(text, i + 1)
            if m is None:
                out.append("$")
                i += 1
            else:
                out.append(env.get(m.group(0), ""))
                i = m.end()
    if closing:
        raise ComposeInputError(
            "unterminated ${ in a compose value",
            location=where,
            rule="every ${ needs a closing }",
            value=text,
            fix="close the expression or write $$ for a literal dollar",
        )
    return "".join(out), i


def _braced(
    text: str, start: int, env: Mapping[str, str], where: Location | None
) -> tuple[str, int]:
    """Evaluate ``${...}`` starting at ``start`` (the ``$``); return the value and the next index."""
    m = _NAME.match(text, start + 2)
    if m is None:
        raise ComposeInputError(
            "invalid interpolation: ${ must be followed by a variable name",
            location=where,
            rule="compose interpolation syntax",
            value=text,
            fix="use ${NAME}, ${NAME:-default} or $$ for a literal dollar",
        )
    name = m.group(0)
    i = m.end()
    op = ""
    for candidate in (":-", ":?", ":+", "-", "?", "+"):
        if text.startswith(candidate, i):
            op = candidate
            i += len(candidate)
            break
    arg, end = ("", i) if not op else _scan(text, i, env, where, closing=True)
    if end >= len(text) or text[end] != "}":
        raise ComposeInputError(
            "unterminated ${ in a compose value",
            location=where,
            rule="every ${ needs a closing }",
            value=text,
            fix="close the expression or write $$ for a literal dollar",
        )
    literal = text[start : end + 1]
    value = env.get(name)
    unset_or_empty = value is None or value == ""
    if op == ":-":
        return (arg if unset_or_empty else str(value)), end + 1
    if op == "-":
        return (arg if value is None else value), end + 1
    if op == ":+":
        return ("" if unset_or_empty else arg), end + 1
    if op == "+":
        return ("" if value is None else arg), end + 1
    if op in (":?", "?"):
        missing = unset_or_empty if op == ":?" else value is None
        return (literal if missing else str(value)), end + 1
    return (value or ""), end + 1
