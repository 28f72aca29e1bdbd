"""Compose variable interpolation, checked without needing the variables.

Compose substitutes ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``,
``${VAR:?message}``, ``${VAR?message}``, ``${VAR:+alt}``, ``${VAR+alt}`` (nested in the
default/alt part) and writes ``$$`` for a literal ``$``. Validation reads files on a machine
that does not have the deployment's secrets, so the default mode keeps every reference as it
is written (only ``$$`` becomes ``$``) and never fails on an unset required variable; a
malformed reference is still an error, as it is for ``docker compose config``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = (":-", ":?", ":+", "-", "?", "+")


class InterpolationError(ValueError):
    """A malformed ``$`` reference, or (with an environment) an unset required variable."""


@dataclass(frozen=True)
class VarRef:
    """One variable reference as written: ``${NAME<operator><argument>}``."""

    name: str
    operator: str | None
    argument: str | None
    text: str  # the reference exactly as written

    @property
    def required(self) -> bool:
        """``${VAR:?msg}`` / ``${VAR?msg}``: deployment fails when unset."""
        return self.operator in (":?", "?")


def _scan_braced(text: str, start: int) -> int:
    """Index just past the ``}`` closing the ``${`` at ``start`` (nesting-aware)."""
    depth = 0
    i = start
    while i < len(text):
        if text.startswith("$$", i):
            i += 2
            continue
        if text.startswith("${", i):
            depth += 1
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise InterpolationError(f"unclosed '${{' in {text!r}")


def parse(text: str) -> list[str | VarRef]:
    """Split a string into literal pieces (``$$`` already unescaped) and references.

    Raises:
        InterpolationError: malformed reference such as ``${}``, ``${1A}``, ``${A`` or ``$``
            followed by something that is not a name.
    """
    pieces: list[str | VarRef] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        dollar = text.find("$", i)
        if dollar == -1:
            literal.append(text[i:])
            break
        literal.append(text[i:dollar])
        if text.startswith("$$", dollar):
            literal.append("$")
            i = dollar + 2
            continue
        if text.startswith("${", dollar):
            end = _scan_braced(text, dollar)
            ref = _braced(text[dollar:end])
        else:
            match = _NAME.match(text, dollar + 1)
            if match is None:
                raise InterpolationError(
                    f"invalid interpolation format in {text!r}: '$' must be followed by a "
                    "variable name or '{'; write '$$' for a literal '$'"
                )
            end = match.end()
            ref = VarRef(match.group(0), None, None, text[dollar:end])
        if literal:
            pieces.append("".join(literal))
            literal = []
        pieces.append(ref)
        i = end
    if literal and "".join(literal):
        pieces.append("".join(literal))
    return pieces


def _braced(ref_text: str) -> VarRef:
    body = ref_text[2:-1]
    match = _NAME.match(body)
    if match is None:
        raise InterpolationError(f"invalid interpolation format: {ref_text!r} has no variable name")
    rest = body[match.end() :]
    if not rest:
        return VarRef(match.group(0), None, None, ref_text)
    for op in _OPERATORS:
        if rest.startswith(op):
            argument = rest[len(op) :]
            parse(argument)  # a nested reference must be well-formed too
            return VarRef(match.group(0), op, argument, ref_text)
    raise InterpolationError(
        f"invalid interpolation format: {ref_text!r} (allowed after the name: :-  -  :?  ?  :+  +)"
    )


def references(text: str) -> list[VarRef]:
    """The references in ``text`` (outermost only)."""
    return [p for p in parse(text) if isinstance(p, VarRef)]


def interpolate(text: str, env: Mapping[str, str] | None = None) -> str:
    """Substitute references from ``env``; with ``env=None`` keep them as written.

    Raises:
        InterpolationError: malformed text, or a required variable unset in ``env``.
    """
    if "$" not in text:
        return text
    out: list[str] = []
    for piece in parse(text):
        if isinstance(piece, str):
            out.append(piece)
        elif env is None:
            out.append(piece.text)
        else:
            out.append(_resolve(piece, env))
    return "".join(out)


def _resolve(ref: VarRef, env: Mapping[str, str]) -> str:
    value = env.get(ref.name)
    empty = value is None or value == ""
    arg = ref.argument or ""
    if ref.operator == ":-":
        return interpolate(arg, env) if empty else str(value)
    if ref.operator == "-":
        return interpolate(arg, env) if value is None else value
    if ref.operator in (":?", "?"):
        missing = empty if ref.operator == ":?" else value is None
        if missing:
            raise InterpolationError(f"required variable {ref.name} is missing a value: {arg}")
        return str(value)
    if ref.operator == ":+":
        return "" if empty else interpolate(arg, env)
    if ref.operator == "+":
        return "" if value is None else interpolate(arg, env)
    return value or ""
